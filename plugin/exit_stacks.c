/*
 * Each rank's Python stacks on the way down: when Slurm or fail-fast ends
 * a step with SIGTERM, every rank's threads are written where they stood,
 * and kept past the process's end.
 *
 * slurmstepd makes one memory file per task of the node before the tasks
 * start (post_opt, in slurmstepd's own process: user_init may run in a
 * clone that does not share its descriptors). Each task gets its own
 * file, and only that one, as DIST_TRAIN_EXIT_STACKS_FD; the Python hook
 * (helper/python/sitecustomize.py) has faulthandler write into it when
 * SIGTERM comes. slurmstepd still holds the file when the task is gone:
 * as the task ends, it reads at most EXIT_STACKS_MAX bytes of it, never
 * parsing more than a search for a traceback's header, and report.c's
 * child, as the user, writes them into the step's record folder.
 */
#include "config.h"

#include <errno.h>
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
/* The node's tasks that get one; Slurm's own limit is far above any
 * node's task count, and a file costs nothing until written. */
#define EXIT_STACKS_TASKS_MAX 4096

void exit_stacks_open(spank_t sp, struct plugin_state *st)
{
	uint32_t n;

	if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &n) != ESPANK_SUCCESS ||
	    n == 0 || n > EXIT_STACKS_TASKS_MAX)
		return;
	st->exit_stacks_fd = malloc(n * sizeof(int));
	if (!st->exit_stacks_fd)
		return;
	st->exit_stacks_n = n;
	for (uint32_t i = 0; i < n; i++)
		st->exit_stacks_fd[i] = memfd_create("dist-train-exit-stacks",
						     MFD_CLOEXEC);
}

/* The file of the node's task LOCAL_ID, or -1. */
static int task_file(const struct plugin_state *st, uint32_t local_id)
{
	return local_id < st->exit_stacks_n ? st->exit_stacks_fd[local_id] :
					      -1;
}

int exit_stacks_task(spank_t sp, const struct plugin_state *st,
		     struct dt_env *env)
{
	char text[16];
	uint32_t local_id;
	int fd;

	/* No record folder (record=off), no srun to hear the task's end:
	 * nothing would keep what the file holds. */
	if (!st->report_on || !st->record_dir[0] ||
	    spank_get_item(sp, S_TASK_ID, &local_id) != ESPANK_SUCCESS ||
	    task_file(st, local_id) < 0)
		return 0;
	/* A copy without close-on-exec: the program's, and only its own
	 * (the other tasks' files close at exec). */
	fd = dup(task_file(st, local_id));
	if (fd < 0)
		return 0;
	snprintf(text, sizeof(text), "%d", fd);
	if (dt_env_put(env, EXIT_STACKS_ENV, text, DT_ENV_SET) < 0) {
		close(fd);
		return -1;
	}
	return 0;
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
	int fd = task_file(st, local_id);
	char *text = NULL;
	size_t got = 0;
	struct stat sb;

	*len = 0;
	if (fd < 0)
		return NULL;
	st->exit_stacks_fd[local_id] = -1;
	/* Empty: no Python with the hook ran. Only a header: it ran, and
	 * either ended by itself (nothing to keep) or was killed before it
	 * could write (kept: it names the rank as unanswered). */
	if (fstat(fd, &sb) < 0 || sb.st_size <= 0)
		goto out;
	text = malloc(EXIT_STACKS_MAX);
	if (!text)
		goto out;
	while (got < EXIT_STACKS_MAX) {
		ssize_t n = pread(fd, text + got, EXIT_STACKS_MAX - got,
				  (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got == 0 || (!WIFSIGNALED(status) && !has_traceback(text, got))) {
		free(text);
		text = NULL;
		goto out;
	}
	*len = got;
out:
	close(fd);
	return text;
}

void exit_stacks_close(struct plugin_state *st)
{
	for (uint32_t i = 0; i < st->exit_stacks_n; i++)
		if (st->exit_stacks_fd[i] >= 0)
			close(st->exit_stacks_fd[i]);
	free(st->exit_stacks_fd);
	st->exit_stacks_fd = NULL;
	st->exit_stacks_n = 0;
}
