/*
 * What `dist-train stacks` makes of the ranks' Python stacks: where each
 * rank is (its main thread's innermost frame, read from what Python's
 * faulthandler wrote), the ranks grouped by it, the odd ones out first.
 * Pure: the collection itself is helper/stacks_collect.c.
 */
#ifndef DIST_TRAIN_STACK_REPORT_H
#define DIST_TRAIN_STACK_REPORT_H

#include <stdbool.h>
#include <stddef.h>

/* Longest "FILE:LINE in FUNCTION" kept; longer ones are cut. */
#define DT_STACK_WHERE_MAX 1024

/*
 * The innermost frame of the main thread in DUMP (LEN bytes, one or more
 * faulthandler tracebacks of all threads: the last one counts; in each,
 * the main thread is listed last), as "FILE:LINE in FUNCTION", into
 * WHERE. Returns 0; -1 when DUMP holds no traceback, "<no Python frame>"
 * when the main thread shows none.
 */
int dt_stack_where(const char *dump, size_t len, char *where,
		   size_t where_len);

/*
 * Whether WHERE (as dt_stack_where gives it) is inside torch.distributed:
 * a rank waiting in a collective (all_reduce, barrier, a store's wait),
 * and not one that has yet to reach it.
 */
bool dt_stack_in_collective(const char *where);

/* Longest collective's name kept ("all_reduce", "barrier"), with its NUL. */
#define DT_COLLECTIVE_NAME_MAX 32

/*
 * Whether a rank's stacks of its end (DUMP, LEN bytes) say that it ended
 * when a collective of its timed out: the Python hook writes
 * "dist-train: its NAME timed out" above the stacks of an uncaught
 * exception that did. NAME (letters, digits, '_', shorter than
 * DT_COLLECTIVE_NAME_MAX) into NAME_OUT; 0, or -1.
 */
int dt_stack_timed_out(const char *dump, size_t len, char *name_out,
		       size_t name_len);

/* Whether NAME is a collective's name as dt_stack_timed_out keeps one. */
bool dt_collective_name_ok(const char *name);

/*
 * How much of DUMP (LEN bytes) its first faulthandler dump takes: where a
 * second one starts (a thread's header right after a frame: within one
 * dump, a blank line separates threads), or LEN. A rank's stacks of its
 * end keep the first (where SIGTERM found it); a second SIGTERM while
 * Python was ending may have added one from its exit handlers.
 */
size_t dt_stack_first_dump(const char *dump, size_t len);

struct dt_stack_group {
	const char *where;	/* shared by the group's ranks */
	size_t first;		/* its ranks: ORDER[first .. first+count) */
	size_t count;
};

/*
 * Group the N ranks by WHERE[rank] (NULL: the rank has no stack, left
 * out). ORDER (room for N) gets the ranks of each group, ascending;
 * GROUPS (room for N) the groups, the smallest first (the odd ones out),
 * ties by their lowest rank. Returns the number of groups.
 */
size_t dt_stack_group(const char *const *where, size_t n, size_t *order,
		      struct dt_stack_group *groups);

/*
 * RANKS (N of them, ascending) as "0-4,6,9-10" into BUF, cut with "..."
 * when it does not fit. Returns the length written.
 */
size_t dt_rank_ranges(const size_t *ranks, size_t n, char *buf, size_t len);

#endif
