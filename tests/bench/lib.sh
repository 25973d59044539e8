# Sourced by the benchmarks that run jobs: the integration tests' cluster
# helpers, on a cluster of its own (folder and ports), so that a benchmark
# never stops or disturbs a test run's cluster.
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
export DT_CLUSTER_DIR=/var/lib/dist-train-bench DT_CLUSTER_PORT=17200
JOBS=$DT_CLUSTER_DIR/jobs OUT=$JOBS/.out ERR=$JOBS/.err
