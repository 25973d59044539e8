#!/bin/bash
# The pyxis and enroot test, as root: srun --container-image with
# --dist-train on the test cluster (tests/integration/pyxis.sh).
#
#   tests/pyxis.sh                on this machine's Slurm
#   tests/pyxis.sh --stack=NAME   in a root of tests/stack-root.sh (trixie,
#                                 sid, slurm-24.05, ...) on that Slurm
#
# It builds enroot (its static tools with Debian's musl-tools) and pyxis
# (against the Slurm it is tested on) from their release sources, makes
# an image (a Debian root with python3 and torch, made with debootstrap,
# as a squashfs file: enroot import would need a registry; it sets
# OMP_NUM_THREADS=7 in its /etc/environment), builds the
# tree, and runs the test. What it builds is kept in
# /var/cache/dist-train/pyxis for the next run.
#
# Settings (environment):
#   DT_PYXIS_SOURCES  the folder with pyxis-*.tar.*, enroot-*.tar.* and
#                     enroot's submodules enroot-dep-makeself*.tar.*,
#                     enroot-dep-linux-headers*.tar.* [../shared/src
#                     beside the tree]
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
CACHE=/var/cache/dist-train/pyxis

die() { echo "tests/pyxis.sh: $*" >&2; exit 1; }
say() { echo "tests/pyxis.sh: $*" >&2; }

[ "$(id -u)" = 0 ] || die "run it as root: it installs packages and starts Slurm's daemons"

# What is built, as the names of its source tarballs begin.
SOURCES="pyxis-[0-9] enroot-[0-9] enroot-dep-makeself enroot-dep-linux-headers"

# The newest tarball whose name begins with PATTERN in the sources folder.
source_tarball() {
	local dir=${DT_PYXIS_SOURCES:-$top/../shared/src}
	{ ls -1 "$dir"/$1*.tar.* 2>/dev/null || true; } | sort -V | tail -n 1
}

# The test image of SUITE: made once, on this machine (the stack roots
# reach no network).
make_image() {
	local suite=$1 img=$CACHE/image-$1.sqsh root
	if [ -r "$img" ]; then
		echo "$img"
		return 0
	fi
	command -v debootstrap >/dev/null && command -v mksquashfs >/dev/null ||
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap squashfs-tools >/dev/null ||
		die "cannot install debootstrap and squashfs-tools"
	mkdir -p "$CACHE"
	root=$CACHE/image-$suite.root
	rm -rf "$root"
	say "making the test image: a $suite root with python3 and torch (a few minutes)"
	debootstrap --variant=minbase --include=python3-torch "$suite" "$root" \
		"$(tests/stack-root.sh mirror)" > "$CACHE/image-$suite.log" 2>&1 ||
		die "debootstrap failed: see $CACHE/image-$suite.log"
	echo "dist-train test image" > "$root/etc/dist-train-test-image"
	# A variable the plugin also sets, as an image's ENV would: enroot
	# gives the container the image's /etc/environment.
	echo "OMP_NUM_THREADS=7" >> "$root/etc/environment"
	mksquashfs "$root" "$img.new" -comp lz4 -noappend -no-progress -wildcards \
		-e 'proc/*' 'sys/*' 'dev/*' 'run/*' 'tmp/*' 'var/cache/apt/*' \
		'var/lib/apt/lists/*' >> "$CACHE/image-$suite.log" 2>&1 ||
		die "mksquashfs failed: see $CACHE/image-$suite.log"
	chmod 0644 "$img.new"
	mv "$img.new" "$img"
	rm -rf "$root"
	echo "$img"
}

# Build enroot and pyxis for this root's Slurm into KIT, from the
# sources in SRC (the tarballs).
make_kit() {
	local src=$1 kit=$2 work enroot pyxis
	[ -r "$kit/spank_pyxis.so" ] && [ -x "$kit/enroot/bin/enroot" ] && return 0
	work=$(mktemp -d)
	rm -rf "$kit"
	mkdir -p "$kit"
	say "building enroot and pyxis in $kit"
	tar -xf "$src"/enroot-[0-9]*.tar.* -C "$work"
	enroot=$(echo "$work"/enroot-*/)
	tar -xf "$src"/enroot-dep-makeself*.tar.* -C "$enroot/deps"
	tar -xf "$src"/enroot-dep-linux-headers*.tar.* -C "$enroot/deps"
	# Debian's musl-gcc, where enroot's deps/Makefile would build musl
	# from its submodule.
	mkdir -p "$enroot/deps/dist/musl/bin"
	ln -s "$(command -v musl-gcc)" "$enroot/deps/dist/musl/bin/musl-gcc"
	touch "$enroot/deps/musl/.stamp"
	make -C "$enroot" -j"$(nproc)" install prefix="$kit/enroot" \
		> "$kit/enroot-build.log" 2>&1 ||
		die "building enroot failed: see $kit/enroot-build.log"
	# Each user's enroot files in each node's own /tmp.
	cat > "$kit/enroot/etc/enroot/enroot.conf" <<'EOF'
ENROOT_RUNTIME_PATH /tmp/enroot-$(id -u)/runtime
ENROOT_CACHE_PATH   /tmp/enroot-$(id -u)/cache
ENROOT_DATA_PATH    /tmp/enroot-$(id -u)/data
ENROOT_TEMP_PATH    /tmp
EOF
	tar -xf "$src"/pyxis-[0-9]*.tar.* -C "$work"
	pyxis=$(echo "$work"/pyxis-*/)
	make -C "$pyxis" > "$kit/pyxis-build.log" 2>&1 ||
		die "building pyxis failed: see $kit/pyxis-build.log"
	install -m 0644 "$pyxis/spank_pyxis.so" "$kit/"
	chmod -R a+rX "$kit"
	rm -rf "$work"
}

# The part that runs where Slurm is: build the tree, the kit, then the
# test. SRC: the sources, IMAGE: the image.
run_here() {
	local src=$1 image=$2 slurm kit
	slurm=$(slurmd -V | awk '{ print $2 }')
	kit=$CACHE/kit-slurm-$slurm
	make_kit "$src" "$kit"
	if [ ! -e build/config.status ]; then
		autoreconf -fi > /dev/null 2>&1
		mkdir -p build
		(cd build && ../configure -q --enable-werror)
	fi
	make -C build -j"$(nproc)" > /dev/null
	DT_TOP_BUILDDIR=$top/build DT_TOP_SRCDIR=$top DT_PYXIS_KIT=$kit \
		DT_PYXIS_IMAGE=$image tests/integration/pyxis.sh | tee "$CACHE/last.tap"
	! grep -q '^not ok' "$CACHE/last.tap" && grep -q '^ok' "$CACHE/last.tap"
}

stack= inside=
for arg in "$@"; do
	case $arg in
	--stack=*) stack=${arg#--stack=} ;;
	--in-root=*) inside=${arg#--in-root=} ;;
	*) die "unknown argument '$arg'; usage: tests/pyxis.sh [--stack=NAME]" ;;
	esac
done

if [ -n "$inside" ]; then
	run_here "$inside" "$inside/image.sqsh"
	exit
fi

for name in $SOURCES; do
	[ -n "$(source_tarball "$name")" ] ||
		die "no ${name%-\[0-9\]} source tarball in ${DT_PYXIS_SOURCES:-$top/../shared/src}: give the folder that has pyxis, enroot and enroot's submodules makeself and linux-headers with DT_PYXIS_SOURCES"
done
# The image's suite: the stack's, SchedMD's releases' root (Debian 13),
# or this machine's.
case $stack in
slurm-*) suite=trixie ;;
"") suite=$(. /etc/os-release && echo "$VERSION_CODENAME") ;;
*) suite=$stack ;;
esac
image=$(make_image "$suite")

if [ -z "$stack" ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q musl-tools squashfs-tools make gcc >/dev/null ||
		die "cannot install musl-tools and squashfs-tools"
	src=$(mktemp -d)
	trap 'rm -rf "$src"' EXIT
	for name in $SOURCES; do
		ln -s "$(source_tarball "$name")" "$src/"
	done
	run_here "$src" "$image"
	exit
fi

tests/stack-root.sh prepare "$stack"
tests/stack-root.sh install "$stack" musl-tools squashfs-tools
root=$(tests/stack-root.sh path "$stack")
dest=$root/var/cache/dist-train/pyxis-sources
rm -rf "$dest"
mkdir -p "$dest"
for name in $SOURCES; do
	cp "$(source_tarball "$name")" "$dest/"
done
# The image, without a second copy where the filesystem allows.
ln "$image" "$dest/image.sqsh" 2>/dev/null || cp "$image" "$dest/image.sqsh"
exec tests/stack-root.sh enter "$stack" tests/pyxis.sh --in-root=/var/cache/dist-train/pyxis-sources
