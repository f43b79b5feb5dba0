#!/usr/bin/env bash
# Unpack quinn-proto from crates.io into patched/ and apply quicbed's patches in name order:
# patches/quinn-proto-pacing-rate.patch (a controller with a pacing rate of its own, quicbed's
# BBR, is paced at it; quinn paces every controller from its window),
# patches/quinn-proto-pacing-switch.patch (quinn paces every connection and has no setting
# for it, BQUIC sends without pacing; nor for the pacer's burst, the knob pacing_burst),
# patches/quinn-proto-qlog-acks.patch (the ACK ranges in the qlog, so that spurious losses
# can be counted) and
# patches/quinn-proto-qlog-rtt-ms.patch (RTTs in the qlog in milliseconds, as qlog and qvis
# read them; quinn 0.11 writes seconds). Cargo.toml's
# [patch.crates-io] builds against that copy. Idempotent; needs curl (or the crate in
# cargo's cache), tar, patch.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
name=quinn-proto
version=0.11.19
sha256=0e750cca55fe4f0439a15d0bb529da9651e79993e8e72c61a899a36d462befbe
patch_files=("$here"/patches/*.patch)
dest=$here/patched/$name
stamp=$dest/.quicbed-patch.sha256

want=$(cat "${patch_files[@]}" | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
for tool in tar patch sha256sum; do
  command -v "$tool" >/dev/null || { echo "prepare.sh: '$tool' is missing (apt-get install $tool)" >&2; exit 1; }
done

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
crate=$scratch/$name-$version.crate
cached=
for candidate in "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"$name-$version.crate"; do
  [ -f "$candidate" ] && { cached=$candidate; break; }
done
if [ -n "$cached" ]; then
  cp "$cached" "$crate"
else
  command -v curl >/dev/null || { echo "prepare.sh: 'curl' is missing (apt-get install curl)" >&2; exit 1; }
  curl -sSfL --retry 3 -o "$crate" "https://static.crates.io/crates/$name/$version/download" ||
    { echo "prepare.sh: could not download $name $version from crates.io" >&2; exit 1; }
fi
echo "$sha256  $crate" | sha256sum --check --quiet - ||
  { echo "prepare.sh: $name-$version.crate does not have the checksum of the crates.io release" >&2; exit 1; }
tar xzf "$crate" -C "$scratch"
for patch_file in "${patch_files[@]}"; do
  patch --quiet --directory "$scratch/$name-$version" --strip 1 < "$patch_file"
done
echo "$want" > "$scratch/$name-$version/.quicbed-patch.sha256"
mkdir -p "$here/patched"
rm -rf "$dest"
mv "$scratch/$name-$version" "$dest"
echo "prepare.sh: $name $version unpacked into patched/ with ${#patch_files[@]} patches"
