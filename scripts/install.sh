#!/usr/bin/env bash
# Install what quicbed needs on a Debian or Ubuntu machine. Run as root; safe to run again.
#
#   scripts/install.sh            runtime: tools, Python virtualenv, microVM kernel
#   scripts/install.sh --test     also what the test suite needs (ansible, vagrant)
#   scripts/install.sh --no-vm    skip the microVM kernel download
#
# The virtualenv is QUICBED_VENV (default: .venv in this checkout); `quicbed` is linked into
# /usr/local/bin unless that name is taken by something else.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${QUICBED_VENV:-$repo/.venv}
with_tests=false
with_vm=true
for arg in "$@"; do
  case $arg in
    --test) with_tests=true ;;
    --no-vm) with_vm=false ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

say() { printf '\n== %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (sudo $0 $*): it installs packages and the microVM kernel" >&2
  exit 1
fi

packages=(iproute2 iputils-ping ethtool tcpdump iperf3 nginx curl kmod procps psmisc ca-certificates
          python3 python3-venv python3-pip util-linux libns3-dev g++ make)
$with_vm && packages+=(qemu-system-x86 file binutils)
$with_tests && packages+=(vagrant git)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing distribution packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
  # the distribution's nginx service is not needed: quicbed starts its own per namespace
  if systemctl is-active --quiet nginx 2>/dev/null; then systemctl disable --now nginx >/dev/null 2>&1 || true; fi
fi

python=$(command -v python3)
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "install.sh: quicbed needs Python >= 3.10; $python is $("$python" --version)" >&2
  exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
  say "creating the virtualenv $venv"
  "$python" -m venv "$venv"
fi
extras="vm"
$with_tests && extras="vm,test"
say "installing quicbed into $venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e "$repo[$extras]"

if [ ! -e /usr/local/bin/quicbed ] || [ "$(readlink -f /usr/local/bin/quicbed)" = "$(readlink -f "$venv/bin/quicbed")" ] \
   || grep -q quicbed "$(readlink -f /usr/local/bin/quicbed)" 2>/dev/null; then
  ln -sfn "$venv/bin/quicbed" /usr/local/bin/quicbed
fi

virtiofsd_dir=/var/lib/quicbed/virtiofsd
if $with_vm && ! command -v virtiofsd >/dev/null && [ ! -x /usr/libexec/virtiofsd ] \
   && [ ! -x "$virtiofsd_dir/bin/virtiofsd" ]; then
  # virtiofs makes the microVM's file access (and so Python start-up) 2-3x faster than 9p.
  if apt-cache show virtiofsd >/dev/null 2>&1; then
    say "installing virtiofsd"
    apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 virtiofsd
  elif command -v cargo >/dev/null; then
    say "building virtiofsd from crates.io into $virtiofsd_dir (about 3 minutes, once)"
    apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 libseccomp-dev libcap-ng-dev pkg-config
    cargo install --quiet --locked --root "$virtiofsd_dir" virtiofsd@1.14.0 \
      || echo "install.sh: building virtiofsd failed: the microVM will use 9p (slower file access)" >&2
  else
    echo "install.sh: no virtiofsd package and no cargo: the microVM will use 9p (slower file access)" >&2
  fi
fi

if $with_vm; then
  say "preparing the microVM (distribution kernel into /var/lib/quicbed/kernel)"
  "$venv/bin/quicbed" vm setup
fi
say "done: quicbed $("$venv/bin/quicbed" --version | cut -d' ' -f2) in $venv"
