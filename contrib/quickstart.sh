#!/bin/bash
# From a fresh Debian 12 or 13 machine (as root) to a PyTorch DDP training on a
# local 4-node Slurm cluster, launched with nothing but srun --dist-train.
#
#   contrib/quickstart.sh          build, start the cluster, train, stop
#   contrib/quickstart.sh --keep   leave the cluster running afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

keep=0
case ${1:-} in
--keep) keep=1 ;;
"") ;;
*) echo "usage: contrib/quickstart.sh [--keep]" >&2; exit 2 ;;
esac
if [ "$(id -u)" != 0 ]; then
	echo "quickstart: run it as root: it installs packages and starts Slurm's daemons" >&2
	exit 1
fi

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "Installing the build and cluster dependencies (Debian packages)"
contrib/install-deps.sh

step "Building dist_train.so and dist-train in build/"
[ -x configure ] || autoreconf -fi >/dev/null
mkdir -p build
(cd build && { [ -f Makefile ] || ../configure -q; } && make -s -j"$(nproc)")

step "Starting a 4-node Slurm cluster on this machine (contrib/cluster/dt-cluster)"
export DT_CLUSTER_PLUGIN=$top/build/plugin/.libs/dist_train.so
export DT_CLUSTER_HELPER=$top/build/helper/dist-train
export DT_CLUSTER_WORKER_LIB=$top/build/helper/.libs/dist_train_worker.so
export DT_CLUSTER_PYTHON_HOOK=$top/helper/python
cluster=$top/contrib/cluster/dt-cluster
"$cluster" start
if [ $keep = 0 ]; then
	trap '"$cluster" stop' EXIT
fi
eval "$("$cluster" env)"
install -m 0644 contrib/examples/train_ddp.py "${DT_CLUSTER_DIR:-/var/lib/dist-train-cluster}/jobs/"

step "srun -N4 --ntasks-per-node=2 --gpus-per-node=2 --dist-train=verbose python3 train_ddp.py"
echo "(each rank's 'dist-train: rank N on nodeX: ...' line shows what the plugin set for it)"
"$cluster" run srun -N4 --ntasks-per-node=2 --gpus-per-node=2 --dist-train=verbose \
	/usr/bin/python3 train_ddp.py --epochs 3

if [ $keep = 1 ]; then
	step "The cluster is still running"
	cat <<EOM
Try it yourself, as the cluster's unprivileged user:
    $cluster run srun -N4 -n8 --dist-train=verbose hostname
    $cluster run bash        # a shell with SLURM_CONF set; then srun, sbatch, salloc
Stop it with:
    $cluster stop
EOM
fi
