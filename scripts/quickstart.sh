#!/usr/bin/env bash
# From a fresh machine to a first result: install, then run experiments/quickstart.yaml.
# Run as root on Debian 12 (other distributions: docs/provisioning.md). Prints where the results are.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$repo/scripts/install.sh"
venv=${QUICBED_VENV:-$repo/.venv}
cd "$repo"
"$venv/bin/quicbed" doctor
transports=()
if ! "$venv/bin/python" -c 'import sys; from quicbed.apps.quic.implementations import native_binary; sys.exit(native_binary() is None)'; then
  # install.sh warned why the native endpoint did not build; aioquic may be CPU-bound (the report says)
  echo "quickstart.sh: the native QUIC endpoint is not built: QUIC and BQUIC run on aioquic instead" >&2
  transports=(--set 'matrix.transport=[quic, bquic, tcp]' --set 'study.headline.compare=[quic, bquic]')
fi
"$venv/bin/quicbed" run experiments/quickstart.yaml "${transports[@]}" "$@"
