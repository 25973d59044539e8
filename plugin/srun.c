/*
 * srun (local context), sbatch and salloc (allocator context): everything
 * that can be checked before a job or step exists is checked here, so a
 * mistake ends the command with one message instead of failing tasks.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <slurm/slurm_version.h>

#include "plugin.h"
#include "../common/hostlist.h"

static int check_settings(void)
{
	struct plugin_state *st = plugin_state();
	const char *port;
	char err[640];

	st->step = st->site;
	if (st->option_seen && !st->site_ok) {
		dt_log_error("--dist-train is unavailable: plugstack.conf is "
			     "wrong (%s); ask your administrator to fix it",
			     st->site_error);
		return -1;
	}
	if (st->option_seen &&
	    dt_config_parse_option(&st->step, st->option_arg, err,
				   sizeof(err)) < 0) {
		dt_log_error("--dist-train=%s: %s", st->option_arg, err);
		return -1;
	}
	if (!st->step.enabled)
		return 0;
	/* srun exports --container before this point. */
	if (dt_config_check_container(&st->step, SLURM_VERSION_NUMBER,
				      getenv("SLURM_CONTAINER"), err,
				      sizeof(err)) < 0) {
		dt_log_error("%s", err);
		return -1;
	}

	/* The tasks inherit it; say so now rather than from every task. */
	port = getenv("MASTER_PORT");
	if (port && *port && !dt_is_port(port)) {
		dt_log_error("MASTER_PORT='%s' in your environment is not a "
			     "port number (1-65535): fix or unset it", port);
		return -1;
	}
	return 0;
}

/*
 * Slurm ignores a failing plugin that plugstack.conf marks optional, and
 * would run the step without its environment. Nothing is submitted yet:
 * leaving now is what srun, sbatch and salloc do themselves for a
 * required plugin, so both modes refuse alike.
 */
int srun_post_opt(spank_t sp)
{
	/* srun calls this once per component of a heterogeneous step. */
	static unsigned int srun_components;
	double start = plugin_clock_ms();

	(void)sp;
	if (check_settings() < 0)
		exit(1);
	if (spank_context() == S_CTX_LOCAL && ++srun_components > 1 &&
	    plugin_state()->step.enabled) {
		/*
		 * Each component is launched as a step of its own, with its
		 * own ranks and nodes: no one world. sbatch and salloc are
		 * not refused: a single-component srun inside their
		 * heterogeneous jobs is fine.
		 */
		dt_log_error("a heterogeneous step (srun A : B, or "
			     "--het-group naming several components) cannot "
			     "be one --dist-train world: run it as one srun, "
			     "or its parts as separate sruns");
		exit(1);
	}
	plugin_state()->srun_ms += plugin_clock_ms() - start;
	return 0;
}

/*
 * A fresh secret for this step, which only its tasks will know: Slurm's
 * launch carries srun's environment to them, and the plugin takes it out
 * of each task's environment again before the program runs (task.c). The
 * ranks prove with it that they belong to the step (common/rendezvous.h).
 */
static int make_step_secret(void)
{
	uint8_t secret[DT_SECRET_LEN];
	char hex[DT_SECRET_HEX + 1];
	size_t got = 0;
	int rc;

	while (got < sizeof(secret)) {
		ssize_t n = getrandom(secret + got, sizeof(secret) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			dt_log_error("cannot make the step's secret: no random "
				     "numbers (%s); rerun srun, and ask your "
				     "administrator to check getrandom on this "
				     "host if it recurs", strerror(errno));
			return -1;
		}
		got += (size_t)n;
	}
	dt_secret_format(secret, hex);
	rc = setenv(DT_SECRET_ENV, hex, 1);
	explicit_bzero(secret, sizeof(secret));
	explicit_bzero(hex, sizeof(hex));
	if (rc < 0) {
		dt_log_error("cannot pass the step's secret (%s): rerun srun, "
			     "and report it to your administrator if it "
			     "recurs", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * With -m arbitrary, task 0 runs on the first host of SLURM_HOSTFILE, a
 * file only srun reads: pass that name to the tasks, which check it
 * against what their node knows before they believe it (task.c). A value
 * from the user's own environment never gets through.
 */
static void pass_rank0_host(void)
{
	const char *path = getenv("SLURM_HOSTFILE");
	char head[4096], host[256];
	size_t got = 0;
	int fd;

	unsetenv(DT_RANK0_HOST_ENV);
	if (!path || !*path)
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return;		/* srun says what is wrong with it */
	while (got < sizeof(head)) {
		ssize_t n = read(fd, head + got, sizeof(head) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (dt_hostfile_first_host(head, got, host, sizeof(host)) == 0)
		setenv(DT_RANK0_HOST_ENV, host, 1);
}

/*
 * srun, once the step exists but before it is launched: what depends on
 * the step's size, and its secret. (sbatch and salloc do not get here.)
 */
int srun_local_user_init(spank_t sp)
{
	struct plugin_state *st = plugin_state();
	uint32_t nodes, tasks;
	char err[640];
	double start = plugin_clock_ms();
	int rc = -1;

	if (!st->step.enabled)
		return 0;
	if (make_step_secret() < 0)
		return -1;
	pass_rank0_host();
	if (spank_get_item(sp, S_JOB_NNODES, &nodes) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &tasks) !=
	    ESPANK_SUCCESS)
		rc = 0;	/* the nodes will say what is wrong */
	else if (dt_config_check_step(&st->step, nodes, tasks, err,
				      sizeof(err)) < 0)
		dt_log_error("%s", err);
	else
		rc = 0;
	if (rc == 0)
		watch_start(sp, &st->step);
	st->srun_ms += plugin_clock_ms() - start;
	if (rc == 0 && st->step.verbose)
		/* message: not a problem (verbose's timing) */
		dt_log_info("took %.2f ms in srun", st->srun_ms);
	return rc;
}
