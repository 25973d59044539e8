#!/bin/bash
# Fuzz every parser that reads user, environment or network input.
#
#   tests/fuzz/run.sh [SECONDS] [HARNESS...]     (default: 60 s each, all;
#                                                 0: replay the corpus only)
#
# Builds each tests/fuzz/fuzz_*.c with clang's libFuzzer, AddressSanitizer
# and UndefinedBehaviorSanitizer, and runs it for SECONDS from the committed
# seed corpus (tests/fuzz/corpus/NAME/; new inputs go to the build folder,
# not there). First it replays tests/fuzz/regressions/NAME/: every input
# that once crashed stays a test. A crash leaves its input in the build
# folder: add it under regressions/NAME/ with the fix. Prints TAP.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${DT_FUZZ_BUILD:-$src/build-fuzz}
seconds=${1:-60}
shift || true
cc=${CLANG:-clang}

command -v "$cc" >/dev/null || { echo "1..0 # SKIP clang is not installed"; exit 0; }
mkdir -p "$build"
cat > "$build/config.h" <<EOC
#define _GNU_SOURCE 1
#define PACKAGE_VERSION "fuzz"
EOC

harnesses=("$@")
if [ ${#harnesses[@]} = 0 ]; then
	for f in "$src"/tests/fuzz/fuzz_*.c; do
		harnesses+=("$(basename "$f" .c)")
	done
fi
cores=(binding envp error fr_dump gpu_vendor hostlist json_read layout machine_cache port rendezvous secret settings
       tasks_per_node topology train_env)

flags=(-g -O1 -fno-sanitize-recover=undefined -include "$build/config.h"
       -I"$build" -DDT_HELPER_DEFAULT='"/usr/bin/dist-train"'
       -DDT_WORKER_LIB_DEFAULT='"/usr/lib/dist-train/dist_train_worker.so"')
# The parsers once, instrumented for every harness (fuzzer-no-link), two
# at a time; each harness is then one file and a link.
objs=()
for c in "${cores[@]}"; do
	objs+=("$build/$c.o")
	rm -f "$build/$c.o"
	"$cc" "${flags[@]}" -fsanitize=fuzzer-no-link,address,undefined \
		-c "$src/common/$c.c" -o "$build/$c.o" 2> "$build/$c.log" &
	[ $(jobs -pr | wc -l) -lt 2 ] || wait -n
done
wait

echo "1..${#harnesses[@]}"
n=0 failed=0
for h in "${harnesses[@]}"; do
	n=$((n + 1))
	bin=$build/$h
	log=$build/$h.log
	rm -f "$bin"
	cat "${objs[@]/%.o/.log}" > "$log"
	"$cc" "${flags[@]}" -fsanitize=fuzzer,address,undefined \
		"$src/tests/fuzz/$h.c" "${objs[@]}" -lnettle -o "$bin" 2>> "$log"
	if [ ! -x "$bin" ]; then
		echo "not ok $n - $h: does not build"; sed 's/^/# /' "$log"
		failed=$((failed + 1)); continue
	fi
	regressions=("$src/tests/fuzz/regressions/$h"/*)
	if [ -e "${regressions[0]}" ] && ! "$bin" "${regressions[@]}" > "$log" 2>&1; then
		echo "not ok $n - $h: a regression input fails again"
		tail -20 "$log" | sed 's/^/# /'
		failed=$((failed + 1)); continue
	fi
	mkdir -p "$build/corpus/$h"
	# 0 s: the corpus once, no new inputs (-runs=0).
	limit=(-max_total_time="$seconds")
	[ "$seconds" = 0 ] && limit=(-runs=0)
	if "$bin" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
	   -print_final_stats=1 -artifact_prefix="$build/crash-$h-" \
	   "$build/corpus/$h" "$src/tests/fuzz/corpus/$h" > "$log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		if [ "$seconds" = 0 ]; then
			echo "ok $n - $h: its corpus and regressions replayed (${runs:-?} inputs; 0 s: no new ones), no finding"
		else
			echo "ok $n - $h: ${runs:-?} inputs in $seconds s, no finding"
		fi
	else
		echo "not ok $n - $h: a finding, see $log and $build/crash-$h-*"
		grep -E 'ERROR|SUMMARY|runtime error|\.c:[0-9]+' "$log" | head -10 | sed 's/^/# /'
		failed=$((failed + 1))
	fi
done
exit $((failed > 0))
