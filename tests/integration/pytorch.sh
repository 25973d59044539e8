#!/bin/bash
# PyTorch (gloo) across the 4 nodes with nothing but --dist-train.
. "$(dirname "$0")/lib.sh"

cluster_start
plan 12

job_file allreduce.py < "$(dirname "$0")/allreduce.py"
job_file store_tree.py < "$(dirname "$0")/store_tree.py"
job_file train_ddp.py < "$TOP_SRCDIR/contrib/examples/train_ddp.py"

job srun -N4 -n8 --dist-train /usr/bin/python3 allreduce.py
check "init_process_group + all_reduce on -N4 -n8" test $? = 0 || show_output
check "all 8 ranks got the sum of ranks 0..7" \
	test "$(count_lines '^ALLREDUCE rank=[0-7] world=8 sum=28 host=n[1-4] master=n1:')" = 8 || show_output
check "the 8 ranks are distinct" \
	test "$(grep -o 'rank=[0-7]' "$OUT" | sort -u | wc -l)" = 8

job srun -N4 --ntasks-per-node=2 --dist-train /usr/bin/python3 train_ddp.py --epochs 2
check "the contrib DDP example trains on 4 nodes x 2 tasks" test $? = 0 || show_output
check "... and rank 0 reports the result" \
	grep -q '^done: learned y = .* with 8 ranks$' "$OUT" || show_output

# The step's store behind the node tree (common/store_tree.h), the
# default: each node's ranks through their node's relay, twice (a second
# start after destroy_process_group), with a second process group; and
# torch's own store with store=torch.
job srun -N4 -n8 --dist-train /usr/bin/python3 store_tree.py
check "store=tree (the default): all_reduce, a second group, twice" test $? = 0 || show_output
check "... every rank got both sums, both times" \
	test "$(count_lines '^TREE attempt=[12] rank=[0-7] world=8 sum=28 evens=[14] stores=[12] host=n[1-4]$')" = 16 || show_output
check "... through the tree's store, not torch's" \
	test "$(count_lines '^TREE attempt=2 .* stores=2 ')" = 8 || show_output
check "... and a world of a task's own gets torch's store" \
	test "$(count_lines '^SOLO rank=[0-7] sum=1 stores=2$')" = 8 || show_output
job srun -N4 -n8 --dist-train=store=torch /usr/bin/python3 store_tree.py 1
check "store=torch: the same, once, through torch's own store" \
	eval '[ "$(count_lines "^TREE attempt=1 rank=[0-7] world=8 sum=28 evens=[14] stores=0 host=n[1-4]$")" = 8 ] &&
	      [ "$(count_lines "^SOLO rank=[0-7] sum=1 stores=0$")" = 8 ]' || show_output

# The sbatch example in contrib/, as a user would submit it.
job_file train.sbatch < "$TOP_SRCDIR/contrib/sbatch/train.sbatch"
rm -f "$JOBS"/ddp-*.out
job sbatch --wait train.sbatch
# The example bootstraps through PMIx (srun --mpi=pmix).
pmix_check "contrib/sbatch/train.sbatch runs" test $? = 0 || diag "$(cat "$JOBS"/ddp-*.out 2>&1)"
pmix_check "... trains with 8 ranks after checking the rendezvous" \
	eval 'grep -q "^dist-train: check: all 8 ranks reached rank 0 at n1:" "$JOBS"/ddp-*.out && grep -q "^done: learned y = .* with 8 ranks$" "$JOBS"/ddp-*.out' ||
	diag "$(cat "$JOBS"/ddp-*.out 2>&1)"

finish
