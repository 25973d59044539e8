#!/bin/bash
# The topology is loaded in slurmstepd, which then forks the tasks: hwloc
# must not run discovery that opens GPU or display libraries there (an
# OpenCL ICD initialises the GPU driver; the GL component dials X
# displays). dist-train plan loads it with the same code; strace shows
# what that touches (TAP).
top_srcdir=${DT_TOP_SRCDIR:-$(dirname "$0")/..}
top_builddir=${DT_TOP_BUILDDIR:-$top_srcdir}
dt=$top_builddir/helper/dist-train

. "$top_srcdir/tests/require.sh"
require_tool strace

echo "1..2"
trace=$(strace -f -e trace=openat,connect "$dt" plan 2>&1 >/dev/null)
if grep -q -E 'OpenCL/vendors|libcuda|libnvidia-ml|librocm_smi|libze_loader' <<<"$trace"; then
	echo "not ok 1 - hwloc opened a GPU library or the OpenCL vendors"
	grep -E 'OpenCL/vendors|libcuda|libnvidia-ml|librocm_smi|libze_loader' <<<"$trace" | sed 's/^/# /'
else
	echo "ok 1 - hwloc opens no GPU library and no OpenCL vendor"
fi
if grep -q -E 'connect\(.*X11-unix' <<<"$trace"; then
	echo "not ok 2 - hwloc dialled an X display"
	grep -E 'connect\(.*X11-unix' <<<"$trace" | sed 's/^/# /'
else
	echo "ok 2 - hwloc dials no X display"
fi
