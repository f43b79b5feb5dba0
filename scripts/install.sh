#!/usr/bin/env bash
# Install what quicbed needs on a Debian or Ubuntu machine. Run as root; safe to run again.
#
#   scripts/install.sh            the main job (ns-3 backend, endpoints, captures) and, if it
#                                 can, the microVM (QEMU, busybox-static, a distribution kernel)
#   scripts/install.sh --test     also what the test suite needs (ansible, vagrant, Mininet-WiFi);
#                                 the microVM is then required, because the netem tests run in it
#   scripts/install.sh --mininet-wifi  also Mininet-WiFi and wmediumd (scripts/install-mininet-wifi.sh)
#   scripts/install.sh --no-mininet-wifi  --test without Mininet-WiFi (its tests then skip)
#   scripts/install.sh --no-vm    skip the microVM
#   scripts/install.sh --no-uml   skip the virtual-time kernel (User-Mode Linux, built from source)
#   scripts/install.sh --no-native  skip the native QUIC endpoint (Rust, native/quinn)
#   scripts/install.sh --plan     print the packages and host settings it would install, and stop
#   scripts/install.sh --host-settings  only apply the host settings (sysctls, kernel modules,
#                                 NetworkManager exclusions), and stop
#
# The package lists, sysctls, boot-time modules and NetworkManager exclusions are the Ansible
# roles' own (roles/*/defaults/main.yml), read from there, so both install paths install the same.
#
# The main job's parts must install or this script fails. The microVM, the virtual-time kernel
# and the native QUIC endpoint are optional for the main job: when one fails, the script warns
# with the fix and goes on (with --test all three are required, and Mininet-WiFi too).
# The virtualenv is QUICBED_VENV (default: .venv in this checkout); `quicbed` is linked into
# /usr/local/bin unless that name is taken by something else.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${QUICBED_VENV:-$repo/.venv}
with_tests=false
with_vm=true
with_uml=true
with_native=true
with_mininet_wifi=default
plan_only=false
host_settings_only=false
for arg in "$@"; do
  case $arg in
    --test) with_tests=true ;;
    --no-vm) with_vm=false ;;
    --no-uml) with_uml=false ;;
    --no-native) with_native=false ;;
    --mininet-wifi) with_mininet_wifi=true ;;
    --no-mininet-wifi) with_mininet_wifi=false ;;
    --plan) plan_only=true ;;
    --host-settings) host_settings_only=true ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
vm_required=$with_tests
[ "$with_mininet_wifi" = default ] && with_mininet_wifi=$with_tests

say() { printf '\n== %s\n' "$*"; }
warn() { printf '\ninstall.sh: warning: %s\n' "$*" >&2; }
die() { printf '\ninstall.sh: %s\n' "$*" >&2; exit 1; }

# An optional part that failed: fatal when the tests need it, a warning otherwise.
native_failed() {
  if $with_tests; then die "$1"; fi
  warn "$1; the native QUIC transports (quic-native, bquic-native) are unavailable until it is fixed"
}
uml_failed() {
  if $with_tests; then die "$1 (the tests need the virtual-time kernel; --no-uml installs without it, and its tests skip)"; fi
  warn "$1; 'quicbed run --clock virtual' is unavailable until it is fixed (the real-time clock works without it)"
}
optional_failed() {
  if $vm_required; then
    die "$1 (the tests need the microVM; run with --no-vm to install without it, and the tests that need it skip)"
  fi
  warn "$1. The main job (scripts/quickstart.sh, ns-3 backend) does not need it and works without it."
}

# A list or mapping from a role's defaults/main.yml, one item per line ("key: value" for a
# mapping). Those files keep these variables in block style so that this reader suffices.
role_default() {
  local file=$repo/roles/$1/defaults/main.yml
  awk -v key="$2:" '
    $0 == key { found = 1; next }
    found && /^[^ #]/ { exit }
    found && /^ *#/ { next }
    found && /^  - / { sub(/^  - /, ""); sub(/ +#.*/, ""); gsub(/"/, ""); print; next }
    found && /^  [^ ]/ { sub(/^  /, ""); sub(/ +#.*/, ""); gsub(/"/, ""); print }
  ' "$file"
}
# A scalar from a role's defaults/main.yml.
role_scalar() { awk -v key="$2:" '$1 == key { print $2; exit }' "$repo/roles/$1/defaults/main.yml"; }

# The main job: endpoints, captures, the ns-3 channel (built with g++), Python.
mapfile -t common_packages < <(role_default common common_packages)
mapfile -t ns3_packages < <(role_default ns3 ns3_packages)
mapfile -t nginx_packages < <(role_default nginx nginx_packages)
required_packages=("${common_packages[@]}" "${ns3_packages[@]}" "${nginx_packages[@]}")
# The microVM: QEMU, virtme-ng's initramfs needs a static busybox and 'file' to check it.
mapfile -t vm_packages < <(role_default common common_microvm_packages)
# The virtual-time kernel: Debian's kernel source and what compiling it needs.
mapfile -t uml_packages < <(role_default uml_kernel uml_kernel_packages)
# What the tests need beyond the main job.
mapfile -t test_packages < <(role_default common common_test_packages)
# Host settings (what roles/common does): minimum sysctls, congestion controls namespaces may
# pick, modules loaded now and at boot, interfaces NetworkManager must leave alone.
mapfile -t sysctls < <(role_default common common_sysctls)
mapfile -t congestion_controls < <(role_default common common_tcp_congestion_controls)
mapfile -t kernel_modules < <(role_default common common_kernel_modules)
mapfile -t module_params < <(role_default common common_kernel_module_params)
mapfile -t modules_at_boot < <(role_default common common_modules_load_at_boot)
mapfile -t nm_unmanaged < <(role_default common common_nm_unmanaged_devices)
sysctl_file=$(role_scalar common common_sysctl_file)
nm_conf_file=$(role_scalar common common_nm_conf_file)

if $plan_only; then
  planned=("${required_packages[@]}")
  $with_vm && planned+=("${vm_packages[@]}")
  $with_uml && planned+=("${uml_packages[@]}")
  $with_tests && planned+=("${test_packages[@]}")
  printf 'package %s\n' "${planned[@]}"
  printf 'sysctl %s\n' "${sysctls[@]}"
  printf 'congestion-control %s\n' "${congestion_controls[@]}"
  printf 'module %s\n' "${kernel_modules[@]}"
  printf 'module-param %s\n' "${module_params[@]}"
  printf 'module-at-boot %s\n' "${modules_at_boot[@]}"
  printf 'nm-unmanaged %s\n' "${nm_unmanaged[@]}"
  printf 'file %s\n' "$sysctl_file" "$nm_conf_file" /etc/modules-load.d/quicbed.conf
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (sudo $0 $*): it installs packages and the microVM kernel" >&2
  exit 1
fi

missing_of() {
  local package
  for package in "$@"; do
    dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || printf '%s\n' "$package"
  done
}

apt_updated=false
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if ! $apt_updated; then
    apt-get update -q || return 1
    apt_updated=true
  fi
  apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "$@"
}

# The host settings roles/common makes. Like the role, a refused write (a container's read-only
# /proc/sys, a kernel without the module) is reported and does not stop the install.
apply_host_settings() {
  local entry key value current params cc available allowed wanted=() persist=() not_loaded=()
  available=$(cat /proc/sys/net/ipv4/tcp_available_congestion_control)
  for entry in "${kernel_modules[@]}"; do
    [ -d "/sys/module/$entry" ] && continue
    # a congestion control built into the kernel has no module
    [[ $entry == tcp_* && " $available " == *" ${entry#tcp_} "* ]] && continue
    params=$(printf '%s\n' "${module_params[@]}" | awk -v m="$entry:" '$1 == m { $1 = ""; print }')
    # shellcheck disable=SC2086  # the parameters are words
    modprobe "$entry" $params 2>/dev/null || not_loaded+=("$entry")
  done
  [ ${#not_loaded[@]} -eq 0 ] \
    || warn "kernel modules not loaded: ${not_loaded[*]} (the microVM and the virtual-time kernel have them; 'quicbed doctor' says which backends need them)"
  mkdir -p /etc/modules-load.d
  { echo "# quicbed: kernel modules loaded at boot (scripts/install.sh, as roles/common)."
    printf '%s\n' "${modules_at_boot[@]}"; } > /etc/modules-load.d/quicbed.conf
  for entry in "${sysctls[@]}"; do
    key=${entry%%:*}; value=${entry#*: }
    current=$(sysctl -n "$key" 2>/dev/null || echo 0)
    if [ "$current" -lt "$value" ]; then
      sysctl -q -w "$key=$value" >/dev/null || warn "the kernel refused sysctl $key=$value"
    else
      value=$current
    fi
    persist+=("$key = $value")
  done
  available=$(cat /proc/sys/net/ipv4/tcp_available_congestion_control)  # a module may have added one
  allowed=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
  for cc in "${congestion_controls[@]}"; do
    [[ " $available " == *" $cc "* ]] && wanted+=("$cc")
  done
  for cc in $allowed; do
    [[ " ${wanted[*]} " == *" $cc "* ]] || wanted+=("$cc")
  done
  # The kernel lists them in its own order: only a missing one calls for a write.
  if printf '%s\n' "${wanted[@]}" | grep -qvxF -f <(tr ' ' '\n' <<<"$allowed"); then
    sysctl -q -w "net.ipv4.tcp_allowed_congestion_control=${wanted[*]}" >/dev/null \
      || warn "the kernel refused the allowed TCP congestion controls ${wanted[*]}"
  fi
  persist+=("net.ipv4.tcp_allowed_congestion_control = ${wanted[*]}")
  mkdir -p "$(dirname "$sysctl_file")"
  { echo "# quicbed: socket buffer ceilings and TCP congestion controls for namespaces."
    printf '%s\n' "${persist[@]}"; } > "$sysctl_file"
  if [ -x /usr/sbin/NetworkManager ]; then
    mkdir -p "$(dirname "$nm_conf_file")"
    printf '# quicbed: NetworkManager must leave emulated wireless interfaces alone.\n[keyfile]\nunmanaged-devices=%s\n' \
      "$(IFS=';'; echo "${nm_unmanaged[*]}")" > "$nm_conf_file"
    nmcli general reload >/dev/null 2>&1 || true
  fi
}
if $host_settings_only; then
  if ! command -v sysctl >/dev/null || ! command -v modprobe >/dev/null; then
    die "--host-settings needs sysctl and modprobe (procps, kmod): run install.sh without it first"
  fi
  apply_host_settings
  exit 0
fi

# Debian 12 is where quicbed is built and tested. Ubuntu 22.04 was tried in a fresh root and
# cannot run it (docs/provisioning.md): refused before anything is installed.
# shellcheck source=/dev/null  # (QUICBED_OS_RELEASE: another file, for the tests)
distribution=$( . "${QUICBED_OS_RELEASE:-/etc/os-release}" 2>/dev/null && echo "${ID:-unknown} ${VERSION_ID:-?}")
case $distribution in
  "debian "1[2-9]*) ;;
  "ubuntu "2[0-3].*)
    die "$distribution is not supported: its ns-3 (3.35) is older than the 3.37 the ns3 backend is written for, its Python (3.10) older than the pinned packages need (3.11), its cargo (1.75) older than the native endpoint needs (1.80), and it has no linux-source-6.12 for the virtual-time kernel (docs/provisioning.md). Use Debian 12 (Vagrant: the default box)" ;;
  *) warn "$distribution is untested (quicbed is built and tested on Debian 12); going on" ;;
esac

wanted=("${required_packages[@]}")
$with_tests && wanted+=("${test_packages[@]}")
mapfile -t missing < <(missing_of "${wanted[@]}")
if [ ${#missing[@]} -gt 0 ]; then
  say "installing distribution packages: ${missing[*]}"
  apt_install "${missing[@]}" || die "could not install ${missing[*]} with apt-get (see above)"
  # the distribution's nginx service is not needed: quicbed starts its own per namespace
  if systemctl is-active --quiet nginx 2>/dev/null; then systemctl disable --now nginx >/dev/null 2>&1 || true; fi
fi
if $with_vm; then
  mapfile -t missing < <(missing_of "${vm_packages[@]}")
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing the microVM's packages: ${missing[*]}"
    apt_install "${missing[@]}" || optional_failed "could not install ${missing[*]} (fix: apt-get install ${missing[*]})"
  fi
fi

if $with_uml; then
  mapfile -t missing < <(missing_of "${uml_packages[@]}")
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing the virtual-time kernel's source and compilers: ${missing[*]}"
    apt_install "${missing[@]}" || uml_failed "could not install ${missing[*]} (fix: apt-get install ${missing[*]})"
  fi
fi

say "host settings: sysctls ($sysctl_file), kernel modules, NetworkManager exclusions"
apply_host_settings

python=$(command -v python3)
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  die "quicbed needs Python >= 3.11 (its pinned packages, constraints.txt); $python is $("$python" --version)"
fi
if [ ! -x "$venv/bin/python" ]; then
  say "creating the virtualenv $venv"
  "$python" -m venv "$venv"
fi
extras="vm"
$with_tests && extras="vm,test"
# Mininet-WiFi is installed by Ansible roles, run from the virtualenv
$with_mininet_wifi && ! $with_tests && extras="vm,test"
# Every Python package at the version constraints.txt pins (scripts/refresh-constraints.sh makes
# it), so that machines installed weeks apart measure with the same stack; QUICBED_CONSTRAINTS=
# (empty) installs within setup.py's ranges instead.
constraints=${QUICBED_CONSTRAINTS-$repo/constraints.txt}
pinned=()
[ -n "$constraints" ] && pinned=(--constraint "$constraints")
say "installing quicbed[$extras] into $venv${constraints:+ (versions from $constraints)}"
"$venv/bin/python" -m pip install -q --upgrade "${pinned[@]}" pip setuptools wheel
"$venv/bin/python" -m pip install -q "${pinned[@]}" -e "${repo}[$extras]"
# pip resolves one install at a time; 'pip check' proves that everything installed fits together.
"$venv/bin/python" -m pip check || die "the virtualenv $venv has conflicting requirements (above); fix setup.py's pins"

if [ ! -e /usr/local/bin/quicbed ] || [ "$(readlink -f /usr/local/bin/quicbed)" = "$(readlink -f "$venv/bin/quicbed")" ] \
   || grep -q quicbed "$(readlink -f /usr/local/bin/quicbed)" 2>/dev/null; then
  ln -sfn "$venv/bin/quicbed" /usr/local/bin/quicbed
fi

virtiofsd_dir=/var/lib/quicbed/virtiofsd
if $with_vm && ! command -v virtiofsd >/dev/null && [ ! -x /usr/libexec/virtiofsd ] \
   && [ ! -x "$virtiofsd_dir/bin/virtiofsd" ]; then
  # virtiofs makes the microVM's file access (and so Python start-up) 2-3x faster than 9p;
  # without it the microVM uses 9p, so a failure here only costs speed.
  if apt-cache show virtiofsd >/dev/null 2>&1; then
    say "installing virtiofsd"
    apt_install virtiofsd || warn "installing virtiofsd failed: the microVM will use 9p (slower file access)"
  elif command -v cargo >/dev/null; then
    say "building virtiofsd from crates.io into $virtiofsd_dir (about 3 minutes, once)"
    { apt_install libseccomp-dev libcap-ng-dev pkg-config \
      && cargo install --quiet --locked --root "$virtiofsd_dir" virtiofsd@1.14.0; } \
      || warn "building virtiofsd failed: the microVM will use 9p (slower file access)"
  else
    warn "no virtiofsd package and no cargo: the microVM will use 9p (slower file access)"
  fi
fi

# The native QUIC endpoint: Rust from the distribution (Debian 12's cargo-web is 1.96; the
# plain cargo package is too old there), crates from crates.io as pinned in Cargo.lock, and
# quinn-proto with quicbed's patches: the pacing switch, pacing at a controller's own rate,
# the ACK ranges and RTT units in the qlog (native/quinn/prepare.sh needs patch).
native_min_rust=1.80
cargo_recent() {
  local version
  version=$("$1" --version 2>/dev/null | awk '{print $2}')
  [ -n "$version" ] && [ "$(printf '%s\n%s\n' "$native_min_rust" "$version" | sort -V | head -1)" = "$native_min_rust" ]
}
if $with_native; then
  cargo_bin=$(command -v cargo || true)
  if [ -z "$cargo_bin" ] || ! cargo_recent "$cargo_bin"; then
    rust_package=cargo
    apt-cache show cargo-web >/dev/null 2>&1 && rust_package=cargo-web
    say "installing Rust for the native QUIC endpoint ($rust_package)"
    apt_install "$rust_package" || true
    cargo_bin=$(command -v cargo || true)
  fi
  if [ -z "$cargo_bin" ] || ! cargo_recent "$cargo_bin"; then
    native_failed "the native QUIC endpoint needs cargo >= $native_min_rust (found: $("${cargo_bin:-cargo}" --version 2>/dev/null || echo none); fix: install Rust with rustup, then run this script again)"
  else
    say "building the native QUIC endpoint (native/quinn, $("$cargo_bin" --version); a few minutes the first time)"
    apt_install patch || true
    if (cd "$repo/native/quinn" && ./prepare.sh && "$cargo_bin" build --release --locked --quiet); then
      install -m 0755 "$repo/native/quinn/target/release/quicbed-quinn" "$venv/bin/quicbed-quinn"
    else
      native_failed "building native/quinn failed (above; fix: run './prepare.sh && cargo build --release' in native/quinn)"
    fi
  fi
fi

if $with_vm; then
  say "preparing the microVM (distribution kernel into /var/lib/quicbed/kernel, one test boot)"
  "$venv/bin/quicbed" vm setup \
    || optional_failed "the microVM is not ready ('quicbed vm setup' failed above; fix what it names, then run 'quicbed vm setup' again)"
fi
if $with_uml; then
  say "the virtual-time kernel (User-Mode Linux with time travel, built once into /var/lib/quicbed/uml: about 4 minutes on 2 cores)"
  "$venv/bin/quicbed" uml setup \
    || uml_failed "the virtual-time kernel is not ready ('quicbed uml setup' failed above; fix what it names, then run it again)"
fi
if $with_mininet_wifi; then
  say "Mininet-WiFi and wmediumd (Ansible roles mininet_wifi and wmediumd, from upstream or local mirrors)"
  "$repo/scripts/install-mininet-wifi.sh" \
    || die "Mininet-WiFi is not installed (above; --no-mininet-wifi installs without it, and its tests skip)"
fi
say "done: quicbed $("$venv/bin/quicbed" --version | cut -d' ' -f2) in $venv"
