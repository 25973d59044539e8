#!/bin/bash
# Run every test: install what is needed (Debian 12, as root), build in
# build/, then `make check`: the CUnit unit tests, the comparison with
# scontrol, and the integration tests on a real 4-node Slurm cluster that
# they start and stop themselves.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "tests/run.sh: run it as root: it installs packages and starts Slurm's daemons" >&2
	exit 1
fi
contrib/install-deps.sh
autoreconf -fi
mkdir -p build
cd build
../configure --enable-werror
make -j"$(nproc)"

# Here a skipped integration test is a failed one.
export DT_REQUIRE_INTEGRATION=1
rc=0
make check VERBOSE=1 || rc=$?

count() { sed -n "s/^# $1: *//p" tests/test-suite.log | head -1; }
pass=$(count PASS) fail=$(count FAIL) error=$(count ERROR) skip=$(count SKIP)
echo
echo "${pass:-0} passed, $(( ${fail:-0} + ${error:-0} )) failed, ${skip:-0} skipped"
exit $rc
