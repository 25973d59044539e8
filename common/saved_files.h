/*
 * The files a step leaves in its record folder besides its record: each
 * rank's stacks of its end (dist-train-JOB.STEP.stacks-rank-N, written by
 * plugin/exit_stacks.c) and NCCL flight recorder dumps
 * (dist-train-JOB.STEP.nccl-rank-N, by torch where the Python hook set it
 * up). srun lists them in the record; dist-train why reads them.
 */
#ifndef DIST_TRAIN_SAVED_FILES_H
#define DIST_TRAIN_SAVED_FILES_H

#include <stddef.h>
#include <stdint.h>

/* At most this many are listed: one per rank and kind. */
#define DT_SAVED_MAX 65536

enum dt_saved_kind { DT_SAVED_STACKS, DT_SAVED_NCCL };

struct dt_saved_file {
	enum dt_saved_kind kind;
	uint32_t rank;
	char *name;		/* in the folder, without it */
};

/* Whether NAME is one of STEP's ("JOB.STEP") files: 0 with its KIND and
 * RANK, or -1. */
int dt_saved_file_of(const char *step, const char *name,
		     enum dt_saved_kind *kind, uint32_t *rank);

/*
 * STEP's files in DIR, stacks first, each kind by rank, into *FILES (a
 * malloc'd array of *N, freed with dt_saved_files_free). Returns 0 (none
 * is no error), or -1 where DIR cannot be read, with errno.
 */
int dt_saved_files(const char *dir, const char *step,
		   struct dt_saved_file **files, size_t *n);
void dt_saved_files_free(struct dt_saved_file *files, size_t n);

#endif
