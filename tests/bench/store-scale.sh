#!/bin/bash
# torch's start at scale: simulated ranks (tests/bench/store_scale.c) do
# to a step's store what torch's env:// start and its first process group
# do (doc/performance.md, "The store behind the node tree"), 8 to a node,
# each node from a loopback address of its own; first through the node
# tree (common/store_tree.c: its server, one relay per node), then direct
# to torch's own store, started by this Python's torch (the legacy server;
# the libuv one too where this torch has it). N doubles from 1,024 to
# 131,072, as far as each store gets within 10 minutes.
#
#   tests/bench/store-scale.sh            (after building)
#   DT_PYTHON="chroot ROOT python3" tests/bench/store-scale.sh
#
# Prints, for each N, the seconds from the first connection until the
# last rank holds the group's id, and each server's peak memory; the last
# two lines:
#   store: 131072 ranks started in X s through the node tree
#   store: N ranks started in X s through the node tree, Y s direct to
#   torch's store (Z x)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${DT_TOP_BUILDDIR:-$top/build}
read -r -a python <<<"${DT_PYTHON:-python3}"
per_node=8
budget=600

make -s -C "$build/tests" bench/store_scale >/dev/null

# Every rank connects at once: torch's store needs an accept queue for
# them all (torch warns "Starting store with N workers but somaxconn is
# 4096", and a rank past it is reset), as the user guide asks of the
# administrator. Raised for the run where this may, as root.
declare -A was
for knob in net.core.somaxconn net.ipv4.tcp_max_syn_backlog; do
	was[$knob]=$(sysctl -n "$knob")
	if ((was[$knob] < 131072)) && sysctl -qw "$knob=131072" 2>/dev/null; then
		trap 'for k in "${!was[@]}"; do sysctl -qw "$k=${was[$k]}"; done' EXIT
	fi
done
echo "store-scale: net.core.somaxconn $(sysctl -n net.core.somaxconn), net.ipv4.tcp_max_syn_backlog $(sysctl -n net.ipv4.tcp_max_syn_backlog)"
bin=$build/tests/bench/store_scale

version=$("${python[@]}" -c 'import torch; print(torch.__version__)' \
	2>/dev/null | tail -1 || true)
case $version in
1.*) generation=1 ;;
2.* | [3-9].*) generation=2 ;;
*) echo "store-scale: no torch in ${python[*]}" >&2; exit 1 ;;
esac
# The servers this torch has: the legacy one always, libuv where built in.
servers=(legacy)
if "${python[@]}" - >/dev/null 2>&1 <<'PY'
import datetime, torch.distributed as d
s = d.TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=5),
               wait_for_workers=False, use_libuv=True)
assert s.libuvBackend
PY
then servers+=(libuv); fi

# torch's store, as rank 0's process starts it; prints its port, then
# waits for stdin to close.
serve_torch() { # N LIBUV
	exec "${python[@]}" -u -c '
import datetime, resource, sys
import torch.distributed as d
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
kw = {"use_libuv": sys.argv[2] == "1"} if "use_libuv" in (d.TCPStore.__init__.__doc__ or "") else {}
s = d.TCPStore("127.0.0.1", 0, int(sys.argv[1]), True,
               datetime.timedelta(seconds=600), wait_for_workers=False, **kw)
print(s.port, hard, flush=True)
sys.stdin.read()' "$1" "$2"
}

peak_kb() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }

echo "store-scale: torch $version (its generation $generation's start), $per_node ranks a node, servers: tree ${servers[*]}"
declare -A took
for server in tree "${servers[@]}"; do
	spent=0
	for ((n = 1024; n <= 131072; n *= 2)); do
		if ((spent >= budget)); then
			echo "store-scale: $server: stopped before $n ranks: 10 minutes spent"
			break
		fi
		if [[ $server == tree ]]; then
			t= kb=
			read -r t kb < <(timeout $((budget - spent)) "$bin" tree "$n" "$per_node" "$generation" || true) || true
			if [[ -z $t ]]; then
				echo "store-scale: tree: $n ranks did not start (above: why) within the 10 minutes"
				break
			fi
		else
			coproc TORCH { serve_torch "$n" $([[ $server == libuv ]] && echo 1 || echo 0); }
			read -r port hard <&"${TORCH[0]}"
			pid=$TORCH_PID
			if ((n + 64 > hard)); then
				echo "store-scale: $server: stops at $((n / 2)) ranks here: $n ranks need $n open files in torch's store's process, and this machine allows $hard"
				exec {TORCH[1]}>&-; wait "$TORCH_PID" || true
				break
			fi
			idle=$(peak_kb "$pid")
			t=
			read -r t _ < <(timeout $((budget - spent)) "$bin" torch "$port" "$n" "$per_node" "$generation" || true) || true
			kb=$(( $(peak_kb "$pid") - idle ))
			exec {TORCH[1]}>&-; wait "$TORCH_PID" || true
			if [[ -z $t ]]; then
				echo "store-scale: $server: $n ranks did not start (above: why) within the 10 minutes"
				break
			fi
		fi
		spent=$(awk -v s="$spent" -v t="$t" 'BEGIN { printf "%d", s + t + 1 }')
		took[$server.$n]=$t
		printf 'store-scale: %-6s %6d ranks: %8.3f s, the server %6.1f MB more\n' \
			"$server" "$n" "$t" "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')"
	done
done

if [[ -n ${took[tree.131072]:-} ]]; then
	echo "store: 131072 ranks started in ${took[tree.131072]} s through the node tree"
else
	echo "store: 131072 ranks did not start through the node tree within 10 minutes"
fi
for ((n = 131072; n >= 1024; n /= 2)); do
	if [[ -n ${took[tree.$n]:-} && -n ${took[legacy.$n]:-} ]]; then
		awk -v n="$n" -v x="${took[tree.$n]}" -v y="${took[legacy.$n]}" 'BEGIN {
			printf "store: %d ranks started in %s s through the node tree, %s s direct to torch'"'"'s store (%.1f x)\n", n, x, y, y / x }'
		break
	fi
done
