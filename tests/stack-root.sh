#!/bin/bash
# The Debian roots that tests/run.sh --stack=SUITE runs the tests in: one
# per Slurm generation the project supports (see README "Supported
# versions"), made with debootstrap, cached between runs on one machine.
#
#   tests/stack-root.sh prepare SUITE   make or refresh the root, install
#                                       what contrib/install-deps.sh names
#   tests/stack-root.sh enter SUITE CMD run CMD in the root, in its own
#                                       mount, UTS and PID namespaces
#   tests/stack-root.sh path SUITE      print where the root is
#   tests/stack-root.sh install SUITE PKG...  install Debian packages
#                                       in a prepared root (tests/pyxis.sh)
#   tests/stack-root.sh mirror          print the Debian archive it uses
#
# SUITE is a Debian suite (bookworm, trixie, sid), whose own Slurm is
# tested, or slurm-MAJOR.MINOR (slurm-24.05, slurm-25.05, slurm-25.11,
# slurm-26.05): SchedMD's release, built from its source tarball with
# PMIx on a copy of the Debian 13 root, in place of Debian's Slurm.
# (Debian 13's PMIx is 5.0.7; unstable's 7 is past what Slurm's mpi/pmix
# accepts, 2 to 6 in 26.05's configure, which is why Debian builds its
# 26.05 without it.)
#
# Settings (environment):
#   DT_STACK_CACHE   where roots live [/var/cache/dist-train/stacks]
#   DT_STACK_MIRROR  the Debian archive [the one this machine's apt
#                    sources name]
#   DT_SLURM_SOURCES the folder of Slurm's source tarballs, named as
#                    SchedMD's git tags are (slurm-25-05-8-1.tar.xz, or
#                    .tar.gz, .tar.bz2) [../shared/src beside the tree]
#
# A root is refreshed (apt-get upgrade) at most once a day, so that a
# second run on the same machine starts in seconds; a new machine makes
# its roots in 3 to 5 minutes each.
set -euo pipefail

CACHE=${DT_STACK_CACHE:-/var/cache/dist-train/stacks}
top=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "stack-root: $*" >&2; exit 1; }
say() { echo "stack-root: $*" >&2; }
# This machine's apt-get, one at a time among the project's scripts (the
# roots are made at once, beside contrib/install-deps.sh), waiting for
# dpkg's own lock rather than failing on it.
host_apt_get() {
	mkdir -p /run/lock
	DEBIAN_FRONTEND=noninteractive flock -w 900 /run/lock/dist-train-apt.lock \
		apt-get -o DPkg::Lock::Timeout=900 "$@"
}

# The Debian archive this machine's apt sources name (its main suite, not
# security or updates), so that the repository names no package host.
apt_archive() {
	apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
		awk '$2 !~ /-(security|updates|backports|proposed-updates)$/ &&
		     $1 !~ /security/ { sub("/$", "", $1); print $1; exit }'
}
MIRROR=${DT_STACK_MIRROR:-}
if [ -z "$MIRROR" ]; then
	MIRROR=$(apt_archive)
	if [ -z "$MIRROR" ]; then
		host_apt_get update -q >/dev/null 2>&1 || true
		MIRROR=$(apt_archive)
	fi
fi
[ -n "$MIRROR" ] ||
	die "this machine's apt sources name no Debian archive: add one, or set DT_STACK_MIRROR"

suite_ok() {
	case $1 in
	bookworm | trixie | sid) return 0 ;;
	slurm-24.05 | slurm-25.05 | slurm-25.11 | slurm-26.05) return 0 ;;
	*) die "unknown suite '$1'; valid: bookworm, trixie, sid, slurm-24.05, slurm-25.05, slurm-25.11, slurm-26.05" ;;
	esac
}

# The Debian suite an upstream release is built on; none for a suite.
upstream_base() {
	case $1 in
	slurm-*) echo trixie ;;
	esac
}

# The newest tarball of release slurm-MAJOR.MINOR in DT_SLURM_SOURCES.
slurm_tarball() {
	local dir=${DT_SLURM_SOURCES:-$top/../shared/src} tag
	tag=$(echo "${1#slurm-}" | tr . -)
	{ ls -1 "$dir"/slurm-"$tag"-*.tar.* 2>/dev/null || true; } | sort -V | tail -n 1
}

# What building Slurm needs, and what its configure finds to build the
# plugins sites use (mpi/pmix, cgroup/v2, auth/munge).
SLURM_BUILD_DEPS="build-essential pkg-config python3 libmunge-dev munge \
libpmix-dev libhwloc-dev libjson-c-dev libyaml-dev libhttp-parser-dev \
libjwt-dev liblz4-dev libcurl4-openssl-dev libdbus-1-dev"

# An upstream release's root: a copy of its Debian root, Debian's Slurm
# removed, SchedMD's built from TARBALL and installed in /usr/local.
prepare_upstream() {
	local name=$1 base root=$CACHE/$1 tarball stamp pmix configure
	base=$(upstream_base "$name")
	tarball=$(slurm_tarball "$name")
	[ -n "$tarball" ] ||
		die "no source tarball of $name in ${DT_SLURM_SOURCES:-$top/../shared/src}: give the folder that has one with DT_SLURM_SOURCES (named as SchedMD's tags, such as slurm-$(echo "${name#slurm-}" | tr . -)-1-1.tar.xz)"
	cmd_prepare "$base"
	# The test cluster runs several slurmd on one machine (slurmd -N):
	# Slurm must be built for that, as Debian's is.
	configure="--prefix=/usr/local --sysconfdir=/etc/slurm --enable-multiple-slurmd"
	stamp=$root/.dt-built-$(basename "$tarball")
	if [ "$(cat "$stamp" 2>/dev/null)" = "$configure" ] &&
	   [ "$root/.dt-root-complete" -nt "$CACHE/$base/.dt-root-complete" ]; then
		say "$name root ready: $(in_root "$root" slurmd -V)"
		return 0
	fi
	say "making the $name root: a copy of the $base root, Slurm from $(basename "$tarball")"
	rm -rf "$root.new"
	cp -a "$CACHE/$base" "$root.new"
	in_root "$root.new" sh -c '
		export DEBIAN_FRONTEND=noninteractive
		apt-get -y -q purge $(dpkg-query -W -f "\${Package}\n" |
			grep -E "^(lib)?slurm|^libpmi.*slurm") &&
		apt-get -y -q install $0' "$SLURM_BUILD_DEPS" \
		> "$CACHE/$name.apt.log" 2>&1 ||
		die "$name: replacing Debian's Slurm failed: see $CACHE/$name.apt.log"
	# Debian keeps PMIx's headers and library in a folder of their own.
	pmix=$(in_root "$root.new" sh -c 'dirname "$(dirname "$(find /usr/lib -name pmix_common.h -path "*pmix*" | head -n 1)")"')
	mkdir -p "$root.new/usr/local/src"
	tar -xf "$tarball" -C "$root.new/usr/local/src"
	in_root "$root.new" sh -c "
		cd /usr/local/src/$(basename "$tarball" | sed 's/\.tar\..*//') &&
		./configure $configure --with-pmix=$pmix &&
		make -j\$(nproc) && make install && ldconfig &&
		test -e /usr/local/lib/slurm/mpi_pmix.so" \
		> "$CACHE/$name.build.log" 2>&1 ||
		die "$name: building Slurm failed: see $CACHE/$name.build.log"
	rm -rf "$root.new/usr/local/src"
	host_file "$name" > "$root.new/etc/hosts"
	rm -rf "$root"
	mv "$root.new" "$root"
	touch "$root/.dt-root-complete"
	echo "$configure" > "$stamp"
	say "$name root ready: $(in_root "$root" slurmd -V), PMIx from $pmix"
}

# Run CMD inside ROOT with /proc, /dev and /sys, for apt and dpkg: in a
# mount namespace of its own, so that nothing stays mounted afterwards.
in_root() {
	local root=$1
	shift
	unshare -m --propagation private -- sh -c '
		root=$1; shift
		mount -t proc proc "$root/proc" &&
		mount --rbind /dev "$root/dev" &&
		mount --rbind /sys "$root/sys" &&
		exec chroot "$root" "$@"' sh "$root" "$@"
}

# The root's host name (enter sets it: no dots) and its /etc/hosts, in
# which that name resolves.
host_name() { echo "dt-$1" | tr . -; }
host_file() {
	printf '127.0.0.1\tlocalhost\n127.0.0.2\t%s\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
		"$(host_name "$1")"
}

cmd_prepare() {
	local suite=$1 root=$CACHE/$1 stamp
	suite_ok "$suite"
	if [ -n "$(upstream_base "$suite")" ]; then
		prepare_upstream "$suite"
		return
	fi
	[ "$(id -u)" = 0 ] || die "prepare needs root (debootstrap, chroot)"
	command -v debootstrap >/dev/null || {
		say "installing debootstrap"
		host_apt_get install -y -q debootstrap >/dev/null ||
			{ host_apt_get update -q >/dev/null &&
			  host_apt_get install -y -q debootstrap >/dev/null; } ||
			die "cannot install debootstrap"
	}
	mkdir -p "$CACHE"
	if [ ! -e "$root/.dt-root-complete" ]; then
		say "making a $suite root in $root (debootstrap)"
		rm -rf "$root.new"
		debootstrap --variant=minbase "$suite" "$root.new" "$MIRROR" \
			> "$CACHE/$suite.debootstrap.log" 2>&1 ||
			die "debootstrap $suite failed: see $CACHE/$suite.debootstrap.log"
		echo "deb $MIRROR $suite main" > "$root.new/etc/apt/sources.list"
		# The archive may be a snapshot whose Release files have expired.
		echo 'Acquire::Check-Valid-Until "false";' \
			> "$root.new/etc/apt/apt.conf.d/99dist-train-stack"
		# Installing slurmd or munge must not start daemons in the root.
		printf '#!/bin/sh\nexit 101\n' > "$root.new/usr/sbin/policy-rc.d"
		chmod 0755 "$root.new/usr/sbin/policy-rc.d"
		rm -rf "$root"
		mv "$root.new" "$root"
		touch "$root/.dt-root-complete"
	fi
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	host_file "$suite" > "$root/etc/hosts"
	# The package list is the tree's: copy it in and install what is new.
	install -m 0755 "$top/contrib/install-deps.sh" "$root/usr/local/sbin/dt-install-deps"
	stamp=$root/.dt-upgraded-$(date +%Y%m%d)
	if [ ! -e "$stamp" ]; then
		say "updating the $suite root"
		in_root "$root" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade' \
			> "$CACHE/$suite.apt.log" 2>&1 ||
			die "$suite: apt-get update/upgrade failed: see $CACHE/$suite.apt.log"
		rm -f "$root"/.dt-upgraded-*
		touch "$stamp"
	fi
	in_root "$root" /usr/local/sbin/dt-install-deps >> "$CACHE/$suite.apt.log" 2>&1 ||
		die "$suite: installing the packages failed (the suite's archive may be broken today): $(grep -E '^(E:|  )' "$CACHE/$suite.apt.log" | tail -n 5 | tr '\n' ' ')"
	say "$suite root ready: Slurm $(in_root "$root" dpkg-query -W -f='${Version}' slurmd)"
}

# Copy the tree (the files git knows and untracked ones it does not
# ignore; or everything but build folders) to /src/dist-train in the root.
copy_tree() {
	local root=$1 dest=$1/src/dist-train
	rm -rf "$dest"
	mkdir -p "$dest"
	if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
		(cd "$top" && git ls-files -z --cached --others --exclude-standard |
			xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
			tar --null -T - -cf -) | tar -xf - -C "$dest"
	else
		(cd "$top" && tar --exclude='./build*' -cf - .) | tar -xf - -C "$dest"
	fi
}

cmd_enter() {
	local suite=$1 root=$CACHE/$1
	shift
	suite_ok "$suite"
	[ -e "$root/.dt-root-complete" ] || die "no $suite root: run $0 prepare $suite"
	[ $# -gt 0 ] || set -- bash
	copy_tree "$root"
	# Own mount, UTS, PID and network namespaces: the root's daemons see
	# only each other, all of them end with the command, and its test
	# cluster's addresses and ports are its own, so that stacks can run
	# side by side. The root is made a mount point so that dt-cluster's
	# per-node namespaces can make their mounts private inside it.
	# Slurm resolves its own listening address with AI_ADDRCONFIG, which
	# glibc fails when the only IPv4 address is 127.0.0.1 (slurmctld
	# 24.11: "getaddrinfo((null):17000)", then fatal): lo gets a second
	# loopback address. bash stays PID 1 and reaps orphans (daemons
	# killed by dt-cluster), which would otherwise stay zombies that
	# kill -0 still finds. The root becomes the namespace's root
	# (pivot_root, not chroot) because a chrooted process may not make a
	# user namespace, which rootless container runtimes need (runc under
	# srun --container runs as the job's user).
	unshare -m -u -p -n -f --propagation private -- sh -c '
		root=$1 suite=$2 host=$3; shift 3
		ip link set lo up &&
		ip addr add 127.0.0.2/8 dev lo &&
		mount --bind "$root" "$root" &&
		mount -t proc proc "$root/proc" &&
		mount --rbind /dev "$root/dev" &&
		mount --rbind /sys "$root/sys" &&
		mount -t tmpfs -o mode=0755 tmpfs "$root/run" &&
		mount -t tmpfs -o mode=1777 tmpfs "$root/tmp" &&
		hostname "$host" &&
		mkdir -p "$root/.old-root" &&
		cd "$root" && pivot_root . .old-root && cd / &&
		umount -l /.old-root &&
		exec /usr/bin/env -i \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" CI="${CI:-}" \
			DT_STACK="$suite" DT_FUZZ_SECONDS="${DT_FUZZ_SECONDS:-}" DT_ONCE="${DT_ONCE:-1}" \
			bash -c "cd /src/dist-train && \"\$@\"; exit \$?" bash "$@"' \
		sh "$root" "$suite" "$(host_name "$suite")" "$@"
}

case ${1:-} in
prepare) [ $# = 2 ] || die "usage: $0 prepare SUITE"; cmd_prepare "$2" ;;
enter) [ $# -ge 2 ] || die "usage: $0 enter SUITE [CMD...]"; shift; cmd_enter "$@" ;;
path) [ $# = 2 ] || die "usage: $0 path SUITE"; suite_ok "$2"; echo "$CACHE/$2" ;;
install) [ $# -ge 3 ] || die "usage: $0 install SUITE PKG..."
	suite_ok "$2"
	[ -e "$CACHE/$2/.dt-root-complete" ] || die "no $2 root: run $0 prepare $2"
	in_root "$CACHE/$2" env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q "${@:3}" > "$CACHE/$2.install.log" 2>&1 ||
		die "$2: installing ${*:3} failed: see $CACHE/$2.install.log" ;;
mirror) echo "$MIRROR" ;;
*) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
