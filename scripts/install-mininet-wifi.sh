#!/usr/bin/env bash
# Install Mininet-WiFi, the Mininet commit it needs, hwsim_mgmt and wmediumd into quicbed's
# virtualenv and /usr/local/bin, by running the Ansible roles mininet_wifi and wmediumd
# (mininet-wifi.yml) on this machine. Run as root after scripts/install.sh (it needs the
# virtualenv's ansible-playbook: install.sh --test or --mininet-wifi runs this script itself).
#
#   scripts/install-mininet-wifi.sh           install, or check in seconds that nothing changed
#   scripts/install-mininet-wifi.sh --force   run the roles even when nothing changed
#
# Sources: each git source comes from upstream (the URL in the role's defaults, at the role's
# pinned commit) when upstream answers; otherwise from a local mirror, a bare repository
# NAME.git in $QUICBED_MIRRORS (default: ../shared/mirrors beside this checkout) holding the
# same pinned commit. Nothing unpinned is fetched: the roles check out the pins either way.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${QUICBED_VENV:-$repo/.venv}
mirrors=${QUICBED_MIRRORS:-$repo/../shared/mirrors}
state_dir=/var/lib/quicbed/mininet-wifi
force=false
for arg in "$@"; do
  case $arg in
    --force) force=true ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "install-mininet-wifi.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

say() { printf '\n== %s\n' "$*"; }
die() { printf '\ninstall-mininet-wifi.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root: it installs packages and writes /usr/local/bin"
playbook=$venv/bin/ansible-playbook
[ -x "$playbook" ] || die "no ansible-playbook in $venv (fix: scripts/install.sh --mininet-wifi, which installs it first)"
command -v git >/dev/null || die "git is missing (fix: apt-get install git)"

# What decides the installation: the roles, the playbook, quicbed's setup.py (the mininet-wifi
# extra) and constraints.txt, and the virtualenv. Unchanged, with every product in place, the roles are not run.
recipe=$(cd "$repo" && { find roles/mininet_wifi roles/wmediumd -type f | sort | xargs sha256sum; \
                         sha256sum mininet-wifi.yml setup.py constraints.txt; echo "$venv"; } | sha256sum | cut -c1-16)
products=(/usr/local/bin/mnexec /usr/local/bin/hwsim_mgmt /usr/local/bin/wmediumd)
installed() {
  [ "$(cat "$state_dir/recipe" 2>/dev/null)" = "$recipe" ] || return 1
  local product
  for product in "${products[@]}"; do [ -x "$product" ] || return 1; done
  "$venv/bin/python" -c 'import mn_wifi.net' 2>/dev/null
}
if ! $force && installed; then
  echo "install-mininet-wifi.sh: Mininet-WiFi and wmediumd are installed (recipe $recipe; --force runs the roles again)"
  exit 0
fi

# source name (the mirror's NAME.git), role variable, the role whose defaults pin it
sources=(
  "mininet mininet_wifi_mininet_repo mininet_wifi"
  "mininet-wifi mininet_wifi_repo mininet_wifi"
  "mac80211_hwsim_mgmt mininet_wifi_hwsim_mgmt_repo mininet_wifi"
  "wmediumd wmediumd_repo wmediumd"
)
upstream_of() { sed -n "s/^$1: *//p" "$repo/roles/$2/defaults/main.yml"; }

# git refuses a bare repository without a refs/ folder (an archive of a mirror may lack the empty
# folder), and the mirror may be read-only: the roles clone from a copy with one.
mirror_copies=/var/cache/quicbed/mirrors
mirror_url() {
  local name=$1 copy=$mirror_copies/$1.git
  [ -f "$mirrors/$name.git/HEAD" ] || return 1
  rm -rf "$copy" && mkdir -p "$mirror_copies"
  cp -r "$mirrors/$name.git" "$copy" && chmod -R u+w "$copy" && mkdir -p "$copy/refs/heads" "$copy/refs/tags"
  git --git-dir="$copy" rev-parse --verify -q HEAD >/dev/null || return 1
  echo "file://$copy"
}

extra=(-e "quicbed_src=$repo" -e "quicbed_venv=$venv")
for entry in "${sources[@]}"; do
  read -r name variable role <<<"$entry"
  url=$(upstream_of "$variable" "$role")
  [ -n "$url" ] || die "roles/$role/defaults/main.yml has no $variable"
  if GIT_TERMINAL_PROMPT=0 timeout 30 git ls-remote --exit-code "$url" HEAD >/dev/null 2>&1; then
    echo "install-mininet-wifi.sh: $name from upstream, $url"
  elif url=$(mirror_url "$name"); then
    echo "install-mininet-wifi.sh: $name from the local mirror $mirrors/$name.git (upstream does not answer)"
    extra+=(-e "$variable=$url")
  else
    die "$name: upstream ($(upstream_of "$variable" "$role")) does not answer and there is no mirror $mirrors/$name.git (fix: give this machine access to it, or set QUICBED_MIRRORS to a folder of bare repositories at the roles' pins)"
  fi
done

say "running the roles wmediumd and mininet_wifi (mininet-wifi.yml; the first time takes a few minutes)"
started=$(date +%s)
(cd "$repo" && ANSIBLE_CONFIG="$repo/ansible.cfg" ANSIBLE_NOCOLOR=1 "$playbook" mininet-wifi.yml "${extra[@]}") \
  || die "the roles failed (above); fix what the failed task names and run this script again"
missing=()
for product in "${products[@]}"; do [ -x "$product" ] || missing+=("$product"); done
[ ${#missing[@]} -eq 0 ] || die "the roles ran but did not install ${missing[*]}"
"$venv/bin/python" -c 'import mn_wifi.net' || die "the roles ran but mn_wifi does not import in $venv (above)"
mkdir -p "$state_dir"
echo "$recipe" >"$state_dir/recipe"
echo "install-mininet-wifi.sh: done in $(( $(date +%s) - started )) s"
