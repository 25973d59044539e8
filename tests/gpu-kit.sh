#!/bin/bash
# Slurm for a GPU machine that has none and reaches no package archive, so
# that tests/gpu-check.sh can run the plugin under real srun there.
#
#   tests/gpu-kit.sh make KIT      here: this machine's installed Slurm
#                                  (slurmctld, slurmd, srun, their plugins,
#                                  munged) and the libraries they load,
#                                  into KIT/slurm.tar
#   tests/gpu-kit.sh install KIT   there, as root, on a throwaway machine
#                                  without Slurm: unpack Slurm into /, and
#                                  of the libraries only those the machine
#                                  lacks (its own stay); add the munge user
#
# The machine's C library must be as new as this one's (Debian 12's 2.36
# runs on Ubuntu 24.04's 2.39). The plugin and the helper come from the
# build tree, built here against the same Slurm.
set -euo pipefail

die() { echo "gpu-kit: $*" >&2; exit 1; }
packages="slurmd slurmctld slurm-client slurm-wlm-basic-plugins munge libmunge2"
# The C library's own, which every machine has in its own version.
libc_libs='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64)\.so'

make_kit() {
	local kit=$1 p list files libs f
	mkdir -p "$kit"
	kit=$(cd "$kit" && pwd)
	list=$kit/files
	: > "$list"
	for p in $packages $(dpkg-query -W -f '${Package}\n' 'libslurm[0-9]*' 2>/dev/null | grep -v -- -dev); do
		dpkg-query -W -f '${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed' ||
			die "$p is not installed here (contrib/install-deps.sh installs Slurm)"
		dpkg -L "$p" | while read -r f; do
			[ -d "$f" ] && continue
			[ -f "$f" ] || [ -L "$f" ] || continue
			case $f in /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/*) continue ;; esac
			echo "$f"
		done >> "$list"
	done
	# Every library an ELF file of those packages loads, by its resolved
	# path, less the C library's and the packages' own.
	libs=$kit/libs
	while read -r f; do
		[ -f "$f" ] && file -b "$f" | grep -q '^ELF' || continue
		ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
	done < "$list" | sort -u | grep -v -E "$libc_libs" |
		while read -r soname path; do
			grep -qx "$path" "$list" || echo "$soname $(readlink -f "$path")"
		done | sort -u > "$libs"
	mkdir -p "$kit/lib"
	while read -r soname path; do cp -L "$path" "$kit/lib/$soname"; done < "$libs"
	tar -cf "$kit/slurm.tar" --files-from="$list" 2>/dev/null
	echo "gpu-kit: $(wc -l < "$list") files of $(echo $packages | wc -w)+ packages," \
		"$(wc -l < "$libs") libraries, $(du -sh "$kit" | cut -f1) in $kit"
}

install_kit() {
	local kit=$1 soname dir have pmix f
	[ "$(id -u)" = 0 ] || die "install needs root"
	[ -r "$kit/slurm.tar" ] || die "no $kit/slurm.tar: make it with 'tests/gpu-kit.sh make $kit' where Slurm is installed"
	command -v slurmd >/dev/null &&
		die "this machine has Slurm already ($(command -v slurmd)): nothing to install"
	tar -xf "$kit/slurm.tar" -C / --keep-old-files 2>/dev/null || true
	# Debian names the daemons slurmd-wlm ... and links their plain names
	# through update-alternatives, which unpacking does not run.
	for f in /usr/sbin/*-wlm; do
		[ -e "${f%-wlm}" ] || ln -s "${f##*/}" "${f%-wlm}"
	done
	dir=/usr/lib/x86_64-linux-gnu
	for f in "$kit"/lib/*; do
		soname=${f##*/}
		have=$(ldconfig -p | awk -v s="$soname" '$1 == s { print $NF; exit }')
		[ -n "$have" ] || [ -e "$dir/$soname" ] || cp "$f" "$dir/$soname"
	done
	ldconfig
	# Slurm's mpi/pmix opens PMIx by the development link in Debian's
	# folder; the machine's own library serves (same ABI, libpmix.so.2).
	pmix=$(ldconfig -p | awk '$1 == "libpmix.so.2" { print $NF; exit }')
	if [ -n "$pmix" ] && [ ! -e "$dir/pmix2/lib/libpmix.so" ]; then
		mkdir -p "$dir/pmix2/lib"
		ln -s "$(readlink -f "$pmix")" "$dir/pmix2/lib/libpmix.so"
	fi
	getent passwd munge >/dev/null || useradd -r -M -d /nonexistent -s /usr/sbin/nologin munge
	mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
	chown munge: /run/munge /var/log/munge /var/lib/munge /etc/munge
	slurmd -V >/dev/null || die "slurmd does not start here: $(slurmd -V 2>&1 | head -1)"
	echo "gpu-kit: $(slurmd -V) installed"
}

case ${1:-} in
make) make_kit "${2:?usage: gpu-kit.sh make KIT}" ;;
install) install_kit "${2:?usage: gpu-kit.sh install KIT}" ;;
*) die "usage: gpu-kit.sh make KIT | install KIT" ;;
esac
