/*
 * dist-train stacks: the node side, run by srun on each node of the step
 * (helper/stacks_collect.c), and what the command makes of its records
 * (helper/cmd_stacks.c).
 */
#ifndef DIST_TRAIN_STACKS_H
#define DIST_TRAIN_STACKS_H

/*
 * Run as root, become UID_TEXT (the step's user, as slurmctld names it)
 * for good: everything after is done with that user's rights, so that
 * nothing a process of the step names (a descriptor, a dump's path, a
 * folder) is opened or written as root, and only that user's processes
 * are seen. Run as another user, or for root's own job, nothing. 0, or
 * -1 after saying why.
 */
int stacks_become_user(const char *uid_text);

/*
 * Ask this node's processes of STEP ("JOB.STEP"), this user's only, for
 * their stacks, waiting up to WAIT_MS for them, and print the records on
 * stdout, every byte of the step's text that is not printable as '?'.
 * Started as root, it first becomes STEP_UID (stacks_become_user).
 * Returns 0, or 1 when this node could not be searched.
 */
int stacks_collect(const char *step, const char *step_uid, unsigned wait_ms);

/* TEXT with each control byte (below 0x20, and 0x7f) made '?', in place:
 * text of the step's, before it is parsed or printed. */
void stacks_printable(char *text);

#endif
