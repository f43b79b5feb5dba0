#!/usr/bin/env bash
# Write constraints.txt: the exact version of every Python package quicbed, its tests, the
# microVM and Mininet-WiFi's imports install, resolved afresh from setup.py's ranges (and pip,
# setuptools and wheel themselves). scripts/install.sh, the Ansible roles and so CI install with
# it, so hosts installed weeks apart measure with the same stack.
#
#   scripts/refresh-constraints.sh              resolve with this machine's python3 (Debian 12:
#                                               3.11, the version the file is made for)
#   PYTHON=/usr/bin/python3.12 scripts/refresh-constraints.sh
#
# Then review the diff (git diff constraints.txt), run the tests, and commit it. setup.py keeps
# its ranges for people who install the package alone (pip install quicbed).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip setuptools wheel
"$work/venv/bin/python" -m pip install -q "${repo}[vm,test,mininet-wifi]"
"$work/venv/bin/python" -m pip check
{
  echo "# Exact versions of quicbed's Python requirements (all extras), made by scripts/refresh-constraints.sh"
  echo "# on $(date -u +%Y-%m-%d) with $("$work/venv/bin/python" --version) ($(. /etc/os-release && echo "$PRETTY_NAME"))."
  echo "# Used by scripts/install.sh and the Ansible roles (pip install -c constraints.txt)."
  "$work/venv/bin/python" -m pip freeze --all --exclude quicbed | LC_ALL=C sort -f
} >"$repo/constraints.txt"
echo "refresh-constraints.sh: wrote $repo/constraints.txt ($(grep -vc '^#' "$repo/constraints.txt") packages)"
