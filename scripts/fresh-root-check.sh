#!/usr/bin/env bash
# Run the README's two commands where nothing was installed by hand: a new minimal Debian root
# (mmdebstrap, minbase, from this machine's apt sources) gets a copy of this checkout, then
# scripts/quickstart.sh (2 repetitions) and scripts/test.sh run inside it. A missing install
# step fails here even when this machine has the package. CI runs this (.ci/run).
#
#   scripts/fresh-root-check.sh                  both commands; the root is removed afterwards
#   scripts/fresh-root-check.sh --keep           keep the root (path printed) for a look inside
#   scripts/fresh-root-check.sh --skip-quickstart
#   scripts/fresh-root-check.sh -- ARGS          ARGS go to scripts/test.sh (so to pytest)
#
# Run as root on Debian 12 (or a machine whose apt sources are Debian 12's). Only what says how
# this machine reaches the package registries is carried into the root (apt sources and
# Acquire options, extra CA certificates, /etc/pip.conf, proxy and CA-bundle variables), as a
# new machine on the same network would have it, and the local git mirrors Mininet-WiFi installs
# from where upstream is unreachable ($QUICBED_MIRRORS or ../shared/mirrors, bound read-only at
# the same place beside the copied checkout). The root lives under /var/tmp (the
# microVM cannot share a folder under /tmp) and is removed on exit, also on Ctrl-C.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
suite=${QUICBED_FRESH_SUITE:-bookworm}
keep=false
quickstart=true
test_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --keep) keep=true ;;
    --skip-quickstart) quickstart=false ;;
    --) shift; test_args=("$@"); break ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "fresh-root-check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

say() { printf '\n== fresh root: %s\n' "$*"; }
die() { printf 'fresh-root-check.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root: it builds a root filesystem and mounts /proc, /sys and /dev into it"
if ! command -v mmdebstrap >/dev/null; then
  say "installing mmdebstrap"
  DEBIAN_FRONTEND=noninteractive apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap
fi

root=$(mktemp -d /var/tmp/quicbed-fresh-root.XXXXXX)
started=$(date +%s)
elapsed() { local s=$(( $(date +%s) - started )); printf '%d min %02d s' $((s / 60)) $((s % 60)); }

mounted_under_root() { awk -v r="$root" '$5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo; }

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  # Whatever still runs from the root (a daemon a package started, a test's leftover) goes first.
  local pid
  for pid in /proc/[0-9]*; do
    [ "$(readlink "$pid/root" 2>/dev/null)" = "$root" ] && kill -9 "${pid#/proc/}" 2>/dev/null
  done
  sleep 1
  local target
  for target in $(mounted_under_root | sort -r); do umount -l "$target" 2>/dev/null || true; done
  if $keep; then
    echo "fresh-root-check.sh: the root is kept in $root (unmounted)" >&2
  elif [ -n "$(mounted_under_root)" ]; then
    echo "fresh-root-check.sh: $root still has mounts; not removing it" >&2
  else
    rm -rf --one-file-system "$root"
  fi
  echo "fresh-root-check.sh: $(elapsed) in all, exit $status" >&2
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# This machine's way to the package archive: its enabled apt sources and Acquire options.
sources=()
for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -s "$file" ] && sources+=("$file")
done
[ ${#sources[@]} -gt 0 ] || die "no apt sources found in /etc/apt"
aptopts=()
for file in /etc/apt/apt.conf.d/*; do
  grep -qE '^[[:space:]]*Acquire::' "$file" 2>/dev/null && aptopts+=("--aptopt=$file")
done

say "building a minimal Debian ($suite) root in $root"
mmdebstrap --quiet --variant=minbase --include=ca-certificates "${aptopts[@]}" "$suite" "$root" "${sources[@]}"

# Trust, proxy and package-index settings of this machine's network (not quicbed's install).
if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
  cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
# Services that packages install must not start in the host's network namespace.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

say "copying the checkout (tracked and untracked files that git does not ignore)"
checkout=/root/quicbed
mkdir -p "$root$checkout"
git -C "$repo" ls-files -z --cached --others --exclude-standard \
  | (cd "$repo" && xargs -0 -r stat --printf '%n\0' 2>/dev/null) \
  | tar -C "$repo" --null -T - -cf - | tar -C "$root$checkout" -xf -

# The root must be a mount point of its own, as / is on a machine: 'ip netns exec' and 'ip -n'
# remount / (make-rslave) in their own mount namespace and fail on a plain directory.
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
mkdir -p "$root/run/lock"
# Where upstream git hosts are unreachable, Mininet-WiFi installs from local mirrors beside the
# checkout (scripts/install-mininet-wifi.sh): the root sees them at the same relative place.
mirrors=${QUICBED_MIRRORS:-$repo/../shared/mirrors}
if [ -d "$mirrors" ]; then
  mkdir -p "$root$checkout/../shared/mirrors"
  mount --bind "$mirrors" "$root$checkout/../shared/mirrors"
  mount -o remount,bind,ro "$root$checkout/../shared/mirrors"
fi

environment=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb)
for name in CI http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY PIP_INDEX_URL PIP_EXTRA_INDEX_URL \
            PIP_TRUSTED_HOST PIP_CERT PIP_DEFAULT_TIMEOUT SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE CURL_CA_BUNDLE; do
  [ -n "${!name:-}" ] && environment+=("$name=${!name}")
done
inside() { chroot "$root" /usr/bin/env -i "${environment[@]}" /bin/bash -c "cd $checkout && $1"; }

if $quickstart; then
  say "README command 1: ./scripts/quickstart.sh (2 repetitions)"
  inside "./scripts/quickstart.sh --repetitions 2"
fi
say "README command 2: ./scripts/test.sh ${test_args[*]:-}"
inside "./scripts/test.sh $(printf '%q ' "${test_args[@]}")"
say "both commands passed in $(elapsed)"
