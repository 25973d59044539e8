# Sourced by the make check tests that need a tool rather than the cluster
# (valgrind.sh, fuzz.sh): TAP's "skip all", or a failure where
# DT_REQUIRE_INTEGRATION=1 says everything must run.

# DT_UNIT_ONLY=1 (distcheck, a quick run): skip.
if [ "${DT_UNIT_ONLY:-0}" = 1 ]; then
	echo "1..0 # SKIP DT_UNIT_ONLY=1"
	exit 0
fi

# require_tool NAME: the tool is on PATH, or the test ends here.
require_tool() {
	command -v "$1" >/dev/null && return 0
	if [ "${DT_REQUIRE_INTEGRATION:-0}" = 1 ]; then
		echo "1..1"
		echo "not ok 1 - $1 is not installed (tests/run.sh installs it)"
		exit 1
	fi
	echo "1..0 # SKIP $1 is not installed"
	exit 0
}
