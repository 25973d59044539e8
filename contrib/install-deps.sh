#!/bin/bash
# Install what dist-train needs to build, test, and run the local test
# cluster, as root, on Debian 12 (bookworm), 13 (trixie) or unstable (sid):
# every name below exists in all three, so that a minimal root of any of
# them (debootstrap --variant=minbase) gets all it uses. Packages already
# present are not touched.
set -euo pipefail

PACKAGES=(
	# build (build-essential: a minimal root has no compiler, make or
	# dpkg-dev)
	build-essential autoconf automake libtool pkg-config
	libslurm-dev libhwloc-dev libpmix-dev libcunit1-dev nettle-dev
	# the local cluster and the integration tests
	slurmctld slurmd slurm-client munge hwloc
	python3 python3-torch
	# the step records' schema check (tests/integration/lib.sh)
	python3-jsonschema
	# tests/rpm-spec.sh reads the RPM spec as rpmbuild does
	rpm
	# tests/integration/frameworks.sh: an MPI program under --dist-train
	python3-mpi4py
	# tests/integration/containers.sh: Slurm's OCI containers (srun
	# --container) run with runc
	runc
	hostname procps
	# tests/integration/network.sh: nodes in network namespaces of their own,
	# and a node that drops what it sends to srun
	iproute2 nftables
	# the benchmarks (tests/bench/)
	time
	# tests/run.sh's memory checks, fuzzing and package build
	# (libclang-rt-dev: the sanitizer and fuzzer runtimes of the suite's
	# default clang, whatever its version)
	valgrind strace clang libclang-rt-dev dpkg-dev debhelper
)

# A Slurm that is not Debian's: built from SchedMD's sources in /usr/local,
# or SchedMD's RPMs (the slurm-X.Y and slurm-X.Y-rpm roots of
# tests/stack-root.sh). Debian's is not installed over it.
if { [ -r /usr/local/include/slurm/spank.h ] && [ -x /usr/local/sbin/slurmd ]; } ||
	{ command -v rpm >/dev/null && rpm -q slurm-devel >/dev/null 2>&1; }; then
	for i in "${!PACKAGES[@]}"; do
		case ${PACKAGES[$i]} in
		libslurm-dev | slurmctld | slurmd | slurm-client) unset "PACKAGES[$i]" ;;
		esac
	done
fi

if [ "$(id -u)" != 0 ]; then
	echo "install-deps: run it as root (it installs Debian packages)" >&2
	exit 1
fi
missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
# apt-get, one at a time among the project's scripts (tests/stacks.sh
# makes the stack roots while this runs), and waiting for dpkg's own lock
# rather than failing on it.
apt_get() {
	flock -w 900 /run/lock/dist-train-apt.lock \
		apt-get -o DPkg::Lock::Timeout=900 "$@"
}
if [ ${#missing[@]} -gt 0 ]; then
	echo "install-deps: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	mkdir -p /run/lock
	apt_get update -q
	apt_get install -y -q --no-install-recommends "${missing[@]}"
fi
