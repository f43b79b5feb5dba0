#!/usr/bin/env bash
# From a fresh machine to a first result: install, then run experiments/quickstart.yaml.
# Run as root on Debian 12 / Ubuntu 22.04+. Prints where the results are.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$repo/scripts/install.sh"
venv=${QUICBED_VENV:-$repo/.venv}
cd "$repo"
"$venv/bin/quicbed" doctor
"$venv/bin/quicbed" run experiments/quickstart.yaml "$@"
