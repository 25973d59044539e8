/*
 * For the integration tests only, never installed: a SPANK plugin put
 * before dist_train.so in plugstack.conf (test_plugin in lib.sh) that
 * stands in for a forged launch request. Slurm's own srun and spank_setenv
 * carry no variable above 256 KiB; a launch message written by hand can
 * carry any size. So in slurmstepd, before dist_train.so reads the step
 * (its user_init), this plugin (in init_post_opt: as root, who alone can
 * reset the peak) puts 20 MB of text ("a,a,...") in the job's variable
 * named by DT_TEST_HUGE, allocated as Slurm allocates the
 * environment's strings (slurm_xstrdup, which Slurm frees), and resets
 * the process's peak memory. When the first task has been forked it
 * writes to slurmd's log how far slurmstepd's peak grew in between: what
 * reading that text cost the root context.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "../peak_memory.h"

SPANK_PLUGIN(huge_env, 1);

#define HUGE_LEN (20u << 20)

/* libslurmfull's, in every Slurm release the project builds for. */
extern char *slurm_xstrdup(const char *str);

static long baseline_kb = -1;

/* Linux 4.0+: writing 5 to clear_refs sets VmHWM to the current RSS. */
static int reset_peak(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	int ok = fd >= 0 && write(fd, "5", 1) == 1;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* NAME=20 MB in place of the job's NAME, which spank_setenv made. */
static int put_huge(spank_t sp, const char *name)
{
	size_t prefix = strlen(name) + 1;
	char **env = NULL, *entry;

	if (spank_setenv(sp, name, "a", 1) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env)
		return -1;
	while (*env && (strncmp(*env, name, prefix - 1) ||
			(*env)[prefix - 1] != '='))
		env++;
	entry = *env ? malloc(prefix + HUGE_LEN + 1) : NULL;
	if (!entry)
		return -1;
	memcpy(entry, *env, prefix);
	for (size_t i = 0; i + 1 < HUGE_LEN; i += 2)
		memcpy(entry + prefix + i, "a,", 2);
	entry[prefix + HUGE_LEN - 1] = 'a';
	entry[prefix + HUGE_LEN] = '\0';
	/* The short entry it replaces is left behind: a few bytes. */
	*env = slurm_xstrdup(entry);
	free(entry);
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	char name[64];

	(void)ac, (void)av;
	if (spank_context() != S_CTX_REMOTE ||
	    spank_getenv(sp, "DT_TEST_HUGE", name, sizeof(name)) !=
	    ESPANK_SUCCESS)
		return 0;
	if (put_huge(sp, name) < 0) {
		slurm_error("huge_env: could not make %s 20 MB long", name);
		return 0;
	}
	if (reset_peak() < 0) {
		slurm_error("huge_env: cannot reset the peak memory");
		return 0;
	}
	baseline_kb = peak_memory_kb();
	return 0;
}

int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
	(void)sp, (void)ac, (void)av;
	if (baseline_kb < 0)
		return 0;
	slurm_info("huge_env: slurmstepd's peak memory grew by %ld kB "
		   "after a 20 MB variable was set", peak_memory_kb() - baseline_kb);
	baseline_kb = -1;
	return 0;
}
