#!/bin/sh
# The plugin exports the SPANK symbols and nothing else (TAP): any other
# global could shadow one of srun's or slurmstepd's. The worker library,
# preloaded into programs, exports only the store's guard (accept and
# accept4, helper/store_guard.c) and the node tree's start
# (dist_train_store_start, helper/store_node.c).
so=${DT_TOP_BUILDDIR:-.}/plugin/.libs/dist_train.so
worker=${DT_TOP_BUILDDIR:-.}/helper/.libs/dist_train_worker.so
echo "1..3"
extra=$(nm -D --defined-only "$so" | awk '{print $3}' |
	grep -v -E '^(plugin_name|plugin_type|plugin_version|spank_plugin_version|slurm_spank_[a-z_]+)$')
if [ -z "$extra" ]; then
	echo "ok 1 - only SPANK symbols are exported"
else
	echo "not ok 1 - also exported: $extra"
fi
if nm -D --defined-only "$so" | grep -q ' slurm_spank_init$'; then
	echo "ok 2 - slurm_spank_init is exported"
else
	echo "not ok 2 - slurm_spank_init is missing"
fi
worker_exports=$(nm -D --defined-only "$worker" | awk '{print $3}' | sort | tr '\n' ' ')
if [ "$worker_exports" = "accept accept4 dist_train_store_start " ]; then
	echo "ok 3 - the worker library exports only accept, accept4 and dist_train_store_start"
else
	echo "not ok 3 - the worker library exports: $worker_exports"
fi
