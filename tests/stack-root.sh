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
# PMIx on a copy of the Debian 13 root, in place of Debian's Slurm; or
# slurm-MAJOR.MINOR-rpm: the same release as a RHEL-family site has it,
# SchedMD's RPMs (rpmbuild -ta with slurm.spec), installed with rpm.
# (No RHEL root can be made from a Debian archive, so Debian's rpm builds
# and installs them on the Debian 13 root: the files land where they do
# on RHEL, /usr/lib64/slurm, /etc/slurm; what differs is the C library
# and the other libraries beneath Slurm, Debian's.)
# rolling-OLD-NEW is a rolling upgrade's cluster (tests/rolling-upgrade.sh):
# the root of Slurm NEW (Debian 13's for 24.11, else slurm-NEW's), and
# SchedMD's OLD built from source beside it in /opt/slurm-OLD, for the
# hosts not yet upgraded: rolling-24.05-24.11, rolling-24.05-25.05,
# rolling-25.05-25.11, ..., where Slurm allows the two together (NEW at
# most three releases after OLD).
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
	slurm-24.05-rpm | slurm-25.05-rpm | slurm-25.11-rpm | slurm-26.05-rpm) return 0 ;;
	rolling-24.05-24.11 | rolling-24.05-25.05 | rolling-24.05-25.11 | \
	rolling-25.05-25.11 | rolling-25.05-26.05 | rolling-25.11-26.05) return 0 ;;
	*) die "unknown suite '$1'; valid: bookworm, trixie, sid, slurm-24.05, slurm-25.05, slurm-25.11, slurm-26.05, one of those four with -rpm (slurm-24.05-rpm), or rolling-OLD-NEW of two of them or of 24.05 and 24.11 (rolling-24.05-24.11)" ;;
	esac
}

# The Debian suite an upstream release is built on; none for a suite.
upstream_base() {
	case $1 in
	rolling-*-24.11 | slurm-*) echo trixie ;;
	rolling-*) echo "slurm-${1##*-}" ;;
	esac
}

# The newest tarball of release slurm-MAJOR.MINOR in DT_SLURM_SOURCES.
slurm_tarball() {
	local dir=${DT_SLURM_SOURCES:-$top/../shared/src} tag
	tag=$(echo "$1" | sed -E 's/^(slurm|rolling)-//; s/-rpm$//; s/-[0-9.]+$//' | tr . -)
	{ ls -1 "$dir"/slurm-"$tag"-*.tar.* 2>/dev/null || true; } | sort -V | tail -n 1
}

# What building Slurm needs, and what its configure finds to build the
# plugins sites use (mpi/pmix, cgroup/v2, auth/munge).
SLURM_BUILD_DEPS="build-essential pkg-config python3 libmunge-dev munge \
libpmix-dev libhwloc-dev libjson-c-dev libyaml-dev libhttp-parser-dev \
libjwt-dev liblz4-dev libcurl4-openssl-dev libdbus-1-dev"

# copy_base NAME BASE PURGE PACKAGES: NAME's root in the making
# ($CACHE/NAME.new), a copy of BASE's with PACKAGES installed and, with
# PURGE=1, Debian's Slurm removed.
copy_base() {
	local name=$1 base=$2 purge=$3 packages=$4
	rm -rf "$CACHE/$name.new"
	cp -a "$CACHE/$base" "$CACHE/$name.new"
	in_root "$CACHE/$name.new" sh -c '
		export DEBIAN_FRONTEND=noninteractive
		if [ "$0" = 1 ]; then
			apt-get -y -q purge $(dpkg-query -W -f "\${Package}\n" |
				grep -E "^(lib)?slurm|^libpmi.*slurm") || exit 1
		fi
		apt-get -y -q install $1' "$purge" "$packages" \
		> "$CACHE/$name.apt.log" 2>&1 ||
		die "$name: installing Slurm's build dependencies failed: see $CACHE/$name.apt.log"
}

# The folder of PMIx in ROOT: Debian keeps its headers and library in a
# folder of their own.
pmix_dir() {
	in_root "$1" sh -c 'dirname "$(dirname "$(find /usr/lib -name pmix_common.h -path "*pmix*" | head -n 1)")"'
}

# finish_root NAME STAMP CONTENT: NAME's new root replaces the old one, and
# STAMP (in it) records what it was built with.
finish_root() {
	local root=$CACHE/$1
	host_file "$1" > "$root.new/etc/hosts"
	rm -rf "$root"
	mv "$root.new" "$root"
	touch "$root/.dt-root-complete"
	echo "$3" > "$root/$2"
}

# An upstream release's root: a copy of its Debian root, Debian's Slurm
# removed, SchedMD's built from its tarball and installed in /usr/local;
# or, for a rolling upgrade's root (rolling-OLD-NEW), NEW's root with its
# Slurm kept and the older release installed beside it in /opt/slurm-OLD,
# as the hosts not upgraded yet have it: its own commands, slurmd,
# slurmstepd and plugins.
prepare_upstream() {
	local name=$1 base root=$CACHE/$1 tarball stamp pmix configure prefix purge=1 release
	case $name in
	*-rpm) prepare_rpm "$name"; return ;;
	esac
	base=$(upstream_base "$name")
	tarball=$(slurm_tarball "$name")
	release=$(echo "$name" | sed -E 's/^(slurm|rolling)-//; s/-[0-9.]+$//')
	[ -n "$tarball" ] ||
		die "no source tarball of Slurm $release in ${DT_SLURM_SOURCES:-$top/../shared/src}: give the folder that has one with DT_SLURM_SOURCES (named as SchedMD's tags, such as slurm-$(echo "$release" | tr . -)-1-1.tar.xz)"
	cmd_prepare "$base"
	# The test cluster runs several slurmd on one machine (slurmd -N):
	# Slurm must be built for that, as Debian's is.
	prefix=/usr/local
	configure="--prefix=$prefix --sysconfdir=/etc/slurm --enable-multiple-slurmd"
	case $name in
	rolling-*)
		prefix=/opt/slurm-$release purge=0
		configure="--prefix=$prefix --sysconfdir=$prefix/etc --enable-multiple-slurmd" ;;
	esac
	stamp=.dt-built-$(basename "$tarball")
	if [ "$(cat "$root/$stamp" 2>/dev/null)" = "$configure" ] &&
	   [ "$root/.dt-root-complete" -nt "$CACHE/$base/.dt-root-complete" ]; then
		say "$name root ready: $(in_root "$root" "$prefix/sbin/slurmd" -V)"
		return 0
	fi
	say "making the $name root: a copy of the $base root, Slurm from $(basename "$tarball") in $prefix"
	copy_base "$name" "$base" "$purge" "$SLURM_BUILD_DEPS"
	pmix=$(pmix_dir "$root.new")
	mkdir -p "$root.new/usr/local/src"
	tar -xf "$tarball" -C "$root.new/usr/local/src"
	in_root "$root.new" sh -c "
		cd /usr/local/src/$(basename "$tarball" | sed 's/\.tar\..*//') &&
		./configure $configure --with-pmix=$pmix &&
		make -j\$(nproc) && make install && ldconfig &&
		test -e $prefix/lib/slurm/mpi_pmix.so" \
		> "$CACHE/$name.build.log" 2>&1 ||
		die "$name: building Slurm failed: see $CACHE/$name.build.log"
	rm -rf "$root.new/usr/local/src"
	finish_root "$name" "$stamp" "$configure"
	say "$name root ready: $(in_root "$root" "$prefix/sbin/slurmd" -V), PMIx from $pmix"
}

# What rpmbuild needs beyond Slurm's build: rpm itself, and the -devel
# packages slurm.spec builds with by default (PAM, readline, MariaDB for
# slurmdbd's accounting_storage_mysql, which its %files names).
RPM_BUILD_DEPS="rpm bzip2 libpam0g-dev libreadline-dev libmariadb-dev libmariadb-dev-compat"

# SchedMD's RPMs root: a copy of the Debian 13 root, Debian's Slurm
# removed, Slurm's RPMs built from SchedMD's own slurm.spec and installed
# with rpm, as on a RHEL-family site. SchedMD's release tarball is
# slurm-VERSION.tar.bz2 holding slurm-VERSION/; a git tag's tarball is
# repacked so. One line of slurm.spec is Debian's: where Perl's man pages
# go (_perlman3), which slurm.spec asks Perl's Config for; RHEL's Perl
# installs them there, Debian's does not (/usr/share/man/man3).
prepare_rpm() {
	local name=$1 base root=$CACHE/$1 tarball stamp pmix version src options rpms
	base=$(upstream_base "$name")
	tarball=$(slurm_tarball "$name")
	[ -n "$tarball" ] ||
		die "no source tarball of ${name%-rpm} in ${DT_SLURM_SOURCES:-$top/../shared/src}: give the folder that has one with DT_SLURM_SOURCES"
	cmd_prepare "$base"
	stamp=.dt-built-$(basename "$tarball")
	if [ -e "$root/$stamp" ] &&
	   [ "$root/.dt-root-complete" -nt "$CACHE/$base/.dt-root-complete" ]; then
		say "$name root ready: $(in_root "$root" rpm -q slurm)"
		return 0
	fi
	say "making the $name root: a copy of the $base root, SchedMD's RPMs built from $(basename "$tarball")"
	copy_base "$name" "$base" 1 "$SLURM_BUILD_DEPS $RPM_BUILD_DEPS"
	pmix=$(pmix_dir "$root.new")
	# SchedMD's documented build, with the options of its spec that this
	# needs: mpi/pmix (--with pmix), and several slurmd on one machine
	# for the test cluster (--with multiple_slurmd). --nodeps: Debian's
	# packages are not in the RPM database; apt installed them above.
	# _unitdir is RHEL's (systemd-rpm-macros), which Debian's rpm lacks:
	# slurm.spec's fallback, /lib/systemd/systemd, is systemd's binary.
	# The RPMs are kept beside the root, so that a remade root installs
	# them again without a second build.
	options="--with multiple_slurmd --define '_with_pmix --with-pmix=$pmix' --define '_unitdir /usr/lib/systemd/system'"
	rpms=$CACHE/$name.rpms
	if [ "$(cat "$rpms/.built" 2>/dev/null)" != "$(basename "$tarball") $options" ]; then
		src=$root.new/root/rpmbuild-src
		mkdir -p "$src"
		tar -xf "$tarball" -C "$src"
		version=$(sed -n 's/^Version:[[:space:]]*//p' "$src"/*/slurm.spec)
		mv "$src"/*/ "$src/slurm-$version"
		sed -i 's|^%define _perlman3 .*|%define _perlman3 /share/man/man3|' "$src/slurm-$version/slurm.spec"
		tar -C "$src" -cjf "$root.new/root/slurm-$version.tar.bz2" "slurm-$version"
		rm -rf "$src"
		in_root "$root.new" sh -c "cd /root && rpmbuild -ta --nodeps $options slurm-$version.tar.bz2" \
			> "$CACHE/$name.build.log" 2>&1 ||
			die "$name: building SchedMD's RPMs failed: see $CACHE/$name.build.log"
		rm -rf "$rpms"
		mkdir -p "$rpms"
		find "$root.new/root/rpmbuild/RPMS" -name 'slurm-*.rpm' \
			! -name '*-debuginfo-*' ! -name '*-debugsource-*' -exec mv {} "$rpms/" \;
		echo "$(basename "$tarball") $options" > "$rpms/.built"
		rm -rf "$root.new/root/rpmbuild" "$root.new/root/slurm-$version.tar.bz2"
	fi
	# rpm's scriptlets run through its unshare plugin, which cannot make /
	# private in a chroot: --noplugins (a RHEL host runs them as is).
	mkdir -p "$root.new/root/rpms"
	cp "$rpms"/slurm-*.rpm "$root.new/root/rpms/"
	in_root "$root.new" sh -c "
		rpm -i --nodeps --noplugins /root/rpms/slurm-*.rpm &&
		rpm -q slurm slurm-devel slurm-slurmd slurm-slurmctld &&
		test -e /usr/lib64/slurm/mpi_pmix.so && ldconfig" \
		> "$CACHE/$name.install.log" 2>&1 ||
		die "$name: installing SchedMD's RPMs failed: see $CACHE/$name.install.log"
	rm -rf "$root.new/root/rpms"
	finish_root "$name" "$stamp" "$options"
	say "$name root ready: $(in_root "$root" rpm -q slurm), PMIx from $pmix"
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
