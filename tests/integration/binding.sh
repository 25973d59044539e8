#!/bin/bash
# Binding on the real cluster: each task's actual CPU affinity is what
# `dist-train plan` promises, memory is bound, and whatever the user asked
# of Slurm (--cpu-bind, bind=off) is left alone. The node's machine comes
# from its cache (topology-cache=), written by the first step.
. "$(dirname "$0")/lib.sh"

# No gpu GRES: with one, Slurm sets SLURM_STEP_GPUS itself (24.11 unsets
# a user's), and the GPU list test below hands the step its own.
DT_CLUSTER_GPUS=0 cluster_start
plan 27

# A cache of this cluster's own, empty at first: the first step below
# writes it, every later one reads it.
cache=$DT_CLUSTER_DIR/machine-cache/machine
rm -rf "${cache%/*}"
set_plugin_args topology-cache="$cache"

job_file aff.sh <<'EOF'
#!/bin/sh
echo "AFF lr=$LOCAL_RANK host=$(hostname)" \
     "allowed=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)" \
     "cpus=${DIST_TRAIN_CPUS:-unset} bind=${DIST_TRAIN_BIND:-unset}" \
     "membind=$(grep -c ' bind:' /proc/self/numa_maps)" \
     "omp=${OMP_NUM_THREADS:-unset} gpu=${DIST_TRAIN_GPU:-unset}" \
     "ordinal=${DIST_TRAIN_GPU_ORDINAL:-unset}" \
     "visible=${CUDA_VISIBLE_DEVICES:-unset} order=${CUDA_DEVICE_ORDER:-unset}" \
     "rocr=${ROCR_VISIBLE_DEVICES:-unset} hip=${HIP_VISIBLE_DEVICES:-unset}"
EOF

# Every AFF line's affinity equals the plan's CPUs for its local rank.
# Usage: matches_plan PLAN_JSON_FILE
matches_plan() {
	awk '
	FNR == NR {
		if (match($0, /"local_rank": [0-9]+/)) {
			lr = substr($0, RSTART + 14, RLENGTH - 14)
			match($0, /"cpus": "[^"]*"/)
			want[lr] = substr($0, RSTART + 9, RLENGTH - 10)
		}
		next
	}
	/^AFF / {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		n++
		if (v["allowed"] != want[v["lr"]] || v["cpus"] != want[v["lr"]] ||
		    v["membind"] == 0) {
			printf "local rank %s on %s: affinity %s, DIST_TRAIN_CPUS %s, plan %s, bound mappings %s\n",
			       v["lr"], v["host"], v["allowed"], v["cpus"], want[v["lr"]], v["membind"]
			bad++
		}
	}
	END { if (!n) print "no task reported"; exit bad || !n }
	' "$1" "$OUT"
}

# 1, 2 and 3 tasks per node on this 2-core machine. Binding stays inside
# the cores Slurm allocated to the step; with at least 2 CPUs in the step
# that is the whole machine, which `plan` sees.
for n in 1 2 3; do
	job srun -N1 -n1 --exclusive dist-train plan --tasks $n --json
	cp "$OUT" "$JOBS/plan-$n.json"
	job srun -N2 --ntasks-per-node=$n -c $((n == 1 ? 2 : 1)) --dist-train ./aff.sh
	check "$n task(s) per node: each task's CPU affinity is the plan's, memory bound" \
		matches_plan "$JOBS/plan-$n.json" || { show_output; diag "$(cat "$JOBS/plan-$n.json")"; }
done
job srun -N2 --ntasks-per-node=2 --exclusive --dist-train ./aff.sh
check "2 tasks on 2 cores: one core each, no core shared, one thread each" \
	eval '[ "$(grep -c "^AFF lr=0 .* allowed=0 .* omp=1 " "$OUT")" = 2 ] && [ "$(grep -c "^AFF lr=1 .* allowed=1 .* omp=1 " "$OUT")" = 2 ]' || show_output

job srun -N1 -n1 -c1 --dist-train ./aff.sh
check "a one-CPU step stays on the core Slurm allocated it" \
	grep -q '^AFF lr=0 .* allowed=0 cpus=0 ' "$OUT" || show_output

job srun -N1 -n2 --exclusive ./aff.sh
untouched=$(sed -n 's/^AFF .* allowed=\([^ ]*\) .*/\1/p' "$OUT" | sort -u)
job srun -N1 -n2 --exclusive --dist-train=bind=off ./aff.sh
check "bind=off leaves affinity and memory as plain srun does" \
	eval '[ "$(count_lines "^AFF .* allowed=$untouched cpus=unset bind=off membind=0 ")" = 2 ]' || show_output

job srun -N1 -n2 --exclusive --cpu-bind=none --dist-train=verbose ./aff.sh
check "an explicit --cpu-bind wins: affinity untouched" \
	test "$(count_lines "^AFF .* allowed=$untouched cpus=unset bind=numa ")" = 2 || show_output
check "... and verbose says so" \
	test "$(grep -c '^dist-train: rank [01] on n1: .* | CPUs: yours (--cpu-bind=none)' "$ERR")" = 2 || show_output

job srun -N2 --ntasks-per-node=2 --exclusive --mpi=pmix --dist-train ./aff.sh
pmix_check "with the PMIx bootstrap too" matches_plan "$JOBS/plan-2.json" || show_output

# Without PMIx or the plugin, the user gives the step its secret.
job env DIST_TRAIN_STEP_SECRET="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" \
	srun -N1 -n2 --exclusive dist-train exec -- ./aff.sh
check "dist-train exec binds the same way, without the plugin" \
	matches_plan "$JOBS/plan-2.json" || show_output

check "topology-cache: the first step wrote the node's machine, in a folder only root writes" \
	eval '[ "$(stat -c %U:%a "$cache" "${cache%/*}" | tr "\n" " ")" = "root:644 root:755 " ]' ||
	diag "$(ls -ld "$cache" "${cache%/*}" 2>&1)"
fresh=$(sed -n 2p "$cache")
sed -i '2s/boot=[^ ]*/boot=another/' "$cache"
job srun -N2 --ntasks-per-node=2 --exclusive --dist-train ./aff.sh
check "... a stale one (another boot) is written again, and tasks bind as the plan says" \
	eval '[ "$(sed -n 2p "$cache")" = "$fresh" ] && matches_plan "$JOBS/plan-2.json"' || show_output
chown nobody "$cache"
chmod 0666 "$cache"
job srun -N2 --ntasks-per-node=2 --exclusive --dist-train ./aff.sh
check "... one that is not root's alone is not believed: root's again, the same binding" \
	eval '[ "$(stat -c %U:%a "$cache")" = root:644 ] && matches_plan "$JOBS/plan-2.json"' || show_output
# A folder that is not root's: the plugin stays off (common/admin_path.h),
# and srun says so before launch.
rm -f "$cache"
chown nobody "${cache%/*}"
job srun -N2 --ntasks-per-node=2 --exclusive --dist-train ./aff.sh
check "... in a folder that is not root's: refused before launch, nothing written there" \
	eval '[ ! -e "$cache" ] && [ ! -s "$OUT" ] &&
	      grep -q "dist-train: --dist-train is unavailable: plugstack.conf is wrong (topology-cache=$cache: ${cache%/*} belongs to uid [0-9]*, not root: " "$ERR"' || show_output
rm -rf "${cache%/*}"
set_plugin_args topology-cache=off
job srun -N2 --ntasks-per-node=2 --exclusive --dist-train ./aff.sh
check "topology-cache=off: discovered in every step, nothing written, the same binding" \
	eval '[ ! -e "${cache%/*}" ] && matches_plan "$JOBS/plan-2.json"' || show_output

# The same node described by an XML file (as a site may give one).
{ lstopo-no-graphics --of xml - 2>/dev/null || lstopo --of xml -; } |
	admin_file node.xml 0644
set_plugin_args topology="$ADMIN/node.xml"
job srun -N2 --ntasks-per-node=2 --exclusive --dist-train ./aff.sh
check "topology=FILE of this node: the same binding as discovery" \
	matches_plan "$JOBS/plan-2.json" || show_output

# GPUs: a site file describing a 4-GPU POWER8 node (no GPU here).
admin_file gpus.xml 0644 < "$TOP_SRCDIR/tests/topologies/power8gpudistances.xml"
set_plugin_args topology="$ADMIN/gpus.xml"
job srun -N2 --ntasks-per-node=4 --exclusive --dist-train ./aff.sh
check "each local rank gets its GPU, in PCI bus order" \
	eval '[ "$(count_lines "^AFF lr=0 .* gpu=0002:01:00.0 ordinal=0 visible=unset order=PCI_BUS_ID")" = 2 ] &&
	      [ "$(count_lines "^AFF lr=3 .* gpu=000b:01:00.0 ordinal=3 ")" = 2 ]' || show_output
job srun -N1 --ntasks-per-node=4 --exclusive --dist-train=visible-gpus=own ./aff.sh
check "visible-gpus=own: each task sees its own GPU only" \
	eval '[ "$(count_lines "^AFF lr=2 .* gpu=000a:01:00.0 ordinal=0 visible=2 ")" = 1 ]' || show_output
rm -f "$JOBS/ran"
job srun -N1 --ntasks-per-node=5 --exclusive --dist-train touch ran
check "more tasks than GPUs fails with one message naming the fix" \
	test "$(grep -c '^dist-train: error: on n[0-9]*: 5 tasks on this node but 4 GPUs for the step: run at most 4 tasks per node (--ntasks-per-node=4), or let tasks share GPUs with --dist-train=share-gpus$' "$ERR")" = 1 || show_output
check "... before any program started" test ! -e "$JOBS/ran"
job srun -N1 --ntasks-per-node=5 --exclusive --dist-train=share-gpus ./aff.sh
check "share-gpus: the fifth task shares GPU 0" \
	test "$(count_lines '^AFF lr=4 .* gpu=0002:01:00.0 ordinal=0 ')" = 1 || show_output
job env SLURM_STEP_GPUS=9 srun -N1 -n1 --exclusive --dist-train true
check "a GPU list naming GPUs the node lacks is refused clearly" \
	grep -q "^dist-train: error: on n[0-9]*: SLURM_STEP_GPUS='9' names GPU 9, but this node has 4 NVIDIA GPUs: unset it if you set it, or use --dist-train=bind=numa$" "$ERR" || show_output

# AMD: a site file describing an MI250X node (8 GCDs; no GPU here). Its
# cores are not this machine's: the plan keeps only those Slurm gave the
# step, so only GPUs are checked. ROCR_VISIBLE_DEVICES stands for Slurm's
# (the step's GCDs 4 and 5), HIP_VISIBLE_DEVICES for a user's.
admin_file mi250x.xml 0644 < "$TOP_SRCDIR/tests/topologies/mi250x-lumi-frontier.xml"
set_plugin_args topology="$ADMIN/mi250x.xml"
job env ROCR_VISIBLE_DEVICES=4,5 HIP_VISIBLE_DEVICES=0 srun -N1 \
	--ntasks-per-node=2 --exclusive --dist-train=visible-gpus=own,verbose ./aff.sh
check "AMD MI250X, ROCR_VISIBLE_DEVICES=4,5: each task its GCD alone, HIP's variable gone, no CUDA_DEVICE_ORDER; verbose names the vendor" \
	eval '[ "$(count_lines "^AFF lr=0 .* gpu=0000:d1:00.0 ordinal=0 visible=unset order=unset rocr=4 hip=unset$")" = 1 ] &&
	      [ "$(count_lines "^AFF lr=1 .* gpu=0000:d6:00.0 ordinal=0 visible=unset order=unset rocr=5 hip=unset$")" = 1 ] &&
	      grep -q "^dist-train: rank 1 on n[0-9]*: .*GPU: AMD 0000:d6:00.0 (ROCR_VISIBLE_DEVICES) | took: " "$ERR"' || show_output
job srun -N2 --ntasks-per-node=8 --exclusive --dist-train ./aff.sh
check "AMD MI250X, the whole node: local rank i gets GCD i, ordered as ROCm numbers them" \
	eval '[ "$(count_lines "^AFF lr=0 .* gpu=0000:c1:00.0 ordinal=0 visible=unset order=unset rocr=unset ")" = 2 ] &&
	      [ "$(count_lines "^AFF lr=4 .* gpu=0000:d1:00.0 ordinal=4 ")" = 2 ] &&
	      [ "$(count_lines "^AFF lr=7 .* gpu=0000:de:00.0 ordinal=7 ")" = 2 ]' || show_output
"$TOP_BUILDDIR/helper/dist-train" plan --topology "$ADMIN/mi250x.xml" > "$OUT" 2> "$ERR"
check "dist-train plan on the MI250X file names the vendor and its variable" \
	eval 'sed -n 1p "$OUT" | grep -q ", 8 AMD GPUs, " &&
	      sed -n 3p "$OUT" | grep -qx "each task.s GPU: DIST_TRAIN_GPU_ORDINAL, or ROCR_VISIBLE_DEVICES alone with visible-gpus=own"' || show_output
job srun -N1 --ntasks-per-node=1 --dist-train=torchrun,verbose true
check "AMD MI250X, torchrun mode: one worker per GCD" \
	grep -q "^dist-train: rank 0 on n[0-9]*: .*PET_NPROC_PER_NODE=8 " "$ERR" || show_output

# A cluster of two kinds with one plugstack.conf line: topology= with %n
# gives each node its own file. n1 and n2 are MI250X nodes, n3 and n4
# POWER8 nodes with 4 NVIDIA GPUs; one step over all four.
for n in n1 n2; do
	admin_file "node-$n.xml" 0644 < "$TOP_SRCDIR/tests/topologies/mi250x-lumi-frontier.xml"
done
for n in n3 n4; do
	admin_file "node-$n.xml" 0644 < "$TOP_SRCDIR/tests/topologies/power8gpudistances.xml"
done
set_plugin_args topology="$ADMIN/node-%n.xml"
# SLURMD_NODENAME=n1 in srun's environment, as in a batch script on n1:
# each node still reads its own file.
job env SLURMD_NODENAME=n1 srun -N4 --ntasks-per-node=4 --exclusive --dist-train=verbose ./aff.sh
check "AMD and NVIDIA nodes in one step (topology=.../node-%n.xml, srun run where SLURMD_NODENAME is n1's): each node's tasks get its own vendor's GPUs, in its runtime's order" \
	eval '[ "$(count_lines "^AFF lr=[0-3] host=n[12] .* gpu=0000:[c-d][0-9a-f]:00\.0 ordinal=[0-3] visible=unset order=unset ")" = 8 ] &&
	      [ "$(count_lines "^AFF lr=0 host=n[12] .* gpu=0000:c1:00\.0 ordinal=0 ")" = 2 ] &&
	      [ "$(count_lines "^AFF lr=[0-3] host=n[34] .* gpu=000[2-9a-b]:01:00\.0 ordinal=[0-3] visible=unset order=PCI_BUS_ID ")" = 8 ] &&
	      [ "$(count_lines "^AFF lr=3 host=n[34] .* gpu=000b:01:00\.0 ordinal=3 ")" = 2 ] &&
	      [ "$(grep -c "^dist-train: rank [0-9]* on n[12]: .*GPU: AMD " "$ERR")" = 8 ] &&
	      [ "$(grep -c "^dist-train: rank [0-9]* on n[34]: .*GPU: NVIDIA " "$ERR")" = 8 ]' || show_output
set_plugin_args

finish
