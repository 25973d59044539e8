#!/bin/bash
# Run every test, as root, on this machine's stack or on another Slurm
# generation's:
#
#   tests/run.sh                  this machine's Debian (12, 13 or unstable)
#   tests/run.sh --stack=SUITE    in a Debian root of SUITE (bookworm,
#                                 trixie, sid) made by tests/stack-root.sh,
#                                 in its own namespaces, with its own cluster
#   tests/run.sh --stack=slurm-25.05   the same with SchedMD's Slurm 25.05
#                                 built from its source tarball with PMIx
#                                 (also slurm-24.05, -25.11, -26.05; see
#                                 tests/stack-root.sh)
#   tests/run.sh --stack=slurm-24.05-rpm   the same with SchedMD's RPMs
#                                 of Slurm 24.05 (rpmbuild -ta, installed
#                                 with rpm, as on a RHEL-family site): in
#                                 step 5, dist-train's RPM in place of the
#                                 .deb (also -rpm of the other three)
#   tests/run.sh --stack=all      every supported stack, then a summary
#   tests/run.sh --quick          the quick tier, before each commit: build,
#                                 unit tests and a smoke of the integration
#                                 suite (make check-quick) on this machine's
#                                 stack, in a few minutes
#   tests/run.sh [--stack=NAME] --package
#                                 build, then step 5 alone: the stack's
#                                 package (.deb, or the RPM on a -rpm
#                                 stack) built, installed and tested
#   tests/run.sh [--stack=NAME] --repeat=N FILE...
#                                 build, then run the test files FILE
#                                 (tests/integration/failure.sh, ...) N
#                                 times on one stack, for flaky checks:
#                                 each round's failures, then the counts
#
#   DT_ONCE=0   leave out what is the same on every stack (the sanitizer
#               build, make distcheck, valgrind, fuzzing, the checks of
#               the documents: ONCE_TESTS in tests/Makefile.am);
#               tests/stacks.sh runs them on the first stack only
#
# On one stack it does:
#   1. install what is needed (contrib/install-deps.sh);
#   2. build in build/ with -Werror, then `make check`: the CUnit unit
#      tests, valgrind on the commands, a short fuzzing run of every
#      parser, the comparison with scontrol, and the integration tests on
#      a real 4-node Slurm cluster that they start and stop themselves;
#   3. the unit tests again, built with AddressSanitizer and UBSan;
#   4. `make distcheck`: the release tarball builds, installs and
#      uninstalls cleanly out of tree;
#   5. the Debian package (contrib/debian): built, installed, tested on the
#      cluster as installed, removed; where Slurm is SchedMD's RPMs, the
#      RPM (contrib/rpm/dist-train.spec) the same way, enabled through
#      its plugstack.conf.d file.
# (3, 4 and make check's ONCE_TESTS: not with DT_ONCE=0.) It ends with the
# slowest tests and parts, one line, N passed, N failed, N skipped, and
# then each failed check with the end of what it printed.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

if [ "$(id -u)" != 0 ]; then
	echo "tests/run.sh: run it as root: it installs packages and starts Slurm's daemons" >&2
	exit 1
fi

# This machine's suite: bookworm, trixie, or sid (whose os-release names
# the next release, with no VERSION_ID).
host_suite() {
	. /etc/os-release
	case ${VERSION_ID:-} in
	12) echo bookworm ;;
	13) echo trixie ;;
	"") echo sid ;;
	*) echo "${VERSION_CODENAME:-unknown}" ;;
	esac
}

usage="tests/run.sh [--quick | --stack=bookworm|trixie|sid|slurm-X.Y[-rpm]|all] [--package | --repeat=N tests/integration/FILE.sh...]"
stack= quick=0 package=0 repeat=0 files=() inner=()
for arg in "$@"; do
	case $arg in
	--stack=*) stack=${arg#--stack=} ;;
	--quick) quick=1 ;;
	--package) package=1 inner+=("$arg") ;;
	--repeat=*)
		repeat=${arg#--repeat=}
		[[ $repeat =~ ^[1-9][0-9]*$ ]] || {
			echo "tests/run.sh: --repeat takes a count of rounds, 1 or more, not '$repeat'" >&2
			exit 2
		}
		inner+=("$arg") ;;
	-*) echo "tests/run.sh: unknown argument '$arg'; usage: $usage" >&2
	   exit 2 ;;
	*)
		# A test file, as make check names it (relative to tests/).
		f=${arg#./}
		f=${f#tests/}
		[ -e "tests/$f" ] || {
			echo "tests/run.sh: no test file tests/$f; the files are in tests/ and tests/integration/" >&2
			exit 2
		}
		files+=("$f") inner+=("$f") ;;
	esac
done
if [ $quick = 1 ] && [ -n "$stack" ]; then
	echo "tests/run.sh: --quick runs on this machine's stack only: leave out --stack" >&2
	exit 2
fi
if [ $package = 1 ] && { [ $quick = 1 ] || [ "$repeat" != 0 ] || [ "$stack" = all ]; }; then
	echo "tests/run.sh: --package runs alone, on one stack; usage: $usage" >&2
	exit 2
fi
if { [ "$repeat" != 0 ] && [ ${#files[@]} = 0 ]; } ||
	{ [ "$repeat" = 0 ] && [ ${#files[@]} != 0 ]; } ||
	{ [ "$repeat" != 0 ] && { [ $quick = 1 ] || [ "$stack" = all ]; }; }; then
	echo "tests/run.sh: --repeat=N and test files go together, on one stack; usage: $usage" >&2
	exit 2
fi
case $stack in
"" | "$(host_suite)") ;;
all) exec tests/stacks.sh ;;
bookworm | trixie | sid | slurm-24.05 | slurm-25.05 | slurm-25.11 | slurm-26.05 | \
slurm-24.05-rpm | slurm-25.05-rpm | slurm-25.11-rpm | slurm-26.05-rpm)
	tests/stack-root.sh prepare "$stack"
	exec tests/stack-root.sh enter "$stack" tests/run.sh "${inner[@]}" ;;
*) echo "tests/run.sh: unknown stack '$stack'; valid: bookworm, trixie, sid, all, or an upstream release built from source: slurm-24.05, slurm-25.05, slurm-25.11, slurm-26.05 (add -rpm for SchedMD's RPMs of it)" >&2
   exit 2 ;;
esac
contrib/install-deps.sh
autoreconf -fi

pass=0 fail=0 skip=0 rc=0
# step NAME: a part of the run; the previous part's time is printed.
step_name= step_t0=
step() {
	step_done
	step_name=$* step_t0=$(date +%s)
	echo; echo "=== tests/run.sh: $*"
}
step_done() {
	[ -n "$step_name" ] || return 0
	echo "=== tests/run.sh: $step_name took $(( $(date +%s) - step_t0 )) s"
	step_name=
}
# tally LOG: add an automake test-suite log's counts to the totals.
tally() {
	local n
	n=$(sed -n 's/^# PASS: *//p' "$1" | head -1); pass=$((pass + ${n:-0}))
	n=$(sed -n 's/^# FAIL: *//p' "$1" | head -1); fail=$((fail + ${n:-0}))
	n=$(sed -n 's/^# ERROR: *//p' "$1" | head -1); fail=$((fail + ${n:-0}))
	n=$(sed -n 's/^# SKIP: *//p' "$1" | head -1); skip=$((skip + ${n:-0}))
}
# allow_skips LOG...: count the skips those test logs give for the one
# reason a stack may have (a Slurm built without mpi/pmix, as
# tests/integration/lib.sh says it); any other skip fails the run.
allowed=0
allow_skips() {
	local n
	n=$(cat "$@" 2>/dev/null |
		grep -c '^SKIP: .*# SKIP this Slurm has no mpi/pmix plugin') || true
	allowed=$((allowed + n))
}
# failed_checks LOG...: each failed check of those test logs, with the
# end of what it printed: a TAP test's "not ok" lines and the comments
# after each, another test's last lines.
failed_checks() {
	local log trs
	for log in "$@"; do
		trs=${log%.log}.trs
		[ -r "$trs" ] && grep -q -E '^:test-result: (FAIL|ERROR)' "$trs" || continue
		echo "--- ${log#"$top"/}"
		if grep -q '^not ok' "$log"; then
			# The driver echoes each result (FAIL: ...) after it.
			awk '/^not ok/ { n = 12; print; next }
			     /^(PASS|FAIL|ERROR|SKIP|XFAIL|XPASS): / { next }
			     n > 0 && /^#/ { print "    " $0; n--; next }
			     { n = 0 }' "$log" | head -n 60
		else
			tail -n 15 "$log" | sed 's/^/    /'
		fi
	done
}
# slowest_tests: the test files of the last make check, slowest first.
slowest_tests() {
	local f
	for f in $(find build/tests -name '*.time' 2>/dev/null); do
		printf '%8s s  %s\n' "$(cat "$f")" "${f#build/tests/}"
	done | sed 's/\.time$/.sh/; s/\(unit\/test_[a-z_]*\)\.sh$/\1/' |
		sort -rn | head -n "${1:-12}"
}
# note_failures [LABEL] LOG...: keep what failed_checks says of those
# logs for the end of the run (a later part may run the same tests again).
failures=
note_failures() {
	local label= found
	case $1 in *.log) ;; *) label="$1: "; shift ;; esac
	found=$(failed_checks "$@" | sed "s|^--- |--- $label|")
	[ -z "$found" ] || failures+=$found$'\n'
}
# result NAME COMMAND...: a step that is one test of its own.
result() {
	local name=$1
	shift
	if "$@"; then
		pass=$((pass + 1))
	else
		echo "tests/run.sh: FAIL: $name" >&2
		fail=$((fail + 1)) rc=1
		failures+="--- $name failed: see above in this log"$'\n'
	fi
}

mkdir -p build
# Here a skipped test is a failed one: everything it needs is installed.
export DT_REQUIRE_INTEGRATION=1
if [ "$repeat" != 0 ]; then
	step "build, then ${files[*]} $repeat times"
	(cd build && ../configure -q --enable-werror && make -s -j"$(nproc)")
	logs=()
	for f in "${files[@]}"; do logs+=("$top/build/tests/${f%.sh}.log"); done
	for ((round = 1; round <= repeat; round++)); do
		t0=$(date +%s)
		rm -f build/tests/test-suite.log
		p0=$pass f0=$fail
		(cd build/tests && make check TESTS="${files[*]}" >/dev/null 2>&1) || rc=1
		tally build/tests/test-suite.log
		echo "round $round of $repeat: $((pass - p0)) passed, $((fail - f0)) failed, $(( $(date +%s) - t0 )) s"
		failed_checks "${logs[@]}" | sed 's/^/    /'
	done
	step_done
	echo
	echo "$pass passed, $fail failed, $skip skipped"
	[ $fail = 0 ] || rc=1
	exit $rc
fi
if [ $quick = 1 ]; then
	step "build and make check-quick"
	t0=$(date +%s)
	(cd build && ../configure -q --enable-werror && make -s -j"$(nproc)")
	rm -f build/tests/test-suite.log
	(cd build && make check-quick VERBOSE=1) || rc=1
	tally build/tests/test-suite.log
	allow_skips $(ls build/tests/*.log | grep -v 'suite\.log$') build/tests/integration/*.log
	step_done
	if [ "$skip" -gt "$allowed" ]; then
		echo "tests/run.sh: FAIL: $((skip - allowed)) tests skipped for a reason other than a Slurm without mpi/pmix" >&2
		rc=1
	fi
	echo
	echo "tests/run.sh --quick: $(( $(date +%s) - t0 )) s (the whole suite: tests/run.sh --stack=all)"
	echo "$pass passed, $fail failed, $skip skipped"
	[ $fail = 0 ] || rc=1
	exit $rc
fi

once=${DT_ONCE:-1}
slowest=
if [ $package = 1 ]; then
	step "build"
	(cd build && ../configure -q --enable-werror && make -s -j"$(nproc)")
else
	step "build and make $([ "$once" = 1 ] && echo check || echo check-stack)"
	(cd build && ../configure -q --enable-werror && make -s -j"$(nproc)")
	rm -f build/tests/*.time build/tests/*/*.time
	if [ "$once" = 1 ]; then
		(cd build && make check VERBOSE=1) || rc=1
	else
		(cd build/tests && make check-stack VERBOSE=1) || rc=1
	fi
	tally build/tests/test-suite.log
	allow_skips $(ls build/tests/*.log | grep -v 'suite\.log$') build/tests/integration/*.log
	note_failures $(find "$top/build/tests" -name '*.log' ! -name '*suite.log' | sort)
	slowest=$(slowest_tests)

	if [ "$once" = 1 ]; then
		step "unit tests with AddressSanitizer and UndefinedBehaviorSanitizer"
		mkdir -p build-sanitizers
		(cd build-sanitizers && ../configure -q --enable-werror --enable-sanitizers &&
			make -s -j"$(nproc)" && make check-unit VERBOSE=1) || rc=1
		tally build-sanitizers/tests/test-suite.log
		note_failures $(find "$top/build-sanitizers/tests" -name '*.log' ! -name '*suite.log' | sort)

		step "make distcheck (unit tests only)"
		result "make distcheck" env DT_UNIT_ONLY=1 make -C build -s distcheck
	fi
fi

# The package's own files, not the build tree's, on the cluster.
# upgrade.sh last: it removes the package as a Slurm upgrade would.
DEB_TESTS="integration/environment.sh integration/pytorch.sh integration/torchrun.sh integration/upgrade.sh"
deb_test() {
	rm -rf build-deb
	contrib/debian/build.sh "$top/build-deb" || return 1
	apt-get install -y -q "$top"/build-deb/dist-train_*.deb || return 1
	DT_TEST_INSTALLED=1 make -C build/tests check VERBOSE=1 TESTS="$DEB_TESTS" \
		TEST_SUITE_LOG=installed-suite.log
}
# SchedMD's RPMs of Slurm (tests/stack-root.sh slurm-X.Y-rpm): dist-train's
# RPM built from the release tarball against their slurm-devel, as the
# admin guide says, installed with rpm, enabled by its plugstack.conf.d
# file (plugin, helper and worker library where the RPM put them), and
# the integration suite's core run on it. (--nodeps: Debian's libraries
# are not in the RPM database.)
RPM_TESTS="integration/environment.sh integration/pmix.sh integration/pytorch.sh integration/failure.sh integration/torchrun.sh"
rpm_test() {
	local tarball rpms=$top/build-rpm package release requires
	rm -rf "$rpms"
	mkdir -p "$rpms"
	(cd build && make -s dist-gzip) > "$rpms/dist.log" 2>&1 ||
		{ tail -n 30 "$rpms/dist.log"; return 1; }
	tarball=$(ls build/dist-train-*.tar.gz | head -n 1)
	rpmbuild -ta --nodeps --define "_topdir $rpms" "$tarball" \
		> "$rpms/rpmbuild.log" 2>&1 ||
		{ tail -n 30 "$rpms/rpmbuild.log"; return 1; }
	package=$(ls "$rpms"/RPMS/*/dist-train-[0-9]*.rpm)
	# The pin, from the slurm-devel it was built against (24.05.8: any
	# 24.05.x), as the admin guide says.
	release=$(rpm -q --qf '%{VERSION}' slurm-devel | cut -d. -f1,2)
	requires=$(rpm -qRp "$package" | grep '^slurm' | sort | tr '\n' ' ')
	echo "tests/run.sh: $(basename "$package") requires: $requires"
	[[ $(basename "$package") == *.slurm$release.* ]] &&
		[ "$requires" = "slurm < ${release%.*}.$(printf %02d $((10#${release#*.} + 1))) slurm >= $release " ] ||
		{ echo "tests/run.sh: the RPM does not pin Slurm $release in its release and Requires" >&2; return 1; }
	rpm -i --nodeps "$package" || return 1
	DT_TEST_INSTALLED=1 DT_CLUSTER_PLUGSTACK_SNIPPET=/etc/slurm/plugstack.conf.d/dist_train.conf \
		make -C build/tests check VERBOSE=1 TESTS="$RPM_TESTS" \
		TEST_SUITE_LOG=installed-suite.log
}
pkg_rc=0 pkg_tests=
rm -f build/tests/installed-suite.log
if rpm -q slurm-devel >/dev/null 2>&1; then
	step "RPM package: build, install, test as installed, remove"
	pkg_tests=$RPM_TESTS
	rpm_test || pkg_rc=$?
elif [ -x /usr/local/sbin/slurmd ]; then
	# A Slurm built from source (tests/stack-root.sh slurm-X.Y): the
	# Debian package is built for, and depends on, Debian's Slurm.
	step "Debian package"
	echo "tests/run.sh: no Debian package on a Slurm built from source"
	touch build/tests/no-package
else
	step "Debian package: build, install, test as installed, remove"
	pkg_tests=$DEB_TESTS
	deb_test || pkg_rc=$?
fi
if [ -r build/tests/installed-suite.log ]; then
	tally build/tests/installed-suite.log
	logs=()
	for f in $pkg_tests; do logs+=("$top/build/tests/${f%.sh}.log"); done
	note_failures "the package as installed" "${logs[@]}"
	allow_skips "${logs[@]}"
fi
[ -r build/tests/installed-suite.log ] || [ -e build/tests/no-package ] ||
	result "package build and install" false
[ $pkg_rc = 0 ] || rc=1
rpm -q dist-train >/dev/null 2>&1 && rpm -e --nodeps dist-train
dpkg -s dist-train >/dev/null 2>&1 && apt-get purge -y -q dist-train >/dev/null

step_done
echo
echo "=== tests/run.sh: the slowest tests of make check, in seconds"
echo "$slowest"
if [ "$skip" -gt "$allowed" ]; then
	echo "tests/run.sh: FAIL: $((skip - allowed)) tests skipped for a reason other than a Slurm without mpi/pmix" >&2
	rc=1
elif [ "$allowed" -gt 0 ]; then
	echo "tests/run.sh: $allowed PMIx tests skipped: this Slurm has no mpi/pmix plugin"
fi
echo
echo "$pass passed, $fail failed, $skip skipped"
[ $fail = 0 ] || rc=1
if [ $rc != 0 ]; then
	echo
	echo "=== tests/run.sh: what failed"
	echo "${failures:-(no test log names a failed check: see above)}"
fi
exit $rc
