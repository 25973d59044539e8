#!/bin/sh
# TAP wrapper: skipped where Slurm's client tools are not installed.
top_srcdir=${DT_TOP_SRCDIR:-$(dirname "$0")/..}
top_builddir=${DT_TOP_BUILDDIR:-$top_srcdir}
if ! command -v scontrol >/dev/null 2>&1; then
	if [ "${DT_REQUIRE_INTEGRATION:-0}" = 1 ]; then
		echo "1..1"; echo "not ok 1 - scontrol is not installed"; exit 1
	fi
	echo "1..0 # SKIP scontrol is not installed"
	exit 0
fi
exec python3 "$top_srcdir/tests/hostlist-vs-scontrol.py" "$top_builddir/helper/dist-train"
