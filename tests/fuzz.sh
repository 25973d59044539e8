#!/bin/bash
# make check's short fuzzing run: every harness for DT_FUZZ_SECONDS (10 by
# default) from the committed corpus, after replaying the regressions.
# tests/fuzz/run.sh SECONDS runs longer campaigns.
top_srcdir=${DT_TOP_SRCDIR:-$(dirname "$0")/..}
top_builddir=${DT_TOP_BUILDDIR:-$top_srcdir}
if [ "${DT_UNIT_ONLY:-0}" = 1 ]; then
	echo "1..0 # SKIP DT_UNIT_ONLY=1"; exit 0
fi
if ! command -v clang >/dev/null; then
	if [ "${DT_REQUIRE_INTEGRATION:-0}" = 1 ]; then
		echo "1..1"; echo "not ok 1 - clang is not installed"; exit 1
	fi
	echo "1..0 # SKIP clang is not installed"; exit 0
fi
export DT_FUZZ_BUILD=${DT_FUZZ_BUILD:-$top_builddir/tests/fuzz-build}
exec "$top_srcdir/tests/fuzz/run.sh" "${DT_FUZZ_SECONDS:-10}"
