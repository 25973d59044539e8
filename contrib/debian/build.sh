#!/bin/bash
# Build the Debian package of this tree: `make dist`, unpack it, add
# contrib/debian as debian/, dpkg-buildpackage. The .deb goes to OUTDIR.
#
#   contrib/debian/build.sh [OUTDIR]        (default: build-deb/)
#
# Needs dpkg-dev, debhelper and the build dependencies in debian/control
# (contrib/install-deps.sh installs them).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$top/build-deb}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi)
mkdir "$work/dist"
(cd "$work/dist" && "$top/configure" -q && make -s dist)
tar -xzf "$work"/dist/dist-train-*.tar.gz -C "$work"
src=$(echo "$work"/dist-train-*/)
cp -r "$top/contrib/debian" "$src/debian"
rm -f "$src/debian/build.sh"
(cd "$src" && dpkg-buildpackage -us -uc -b)
mkdir -p "$out"
cp "$work"/*.deb "$out"/
ls "$out"/*.deb
