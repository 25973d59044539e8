#!/bin/bash
# Install what dist-train needs to build, test, and run the local test
# cluster, on Debian 12 as root. Packages already present are not touched.
set -euo pipefail

PACKAGES=(
	# build
	gcc make autoconf automake libtool pkg-config
	libslurm-dev libhwloc-dev libpmix-dev libcunit1-dev
	# the local cluster and the integration tests
	slurmctld slurmd slurm-client munge hwloc
	python3 python3-torch
	# the benchmarks (tests/bench/)
	time
	# tests/run.sh's memory checks, fuzzing and package build
	valgrind strace clang libclang-rt-14-dev dpkg-dev debhelper
)

if [ "$(id -u)" != 0 ]; then
	echo "install-deps: run it as root (it installs Debian packages)" >&2
	exit 1
fi
missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "install-deps: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
