#!/bin/bash
# The rolling-upgrade test, as root: the test cluster with two Slurm
# releases at once, as a site has them while it upgrades host by host
# (tests/integration/rolling.sh says which mixes and what is checked).
#
#   tests/rolling-upgrade.sh
#
# In the rolling-24.05-24.11 root of tests/stack-root.sh (Debian 13 with
# its Slurm 24.11, and SchedMD's 24.05 built from ../shared/src into
# /opt/slurm-24.05; about 10 minutes the first time, kept after), the tree
# is built twice, once for each release, and the test run.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
STACK=rolling-24.05-24.11
OLD=/opt/slurm-24.05

die() { echo "tests/rolling-upgrade.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run it as root: it makes a Debian root and starts Slurm's daemons"

if [ "${1:-}" = --in-root ]; then
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
[ $# = 0 ] || die "unknown argument '$1'; usage: tests/rolling-upgrade.sh"

tests/stack-root.sh prepare "$STACK"
exec tests/stack-root.sh enter "$STACK" tests/rolling-upgrade.sh --in-root
