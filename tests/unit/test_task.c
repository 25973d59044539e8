/*
 * plugin/task.c, the task context, against a mock of slurmstepd's SPANK
 * calls whose spank_setenv moves the environment array on every call, as
 * Slurm is free to do (24.11 does: a task once read the old, freed array
 * and died in strncmp). The old arrays are kept, their entries replaced,
 * so that a stale read shows in every build, not only under a sanitizer.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"

/* A task that fails ends itself: here it comes back to the test. */
static jmp_buf task_ended;
static int task_exit_code;

static void mock_task_exit(int code)
{
	task_exit_code = code;
	longjmp(task_ended, 1);
}
#define _exit(code) mock_task_exit(code)

#include "../../plugin/task.c"
#include "../../plugin/step_env.c"
#include "../../common/binding.h"
#include "../../common/store_port.h"

/* ---- the mock slurmstepd ---------------------------------------------- */

#define MAX_ENV 128
#define MAX_MOVES 128

static char *task_env[MAX_ENV + 1];
static char **current_env;
static char **moved_away[MAX_MOVES];
static unsigned moves;
static char *made[MAX_ENV];	/* what spank_setenv allocated */
static size_t nmade;
static char stale_entry[] = "STALE=this array was moved by spank_setenv";

static struct plugin_state mock_state;
static uint32_t mock_rank;
static int mock_local_rank;

struct plugin_state *plugin_state(void)
{
	return &mock_state;
}

/* What the helper was handed, for the tests to see. */
static char helper_secret[DT_SECRET_HEX + 1];
static char helper_env_secret[DT_SECRET_HEX + 1];

int helper_bootstrap(const struct dt_config *cfg, char *const envp[],
		     const char *secret, const char *rank0_host,
		     bool rank0_port_only, struct dt_env *out, int *store_fd,
		     char *err, size_t errlen)
{
	const char *in_env = dt_envp_get((char **)envp, DT_SECRET_ENV);

	(void)cfg, (void)rank0_host, (void)rank0_port_only, (void)out;
	(void)store_fd;
	snprintf(helper_secret, sizeof(helper_secret), "%.*s", DT_SECRET_HEX,
		 secret ? secret : "");
	snprintf(helper_env_secret, sizeof(helper_env_secret), "%s",
		 in_env ? in_env : "");
	snprintf(err, errlen, "the helper is not part of this test");
	return -1;
}

/* A lean PMIx step's tasks (plugin/member.c, plugin/leader.c) are tested
 * on the cluster (tests/integration/pmix.sh): these tasks never are. */
bool lean_without_helper(const struct plugin_state *st, char **envp,
			 const char *secret)
{
	(void)st, (void)envp, (void)secret;
	return false;
}

int member_task_env(const struct plugin_state *st, char **envp,
		    uint32_t rank, int local_rank, const char *secret,
		    const char *step_id, struct dt_env *env, bool *quiet,
		    char *err, size_t errlen)
{
	(void)st, (void)envp, (void)rank, (void)local_rank, (void)secret;
	(void)step_id, (void)env, (void)quiet;
	snprintf(err, errlen, "a member is not part of this test");
	return -1;
}

int leader_task_env(const struct plugin_state *st, char **envp,
		    uint32_t rank, const char *secret, const char *step_id,
		    struct dt_env *env, int *store_fd, bool *use_helper,
		    bool *quiet, char *err, size_t errlen)
{
	(void)st, (void)envp, (void)rank, (void)secret, (void)step_id;
	(void)env, (void)store_fd, (void)use_helper, (void)quiet;
	snprintf(err, errlen, "a leader is not part of this test");
	return -1;
}

/* Rank 0's hold on the store's port binds a socket: tested on the
 * cluster (tests/integration/hostile.sh). Here: which port it was given. */
static uint16_t held_port;

int store_hold(spank_t sp, int store_fd, bool hook, const char *worker_lib,
	       char **envp, struct dt_env *env, char *err, size_t errlen)
{
	(void)sp, (void)hook, (void)worker_lib, (void)envp, (void)err;
	(void)errlen;
	CU_ASSERT_EQUAL(store_fd, -1);
	held_port = dt_store_port(env);
	return 0;
}

/* The stacks' file of the task's end: tested on the cluster
 * (tests/integration/failure.sh). */
int exit_stacks_task(spank_t sp, const struct plugin_state *st,
		     struct dt_env *env)
{
	(void)sp, (void)st, (void)env;
	return 0;
}

bool exit_stacks_named(const struct plugin_state *st)
{
	(void)st;
	return false;
}

int torchrun_task_env(const struct plugin_state *st, char **envp,
		      const char *step_id, struct dt_env *env, char *notes,
		      size_t notes_len, char *err, size_t errlen)
{
	(void)st, (void)envp, (void)step_id, (void)env, (void)notes;
	(void)notes_len;
	snprintf(err, errlen, "torchrun mode is not part of this test");
	return -1;
}

/* A copy of the environment in a new array; the old one is spoiled. */
static void move_env(void)
{
	size_t n = 0;
	char **fresh;

	while (current_env[n])
		n++;
	fresh = calloc(MAX_ENV + 1, sizeof(*fresh));
	CU_ASSERT_FATAL(fresh != NULL && moves < MAX_MOVES);
	memcpy(fresh, current_env, n * sizeof(*fresh));
	for (size_t i = 0; i < n; i++)
		current_env[i] = stale_entry;
	if (current_env != task_env)
		moved_away[moves++] = current_env;
	current_env = fresh;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	va_list ap;
	spank_err_t rc = ESPANK_SUCCESS;

	(void)sp;
	va_start(ap, item);
	switch (item) {
	case S_TASK_GLOBAL_ID:
		*va_arg(ap, uint32_t *) = mock_rank;
		break;
	case S_TASK_ID:
		*va_arg(ap, int *) = mock_local_rank;
		break;
	case S_JOB_ENV:
		*va_arg(ap, char ***) = current_env;
		break;
	default:
		rc = ESPANK_BAD_ARG;
	}
	va_end(ap);
	return rc;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val,
			 int overwrite)
{
	size_t n = 0;

	(void)sp, (void)overwrite;
	move_env();
	/* Replace a variable in place, as Slurm does, or append it. */
	for (; current_env[n]; n++)
		if (!strncmp(current_env[n], var, strlen(var)) &&
		    current_env[n][strlen(var)] == '=')
			break;
	CU_ASSERT_FATAL(n < MAX_ENV);
	CU_ASSERT_FATAL(asprintf(&current_env[n], "%s=%s", var, val) > 0);
	CU_ASSERT_FATAL(nmade < MAX_ENV);
	made[nmade++] = current_env[n];
	return ESPANK_SUCCESS;
}

spank_err_t spank_unsetenv(spank_t sp, const char *var)
{
	size_t n = 0, len = strlen(var);

	(void)sp;
	move_env();
	for (; current_env[n]; n++)
		if (!strncmp(current_env[n], var, len) &&
		    current_env[n][len] == '=')
			break;
	for (; current_env[n]; n++)
		current_env[n] = current_env[n + 1];
	return ESPANK_SUCCESS;
}

const char *spank_strerror(spank_err_t err)
{
	(void)err;
	return "mock error";
}

/* ---- the tests -------------------------------------------------------- */

static void setup_task(void)
{
	static char *const base[] = {
		"SLURMD_NODENAME=n7", "SLURM_PROCID=0", "SLURM_LOCALID=0",
		"PATH=/usr/bin:/bin", NULL,
	};

	memset(task_env, 0, sizeof(task_env));
	memcpy(task_env, base, sizeof(base));
	current_env = task_env;
	moves = 0;
	nmade = 0;

	mock_rank = 0;
	mock_local_rank = 0;
	memset(&mock_state, 0, sizeof(mock_state));
	dt_config_init(&mock_state.step);
	mock_state.step.enabled = true;
	mock_state.step.verbose = true;
	mock_state.step.use_pmix = false;
	mock_state.step.bind = DT_BIND_OFF;
	mock_state.node_active = true;
	mock_state.job_id = 42;
	mock_state.step_id = 0;
	mock_state.layout.source = DT_RANKS_FROM_SLURM;
	mock_state.layout.num_nodes = 1;
	mock_state.layout.world_size = 1;
	mock_state.layout.local_size = 1;
	mock_state.layout.max_local_size = 1;
	mock_state.layout.master_addr = "n7";
	mock_state.layout.nodes = "n7";
	mock_state.ports.count = 2;
	mock_state.ports.port[0] = 20001;
	mock_state.ports.port[1] = 20002;
}

static void teardown_task(void)
{
	dt_node_env_free(&mock_state.node_env);
	dt_env_free(&mock_state.node_reads.seen);
	for (unsigned i = 0; i < moves; i++)
		free(moved_away[i]);
	for (size_t i = 0; i < nmade; i++)
		free(made[i]);
	if (current_env != task_env)
		free(current_env);
}

/*
 * Run task_init with its stderr captured into OUT. Returns 0, or -1 when
 * the task ended itself, which it must do with exit code 1 whenever it
 * fails (plugstack.conf may mark the plugin optional).
 */
static int run_task_init(char *out, size_t len)
{
	FILE *capture = tmpfile();
	volatile int rc;
	int saved;
	size_t n;

	CU_ASSERT_FATAL(capture != NULL);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	CU_ASSERT_FATAL(saved >= 0);
	dup2(fileno(capture), STDERR_FILENO);
	task_exit_code = -1;
	if (setjmp(task_ended) == 0) {
		rc = task_init(NULL);
		CU_ASSERT_EQUAL(rc, 0);	/* a failure never returns */
	} else {
		rc = -1;
		CU_ASSERT_EQUAL(task_exit_code, 1);
	}
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(capture);
	n = fread(out, 1, len - 1, capture);
	out[n] = '\0';
	fclose(capture);
	return rc;
}

static const char *env_value(const char *name)
{
	return dt_envp_get(current_env, name);
}

static void test_environment_set(void)
{
	char out[8192];

	setup_task();
	held_port = 0;
	CU_ASSERT_EQUAL(run_task_init(out, sizeof(out)), 0);
	CU_ASSERT(moves > 1);
	CU_ASSERT_STRING_EQUAL(env_value("RANK"), "0");
	CU_ASSERT_STRING_EQUAL(env_value("WORLD_SIZE"), "1");
	CU_ASSERT_STRING_EQUAL(env_value("MASTER_ADDR"), "n7");
	CU_ASSERT_STRING_EQUAL(env_value("MASTER_PORT"), "20001");
	/* Rank 0, without a barrier, takes its store's port itself. */
	CU_ASSERT_EQUAL(held_port, 20001);
	teardown_task();
}

#define SECRET "00112233445566778899aabbccddeeff" \
	       "00112233445566778899aabbccddeeff"

#define OTHER_SECRET "ffeeddccbbaa99887766554433221100" \
		     "ffeeddccbbaa99887766554433221100"

/* The step's secret leaves the step's environment once a node, before
 * any task, with what else srun handed the plugin (step_env.c); each task
 * has it from slurmstepd, and the helper gets it on its own. */
static void test_secret_taken_out(void)
{
	char out[8192];

	/* One the user exported for dist-train exec goes too; srun's wins. */
	setup_task();
	task_env[4] = DT_USER_SECRET_ENV "=" OTHER_SECRET;
	task_env[5] = DT_SECRET_ENV "=" SECRET;
	task_env[6] = DT_WATCH_PORT_ENV "=40000";
	task_env[7] = DT_RANK0_HOST_ENV "=n3";
	take_srun_env(NULL, &mock_state);
	CU_ASSERT_STRING_EQUAL(mock_state.secret_hex, SECRET);
	CU_ASSERT_STRING_EQUAL(mock_state.rank0_host, "n3");
	CU_ASSERT_PTR_NULL(env_value(DT_SECRET_ENV));
	CU_ASSERT_PTR_NULL(env_value(DT_USER_SECRET_ENV));
	CU_ASSERT_PTR_NULL(env_value(DT_WATCH_PORT_ENV));
	CU_ASSERT_PTR_NULL(env_value(DT_RANK0_HOST_ENV));
	mock_state.step.check = true;	/* the helper runs, and fails */
	CU_ASSERT_EQUAL(run_task_init(out, sizeof(out)), -1);
	CU_ASSERT_STRING_EQUAL(helper_secret, SECRET);
	CU_ASSERT_STRING_EQUAL(helper_env_secret, "");
	teardown_task();

	setup_task();
	task_env[4] = DT_USER_SECRET_ENV "=" OTHER_SECRET;
	take_srun_env(NULL, &mock_state);
	CU_ASSERT_STRING_EQUAL(mock_state.secret_hex, OTHER_SECRET);
	CU_ASSERT_PTR_NULL(env_value(DT_USER_SECRET_ENV));
	teardown_task();

	/* Not a secret: none is kept. */
	setup_task();
	task_env[4] = DT_SECRET_ENV "=00112233";
	take_srun_env(NULL, &mock_state);
	CU_ASSERT_STRING_EQUAL(mock_state.secret_hex, "");
	CU_ASSERT_PTR_NULL(env_value(DT_SECRET_ENV));
	teardown_task();

	/* A node that does not give the step the environment, where srun
	 * did (plugstack.conf differs): each task takes srun's out, and
	 * sets nothing. */
	setup_task();
	task_env[4] = DT_SECRET_ENV "=" SECRET;
	task_env[5] = DT_USER_SECRET_ENV "=" OTHER_SECRET;
	mock_state.node_active = false;
	CU_ASSERT_EQUAL(run_task_init(out, sizeof(out)), 0);
	CU_ASSERT_PTR_NULL(env_value(DT_SECRET_ENV));
	CU_ASSERT_STRING_EQUAL(env_value(DT_USER_SECRET_ENV), OTHER_SECRET);
	CU_ASSERT_PTR_NULL(env_value("RANK"));
	teardown_task();

	/* A node that failed before any task: the task fails. */
	setup_task();
	snprintf(mock_state.node_error, sizeof(mock_state.node_error), "x");
	CU_ASSERT_EQUAL(run_task_init(out, sizeof(out)), -1);
	teardown_task();
}

/*
 * Where the node set its part (slurmstepd.c), a task whose environment
 * would make the same sets only its own: its ranks. One whose inputs
 * differ, or where the node's values were changed since, works it all
 * out, and ends with the same environment as the node's part would have
 * given it.
 */
static void test_own_part(void)
{
	struct dt_env first = { 0 };
	char out[8192], err[256];
	unsigned before;

	for (int changed = 0; changed < 4; changed++) {
		setup_task();
		/* Something every task takes out: each does it itself. */
		if (changed == 3)
			task_env[4] = "TORCHELASTIC_USE_AGENT_STORE=True";
		mock_state.step.verbose = false;
		mock_state.layout.world_size = 2;
		mock_state.layout.local_size = 2;
		mock_state.local_tasks = 2;
		mock_rank = 1;
		mock_local_rank = 1;
		/* The node's part, made as user_init makes it. */
		mock_state.node_reads.getenv = dt_envp_getenv;
		mock_state.node_reads.arg = task_env;
		CU_ASSERT_FATAL(task_train_env(&mock_state, 0, 0, "42.0",
					       dt_env_reads_getenv,
					       &mock_state.node_reads, &first,
					       err, sizeof(err)) == 0);
		CU_ASSERT_FATAL(dt_node_env_from(&first, dt_envp_getenv,
						 task_env,
						 &mock_state.node_env) == 0);
		for (size_t i = 0; i < mock_state.node_env.set.count; i++)
			spank_setenv(NULL, mock_state.node_env.set.entries[i].name,
				     mock_state.node_env.set.entries[i].value, 1);
		dt_env_free(&first);
		if (changed == 1)	/* a value the node read, now other */
			spank_setenv(NULL, "OMP_NUM_THREADS", "3", 1);
		if (changed == 2)	/* a value the node set, now other */
			spank_setenv(NULL, "MASTER_ADDR", "n8", 1);
		before = moves;
		CU_ASSERT_EQUAL(run_task_init(out, sizeof(out)), 0);
		CU_ASSERT_STRING_EQUAL(env_value("RANK"), "1");
		CU_ASSERT_STRING_EQUAL(env_value("LOCAL_RANK"), "1");
		CU_ASSERT_STRING_EQUAL(env_value("ROLE_RANK"), "1");
		CU_ASSERT_STRING_EQUAL(env_value("WORLD_SIZE"), "2");
		CU_ASSERT_STRING_EQUAL(env_value("MASTER_PORT"), "20001");
		if (changed == 0) {
			/* Its three, and nothing else. */
			CU_ASSERT_EQUAL(moves - before, 3);
			CU_ASSERT_STRING_EQUAL(env_value("OMP_NUM_THREADS"),
					       "1");
		} else if (changed == 1) {
			CU_ASSERT_STRING_EQUAL(env_value("OMP_NUM_THREADS"),
					       "3");
		} else if (changed == 3) {
			CU_ASSERT_PTR_NULL(
				env_value("TORCHELASTIC_USE_AGENT_STORE"));
		} else {
			CU_ASSERT_STRING_EQUAL(env_value("MASTER_ADDR"), "n8");
			CU_ASSERT_STRING_EQUAL(
				env_value("JAX_COORDINATOR_ADDRESS"),
				"n8:20001");
		}
		teardown_task();
	}
}

/* The verbose line names the node: read from the array as it is now. */
static void test_verbose_reads_the_moved_environment(void)
{
	char out[8192];

	setup_task();
	CU_ASSERT_EQUAL(run_task_init(out, sizeof(out)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "dist-train: rank 0 on n7: "));
	if (!strstr(out, "rank 0 on n7: "))
		fprintf(stderr, "task_init said: %s\n", out);
	teardown_task();
}

/* The Python hook beside the worker library goes first on PYTHONPATH. */
static void test_python_hook_first_on_pythonpath(void)
{
	char dir[] = "/tmp/dt-test-task-XXXXXX", path[256], out[8192];
	char expected[512];
	FILE *f;

	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/python", dir);
	CU_ASSERT_FATAL(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/python/sitecustomize.py", dir);
	f = fopen(path, "w");
	CU_ASSERT_FATAL(f != NULL);
	fclose(f);

	setup_task();
	snprintf(mock_state.step.worker_lib, sizeof(mock_state.step.worker_lib),
		 "%s/dist_train_worker.so", dir);
	task_env[4] = "PYTHONPATH=/home/me/lib";
	CU_ASSERT_EQUAL(run_task_init(out, sizeof(out)), 0);
	snprintf(expected, sizeof(expected), "%s/python:/home/me/lib", dir);
	CU_ASSERT_STRING_EQUAL(env_value("PYTHONPATH"), expected);
	task_env[4] = NULL;
	teardown_task();

	/* Without the file, PYTHONPATH is left alone. */
	unlink(path);
	setup_task();
	snprintf(mock_state.step.worker_lib, sizeof(mock_state.step.worker_lib),
		 "%s/dist_train_worker.so", dir);
	CU_ASSERT_EQUAL(run_task_init(out, sizeof(out)), 0);
	CU_ASSERT_PTR_NULL(env_value("PYTHONPATH"));
	teardown_task();
	snprintf(path, sizeof(path), "%s/python", dir);
	rmdir(path);
	rmdir(dir);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_environment_set),
	UNIT_TEST(test_secret_taken_out),
	UNIT_TEST(test_own_part),
	UNIT_TEST(test_verbose_reads_the_moved_environment),
	UNIT_TEST(test_python_hook_first_on_pythonpath),
};

UNIT_MAIN("task", tests)
