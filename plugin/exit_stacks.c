/*
 * Each rank's Python stacks on the way down: when Slurm or fail-fast ends
 * a step with SIGTERM, every rank's threads are written where they stood,
 * and kept past the process's end.
 *
 * slurmstepd makes one memory file for the node's tasks before they start
 * (post_opt, in slurmstepd's own process: user_init may run in a clone
 * that does not share its descriptors). Each task keeps the node's
 * descriptor across exec, named with the size of a task's region in
 * DIST_TRAIN_EXIT_STACKS_FD ("FD:REGION", the same for every task of the
 * node, so set once for them all: common/node_env.h). The Python hook
 * (helper/python/sitecustomize.py) opens the file again for its process
 * (a description of its own, with its own offset) at the task's region,
 * SLURM_LOCALID regions in, closes the node's descriptor, and has
 * faulthandler write there when SIGTERM comes: a program without the hook
 * pays nothing for it (opening it through /proc takes a new process some
 * 15 us). slurmstepd still holds the file when the task is gone:
 * as the task ends, it reads at most EXIT_STACKS_MAX bytes of the task's
 * region, never parsing more than a search for a traceback's header, and
 * the node's reporter, as the user, writes them into the step's record
 * folder. One file, not one a task: slurmstepd's descriptors past 64 and
 * 128 make the kernel grow its descriptor table, and a multi-threaded
 * process waits for an RCU grace period there (13 ms, measured with 16
 * tasks a node: doc/performance.md), on the way to the tasks' start.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin.h"
#include "../common/train_env.h"

/* What the task's program finds its file under. */
#define EXIT_STACKS_ENV "DIST_TRAIN_EXIT_STACKS_FD"
/* The node's tasks that get a region; Slurm's own limit is far above any
 * node's task count. */
#define EXIT_STACKS_TASKS_MAX 4096
/* Between two tasks' regions: the file is sparse (a region costs nothing
 * until written), and a task writes one traceback per thread; one that
 * wrote past this would run into the next task's region. */
#define EXIT_STACKS_REGION ((off_t)16 << 20)

void exit_stacks_open(spank_t sp, struct plugin_state *st)
{
	uint32_t n;

	st->exit_stacks_fd = -1;
	if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &n) != ESPANK_SUCCESS ||
	    n == 0 || n > EXIT_STACKS_TASKS_MAX)
		return;
	st->exit_stacks_fd = memfd_create("dist-train-exit-stacks",
					  MFD_CLOEXEC);
	st->exit_stacks_n = st->exit_stacks_fd >= 0 ? n : 0;
}

/* Where task LOCAL_ID's region starts, or -1 where it has none. */
static off_t task_region(const struct plugin_state *st, uint32_t local_id)
{
	return st->exit_stacks_fd >= 0 && local_id < st->exit_stacks_n ?
	       (off_t)local_id * EXIT_STACKS_REGION : -1;
}

bool exit_stacks_named(const struct plugin_state *st)
{
	/* No record folder (record=off), no srun to hear the task's end:
	 * nothing would keep what the file holds. */
	return st->report_on && st->record_dir[0] && st->exit_stacks_fd >= 0;
}

int exit_stacks_env(const struct plugin_state *st, struct dt_env *env)
{
	char text[48];

	if (!exit_stacks_named(st))
		return 0;
	snprintf(text, sizeof(text), "%d:%lld", st->exit_stacks_fd,
		 (long long)EXIT_STACKS_REGION);
	return dt_env_put(env, EXIT_STACKS_ENV, text, DT_ENV_SET);
}

int exit_stacks_task(spank_t sp, const struct plugin_state *st,
		     struct dt_env *env)
{
	uint32_t local_id;

	/* The node's descriptor, kept across exec for the program. */
	if (!exit_stacks_named(st) ||
	    spank_get_item(sp, S_TASK_ID, &local_id) != ESPANK_SUCCESS ||
	    task_region(st, local_id) < 0 ||
	    fcntl(st->exit_stacks_fd, F_SETFD, 0) < 0)
		return 0;
	return exit_stacks_env(st, env) < 0 ? -1 : 1;
}

/* Whether TEXT (LEN bytes) holds one of faulthandler's tracebacks. */
static bool has_traceback(const char *text, size_t len)
{
	static const char header[] = "(most recent call first):";

	return memmem(text, len, header, sizeof(header) - 1) != NULL;
}

char *exit_stacks_take(struct plugin_state *st, uint32_t local_id, int status,
		       size_t *len)
{
	off_t region = task_region(st, local_id);
	char *text = NULL, first;
	size_t got = 0;

	*len = 0;
	if (region < 0)
		return NULL;
	/* Most tasks wrote nothing: one byte says so, without the buffer. */
	if (pread(st->exit_stacks_fd, &first, 1, region) != 1 || !first)
		goto out;
	text = malloc(EXIT_STACKS_MAX);
	if (!text)
		goto out;
	while (got < EXIT_STACKS_MAX) {
		ssize_t n = pread(st->exit_stacks_fd, text + got,
				  EXIT_STACKS_MAX - got, region + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	/* What was written ends at the first NUL (the file's holes read as
	 * zeros). Nothing: no Python with the hook ran. Only a header: it
	 * ran, and either ended by itself (nothing to keep) or was killed
	 * before it could write (kept: it names the rank as unanswered). */
	got = strnlen(text, got);
	if (got == 0 || (!WIFSIGNALED(status) && !has_traceback(text, got))) {
		free(text);
		text = NULL;
		goto out;
	}
	*len = got;
out:
	/* The region's memory goes back now, not at the step's end. */
	(void)fallocate(st->exit_stacks_fd, FALLOC_FL_PUNCH_HOLE |
			FALLOC_FL_KEEP_SIZE, region, EXIT_STACKS_REGION);
	return text;
}

void exit_stacks_close(struct plugin_state *st)
{
	if (st->exit_stacks_fd >= 0)
		close(st->exit_stacks_fd);
	st->exit_stacks_fd = -1;
	st->exit_stacks_n = 0;
}
