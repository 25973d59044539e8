#!/bin/bash
# make check's short fuzzing run: every harness for DT_FUZZ_SECONDS (10 by
# default) from the committed corpus, after replaying the regressions.
# tests/fuzz/run.sh SECONDS runs longer campaigns.
top_srcdir=${DT_TOP_SRCDIR:-$(dirname "$0")/..}
top_builddir=${DT_TOP_BUILDDIR:-$top_srcdir}
. "$top_srcdir/tests/require.sh"
require_tool clang
export DT_FUZZ_BUILD=${DT_FUZZ_BUILD:-$top_builddir/tests/fuzz-build}
exec "$top_srcdir/tests/fuzz/run.sh" "${DT_FUZZ_SECONDS:-10}"
