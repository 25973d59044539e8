/*
 * dist-train stacks: the node side, run by srun on each node of the step
 * (helper/stacks_collect.c), and what the command makes of its records
 * (helper/cmd_stacks.c).
 */
#ifndef DIST_TRAIN_STACKS_H
#define DIST_TRAIN_STACKS_H

/*
 * Ask this node's processes of STEP ("JOB.STEP"), this user's only, for
 * their stacks, waiting up to WAIT_MS for them, and print the records on
 * stdout. Returns 0, or 1 when this node could not be searched.
 */
int stacks_collect(const char *step, unsigned wait_ms);

#endif
