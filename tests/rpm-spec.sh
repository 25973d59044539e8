#!/bin/bash
# contrib/rpm/dist-train.spec as rpmbuild reads it (rpmspec, from Debian's
# rpm; no RPM database here, so no slurm-devel): it pins Slurm's
# major.minor release, as the .deb does (any patch release of it loads
# the plugin, the next release does not), and without slurm-devel it still
# parses, so that rpmbuild can say that slurm-devel is missing (TAP).
top_srcdir=$(cd "${DT_TOP_SRCDIR:-$(dirname "$0")/..}" && pwd)
spec=$top_srcdir/contrib/rpm/dist-train.spec
n=0
check() {	# check WHAT COMMAND...
	local what=$1
	shift
	n=$((n + 1))
	if "$@"; then echo "ok $n - $what"; else echo "not ok $n - $what"; fi
}
parsed() {	# parsed [RELEASE]: the spec's preamble, as rpmbuild sees it
	local define=()

	[ -n "${1:-}" ] && define=(--define "slurm_release $1")
	rpmspec -P "${define[@]}" "$spec" 2>&1
}

echo "1..3"
out=$(parsed 24.11)
check "built against Slurm 24.11: requires 24.11.x and names it in its release" \
	eval 'grep -qx "Requires: *slurm >= 24.11, slurm < 24.12" <<<"$out" &&
	      grep -qx "Release: *1\.slurm24\.11" <<<"$out"' || echo "$out" | sed 's/^/# /'
out=$(parsed 25.05)
check "... and against 25.05: 25.05.x" \
	grep -qx "Requires: *slurm >= 25.05, slurm < 25.06" <<<"$out" || echo "$out" | sed 's/^/# /'
out=$(parsed)
check "without slurm-devel: the spec still parses (rpmbuild then names the missing build dependency)" \
	eval '! grep -q "^error" <<<"$out" && grep -qx "Release: *1" <<<"$out" &&
	      ! grep -q "^Requires: *slurm" <<<"$out"' || echo "$out" | sed 's/^/# /'
