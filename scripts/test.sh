#!/usr/bin/env bash
# Install what the tests need, then run them. Run as root on Debian 12 (other distributions: docs/provisioning.md).
# Extra arguments go to pytest, e.g.  scripts/test.sh -m "not provisioning" -x
# Slow tests are deselected; add --run-slow to include them. The install step includes
# Mininet-WiFi, so a Mininet-WiFi test (mac80211_hwsim, openvswitch) that skips fails the run.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$repo/scripts/install.sh" --test
venv=${QUICBED_VENV:-$repo/.venv}
cd "$repo"
set +e
"$venv/bin/python" -m pytest tests -ra --require-feature mac80211_hwsim --require-feature openvswitch "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$status"
