/*
 * What a step's saved files (common/saved_files.h) say of each rank:
 * where its stacks of its end found it, how it ended, its newest NCCL
 * collective, and from all of them the ranks that were behind. Read by
 * dist-train why after the job is gone, and by srun at the step's end.
 */
#ifndef DIST_TRAIN_RANK_EVIDENCE_H
#define DIST_TRAIN_RANK_EVIDENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A stacks file: the plugin's 256 KiB and its own line. */
#define DT_STACKS_FILE_MAX ((256u << 10) + 4096)

enum dt_rank_state {
	DT_RANK_NOTHING_SAVED,	/* no stacks file */
	DT_RANK_HAS_STACKS,	/* one with a traceback */
	DT_RANK_UNANSWERED,	/* one without: killed before it wrote */
};

/* Kept small: a step may have 131,072 ranks and more. */
struct dt_rank_evidence {
	enum dt_rank_state state;
	char *where;		/* HAS_STACKS: its main thread's frame */
	char *how;		/* how it ended, from its stacks file */
	char *collective;	/* its newest NCCL collective, or NULL */
	long long seq;		/* that collective's number; -1: none */
};

struct dt_evidence {
	size_t tasks;
	struct dt_rank_evidence *ranks;	/* TASKS of them */
	size_t nstacks, ndumps;		/* files read */
	bool partial;			/* BUDGET ran out: not all were */
};

/*
 * The whole of the regular file PATH, at most MAX bytes, NUL-ended, its
 * length in *LEN; NULL with errno. Not through a link, nor a FIFO; where
 * OWNER is not (uid_t)-1, only a file of that owner (root reading a
 * user's files for them).
 */
char *dt_read_file_bounded(const char *path, size_t max, uid_t owner,
			   size_t *len);

/*
 * STEP's ("JOB.STEP") saved files in DIR, for its TASKS ranks, read with
 * dt_read_file_bounded and OWNER, BUDGET bytes in all (0: no limit; past
 * it, EV is partial). Returns 0 (no files is no error), or -1 without
 * memory. EV is freed with dt_evidence_free either way.
 */
int dt_evidence_read(struct dt_evidence *ev, const char *dir,
		     const char *step, size_t tasks, uid_t owner,
		     size_t budget);
void dt_evidence_free(struct dt_evidence *ev);

/*
 * The ranks that were behind, ascending, into ORDER (room for EV's
 * tasks): with flight recorder dumps, those whose newest collective is
 * older than the others'; else, from the stacks, those not inside
 * torch.distributed while others waited there. Returns how many.
 */
size_t dt_evidence_behind(const struct dt_evidence *ev, size_t *order);

#endif
