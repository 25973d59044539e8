#!/bin/bash
# The rolling-upgrade test, as root: the test cluster with two Slurm
# releases at once, as a site has them while it upgrades host by host
# (tests/integration/rolling.sh says which mixes and what is checked).
#
#   tests/rolling-upgrade.sh [OLD NEW]   (default: 24.05 24.11)
#
# In the rolling-OLD-NEW root of tests/stack-root.sh (Debian 13 with its
# Slurm 24.11, or with SchedMD's NEW built from ../shared/src, and
# SchedMD's OLD built from there into /opt/slurm-OLD; about 10 minutes
# the first time, kept after), the tree is built twice, once for each
# release, and the test run.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

die() { echo "tests/rolling-upgrade.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run it as root: it makes a Debian root and starts Slurm's daemons"

if [ "${1:-}" = --in-root ]; then
	OLD=/opt/slurm-$2
	autoreconf -fi > /dev/null 2>&1
	mkdir -p build build-old
	(cd build && ../configure -q --enable-werror && make -s -j"$(nproc)") > build.log 2>&1 ||
		{ tail -n 20 build.log; die "building for $(slurmd -V) failed"; }
	(cd build-old && ../configure -q --enable-werror --with-slurm=$OLD &&
		make -s -j"$(nproc)") > build-old.log 2>&1 ||
		{ tail -n 20 build-old.log; die "building for $($OLD/sbin/slurmd -V) failed"; }
	DT_TOP_BUILDDIR=$top/build DT_ROLLING_OLD=$OLD DT_ROLLING_OLD_BUILD=$top/build-old \
		tests/integration/rolling.sh | tee /tmp/rolling.tap
	! grep -q '^not ok' /tmp/rolling.tap && grep -q '^ok' /tmp/rolling.tap
	exit
fi
case $# in
0) set -- 24.05 24.11 ;;
2) ;;
*) die "usage: tests/rolling-upgrade.sh [OLD NEW], such as 24.05 25.05" ;;
esac
STACK=rolling-$1-$2
tests/stack-root.sh prepare "$STACK"
exec tests/stack-root.sh enter "$STACK" tests/rolling-upgrade.sh --in-root "$1"
