/*
 * srun, after the start: hears from each node's slurmstepd how its tasks
 * ended (report.c, common/exit_record.h), names the task that failed
 * first, stops the step when one fails (fail-fast), and writes the
 * step's record when it failed (common/exit_tally.h).
 *
 * srun is the one place that sees the whole step. The records come on a
 * TCP port of srun's host, which its tasks learn from the launch's
 * environment, and count only when signed with the step's secret: anyone
 * may connect, so each connection gets a short deadline and one line.
 */
#include "config.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "plugin.h"
#include "../common/exit_tally.h"
#include "../common/fd_io.h"
#include "../common/rank_evidence.h"
#include "../common/saved_files.h"
#include "../common/stack_report.h"
#include "../common/hostlist.h"
#include "../common/net.h"
#include "../common/store_guard.h"

/* How long one connection may take to send its record. */
#define RECORD_WAIT_MS 500

static struct {
	bool running;
	int listen_fd;
	int wake[2];		/* written by watch_finish: stop */
	pthread_t thread;
	/* Only the thread changes it, until watch_finish joins it. */
	struct dt_exit_tally tally;
	uint8_t key[DT_SECRET_LEN];
	uint32_t job_id, step_id;
	char step_text[32];	/* "JOB.STEP" */
	bool cause_said;
	char record_dir[DT_HELPER_PATH_MAX];
	bool record_off;
	unsigned long long kill_at;	/* SIGKILL then; 0: not to be sent */
} watch = { .listen_fd = -1, .wake = { -1, -1 } };

/*
 * How long fail-fast's SIGTERM gives the ranks before SIGKILL: enough for
 * the Python hook to write each rank's stacks (a few ms) and for a
 * program's own SIGTERM handler to finish a short checkpoint, while the
 * step still ends within seconds of the failure. (Slurm's KillWait, 30 s
 * by default, is for jobs it ends itself.)
 */
#define STOP_GRACE_MS 5000

/*
 * Send SIG to every task of the step, on every node, through slurmctld
 * (the user may stop their own steps): SIGTERM first, SIGKILL after
 * STOP_GRACE_MS. srun then ends as for any killed step. The function is
 * looked up rather than linked: the plugin also loads where Slurm's API
 * is not wanted.
 */
static void stop_step(int sig)
{
	__typeof__(slurm_kill_job_step) *kill_step;
	int rc;

	*(void **)&kill_step = dlsym(RTLD_DEFAULT, "slurm_kill_job_step");
	if (!kill_step) {
		/* Said once, at SIGTERM: SIGKILL's try would repeat it. */
		if (sig == SIGKILL)
			return;
		dt_log_error("cannot stop the step: this srun has no "
			     "slurm_kill_job_step; run scancel %s, and ask "
			     "your administrator to rebuild dist-train for "
			     "this Slurm", watch.step_text);
		return;
	}
#if defined(DT_KILL_STEP_BY_STEP_ID)
	{
		slurm_step_id_t id = { .job_id = watch.job_id,
				       .step_id = watch.step_id,
				       .step_het_comp = NO_VAL };

		rc = kill_step(&id, sig, 0);
	}
#elif defined(DT_KILL_STEP_WITH_FLAGS)
	rc = kill_step(watch.job_id, watch.step_id, sig, 0);
#else
	rc = kill_step(watch.job_id, watch.step_id, sig);
#endif
	/* SIGKILL follows SIGTERM: a step that has ended by then is what
	 * SIGTERM was for. */
	if (rc != 0 && sig != SIGKILL) {
		int err = errno;
		const char *(*describe)(int);

		*(void **)&describe = dlsym(RTLD_DEFAULT, "slurm_strerror");
		dt_log_error("cannot stop step %s (%s): run scancel %s",
			     watch.step_text,
			     describe ? describe(err) : strerror(err),
			     watch.step_text);
	}
}

/*
 * Whether Slurm itself is ending the job (time limit, preemption, scancel
 * of the job, a requeue), so that its tasks' ends are no task's failure:
 * slurmctld marks the job before it has its tasks signalled. A step
 * cancelled alone (scancel JOB.STEP) leaves the job running: not seen.
 */
static bool stopped_by_slurm(const char **by, const char **ended)
{
	__typeof__(slurm_load_job) *load;
	__typeof__(slurm_free_job_info_msg) *release;
	job_info_msg_t *msg = NULL;
	uint32_t state;
	int rc;

	*(void **)&load = dlsym(RTLD_DEFAULT, "slurm_load_job");
	*(void **)&release = dlsym(RTLD_DEFAULT, "slurm_free_job_info_msg");
	if (!load || !release)
		return false;
#if defined(DT_LOAD_JOB_BY_STEP_ID)
	{
		slurm_step_id_t id = { .job_id = watch.job_id,
				       .step_id = NO_VAL,
				       .step_het_comp = NO_VAL };

		rc = load(&msg, id, SHOW_ALL);
	}
#else
	rc = load(&msg, watch.job_id, SHOW_ALL);
#endif
	if (rc != 0 || !msg || msg->record_count < 1) {
		if (msg)
			release(msg);
		return false;
	}
	state = msg->job_array[0].job_state;
	release(msg);
	*by = NULL;
	switch (state & JOB_STATE_BASE) {
	case JOB_TIMEOUT:
		*by = "its time limit", *ended = "timeout";
		break;
	case JOB_PREEMPTED:
		*by = "preemption", *ended = "preempted";
		break;
	case JOB_CANCELLED:
		*by = "scancel", *ended = "cancelled";
		break;
	case JOB_DEADLINE:
		*by = "its deadline", *ended = "deadline";
		break;
	case JOB_NODE_FAIL:
		*by = "a node failure", *ended = "node_fail";
		break;
	case JOB_PENDING:
		*by = "a requeue (preemption, or scontrol requeue)";
		*ended = "requeued";
		break;
	}
	if (!*by && (state & JOB_REQUEUE))
		*by = "a requeue (preemption, or scontrol requeue)",
		*ended = "requeued";
	return *by != NULL;
}

/* The most nodes asked about after a node failure, one call each, and
 * how long srun may spend asking: slurmctld may be slow to answer, and
 * each call may wait for Slurm's MessageTimeout. */
#define LOST_NODES_ASKED 64
#define LOST_NODES_MS 5000

/* Shared by srun's thread and the one that asks; freed by the last. */
struct lost_search {
	__typeof__(slurm_load_node_single) *load;
	__typeof__(slurm_free_node_info_msg) *release;
	struct dt_hostlist *nodes;
	char (*heard)[DT_EXIT_NODE_MAX];	/* nodes whose tasks reported */
	size_t nheard;
	char list[DT_LOST_NODES_MAX];
	size_t used;
	unsigned asked;
	unsigned long long deadline;	/* now_ms() */
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	bool done, abandoned;
};

/* Whether some task of NAME reported its end: then it was not lost. */
static bool heard_from(const struct lost_search *s, const char *name)
{
	for (size_t i = 0; i < s->nheard; i++)
		if (!strcmp(s->heard[i], name))
			return true;
	return false;
}

/* dt_hostlist_fn: NAME into the list if Slurm has it down or not
 * responding. */
static int ask_node(const char *name, size_t len, void *arg)
{
	struct lost_search *s = arg;
	node_info_msg_t *msg = NULL;
	char node[128];
	bool lost = false;

	if (s->asked >= LOST_NODES_ASKED || now_ms() >= s->deadline)
		return 1;
	if (len >= sizeof(node))
		return 0;
	memcpy(node, name, len);
	node[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)node[i]) && !strchr("._-", node[i]))
			return 0;
	if (heard_from(s, node))
		return 0;
	s->asked++;
	if (s->load(&msg, node, SHOW_ALL) == 0 && msg &&
	    msg->record_count > 0) {
		uint32_t state = msg->node_array[0].node_state;

		lost = (state & NODE_STATE_BASE) == NODE_STATE_DOWN ||
		       (state & NODE_STATE_NO_RESPOND);
	}
	if (msg)
		s->release(msg);
	if (lost && s->used < sizeof(s->list)) {
		int k = snprintf(s->list + s->used, sizeof(s->list) - s->used,
				 "%s%s", s->used ? "," : "", node);

		s->used = k < 0 ? sizeof(s->list) : s->used + (size_t)k;
	}
	return 0;
}

static void free_search(struct lost_search *s)
{
	dt_hostlist_free(s->nodes);
	free(s->heard);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->done_cond);
	free(s);
}

/* The asking thread: it may block in Slurm's calls past srun's wait,
 * which then goes on without it. */
static void *search_lost(void *arg)
{
	struct lost_search *s = arg;
	bool abandoned;

	dt_hostlist_foreach(s->nodes, ask_node, s);
	pthread_mutex_lock(&s->lock);
	s->done = true;
	abandoned = s->abandoned;
	pthread_cond_signal(&s->done_cond);
	pthread_mutex_unlock(&s->lock);
	if (abandoned)
		free_search(s);
	return NULL;
}

/*
 * After a node failure: which of the allocation's nodes, none of whose
 * tasks reported an end, Slurm now has down or not responding; their
 * tasks' records never come, as slurmstepd went with the node. The
 * allocation's list is srun's, as it was at the start: slurmctld takes
 * a failed node out of the job's own. At most LOST_NODES_MS in all,
 * however long each of Slurm's calls waits.
 */
static void find_lost_nodes(void)
{
	const char *allocation = getenv("SLURM_JOB_NODELIST");
	struct lost_search *s = calloc(1, sizeof(*s));
	pthread_condattr_t attr;
	struct timespec until;
	pthread_t thread;
	char err[128];
	bool done;

	if (!allocation)
		allocation = getenv("SLURM_NODELIST");
	if (!s)
		return;
	*(void **)&s->load = dlsym(RTLD_DEFAULT, "slurm_load_node_single");
	*(void **)&s->release = dlsym(RTLD_DEFAULT,
				      "slurm_free_node_info_msg");
	s->heard = calloc(watch.tally.n_exited ? watch.tally.n_exited : 1,
			  sizeof(*s->heard));
	if (!allocation || !s->load || !s->release || !s->heard ||
	    dt_hostlist_parse_capped(allocation, 65536, &s->nodes, err,
				     sizeof(err)) != 0) {
		dt_hostlist_free(s->nodes);
		free(s->heard);
		free(s);
		return;
	}
	for (uint32_t i = 0; i < watch.tally.n_exited; i++)
		memcpy(s->heard[s->nheard++], watch.tally.exits[i].node,
		       sizeof(s->heard[0]));
	s->deadline = now_ms() + LOST_NODES_MS;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&s->done_cond, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&s->lock, NULL);
	if (pthread_create(&thread, NULL, search_lost, s) != 0) {
		free_search(s);
		return;
	}
	pthread_detach(thread);
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += LOST_NODES_MS / 1000;
	pthread_mutex_lock(&s->lock);
	while (!s->done &&
	       pthread_cond_timedwait(&s->done_cond, &s->lock, &until) == 0)
		;
	done = s->done;
	s->abandoned = !done;
	pthread_mutex_unlock(&s->lock);
	if (!done)
		return;		/* the thread frees it */
	if (s->used)
		dt_exit_tally_lost_nodes(&watch.tally, s->list);
	free_search(s);
}

/*
 * The cause, in one write(2), as srun's own error() would print it. srun's
 * log goes through a ring buffer that writes a line in two pieces where it
 * wraps, and the other tasks' output, which srun writes as it comes, could
 * land in between: both lines were then broken.
 */
static void say_cause(void)
{
	/* What srun's error() puts before a plugin's message. */
	static const char srun_error[] = "srun: error: " DT_NAME ": ";
	char cause[DT_BEHIND_MAX + 512], line[sizeof(cause) + 64];
	int len;

	if (dt_exit_cause(&watch.tally, cause, sizeof(cause)) <= 0)
		return;
	len = snprintf(line, sizeof(line), "%s%s\n", srun_error, cause);
	if (len <= 0 || (size_t)len >= sizeof(line) ||
	    !dt_write_all(STDERR_FILENO, line, (size_t)len))
		dt_log_error("%s", cause);
	watch.cause_said = true;
}

/*
 * Whether the first failed rank ended when its collective timed out, as
 * its stacks of its end say (saved beside the record before its node told
 * srun it ended, plugin/report.c): then it waited for the ranks behind,
 * and the cause says so. The user's own file only, bounded, and read only
 * for an exit code of 1, Python's for an uncaught exception.
 */
static void note_first_timeout(void)
{
	const char *dir = watch.record_dir[0] ? watch.record_dir : ".";
	char path[DT_HELPER_PATH_MAX + 96], name[DT_COLLECTIVE_NAME_MAX];
	int status = watch.tally.first.status;
	size_t len;
	char *text;

	if (watch.record_off || watch.tally.torchrun || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 1)
		return;
	snprintf(path, sizeof(path), "%s/dist-train-%s.stacks-rank-%u", dir,
		 watch.step_text, watch.tally.first.rank);
	text = dt_read_file_bounded(path, DT_STACKS_FILE_MAX, getuid(), &len);
	if (!text)
		return;
	if (dt_stack_timed_out(text, len, name, sizeof(name)) == 0)
		dt_exit_tally_first_timed_out(&watch.tally, name);
	free(text);
}

/*
 * One connection's record LINE, if it is one of this step's. The answer
 * lets its slurmstepd go on, and tell srun the task's end in Slurm's own
 * way: after this line, so that the cause comes first.
 */
static void hear_line(int fd, const char *line)
{
	struct dt_task_exit e;
	const char *by, *ended;
	bool had_first = watch.tally.have_first;
	int verdict;

	if (dt_exit_record_parse(watch.key, watch.step_text, line,
				 strlen(line), &e) < 0) {
		dt_log_debug("step %s: ignored a connection that sent no "
			     "record of this step", watch.step_text);
		return;
	}
	verdict = dt_exit_tally_add(&watch.tally, &e);
	/* The first failure: Slurm's doing, or the task's? */
	if (!had_first && watch.tally.have_first &&
	    stopped_by_slurm(&by, &ended)) {
		dt_exit_tally_stopped_by(&watch.tally, by, ended);
		verdict = 0;
	}
	/* A first failure that only waited in a timed-out collective is
	 * said as the step ends, with the ranks it waited for. */
	if (verdict == 1) {
		note_first_timeout();
		if (!watch.tally.first_timed_out[0])
			say_cause();
	}
	/* One short line into an empty socket buffer: never waits. */
	net_send_all(fd, "ok\n", 3, now_ms() + RECORD_WAIT_MS);
	if (verdict == 1) {
		stop_step(SIGTERM);
		watch.kill_at = now_ms() + STOP_GRACE_MS;
	}
}

/*
 * The connections being heard, all at once: one that sends nothing holds
 * only its slot, for RECORD_WAIT_MS, so that a flood of silent ones
 * cannot make a node's record wait past its own deadline.
 */
#define CONNS_MAX 256

struct conn {
	int fd;			/* -1: a free slot */
	unsigned long long deadline;
	size_t used;
	char line[DT_EXIT_RECORD_MAX + 1];
};

static struct conn conns[CONNS_MAX];

static void conn_close(struct conn *c)
{
	close(c->fd);
	c->fd = -1;
}

/* The connections waiting now (at most a slot's worth a round), each
 * into a slot; when all are taken, the one that has waited longest
 * goes. */
static void accept_waiting(void)
{
	for (size_t taken = 0; taken < CONNS_MAX; taken++) {
		struct conn *slot = NULL;
		int fd = accept4(watch.listen_fd, NULL, NULL,
				 SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0)
			return;
		for (size_t i = 0; i < CONNS_MAX; i++) {
			if (conns[i].fd < 0) {
				slot = &conns[i];
				break;
			}
			if (!slot || conns[i].deadline < slot->deadline)
				slot = &conns[i];
		}
		if (slot->fd >= 0)
			conn_close(slot);
		slot->fd = fd;
		slot->used = 0;
		slot->deadline = now_ms() + RECORD_WAIT_MS;
	}
}

/* What C has sent: its record once a whole line is in. */
static void read_conn(struct conn *c)
{
	char *nl;
	ssize_t n;

	n = read(c->fd, c->line + c->used, sizeof(c->line) - 1 - c->used);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	c->used += (size_t)n;
	c->line[c->used] = '\0';
	nl = memchr(c->line, '\n', c->used);
	if (!nl && c->used < sizeof(c->line) - 1)
		return;
	if (nl) {
		*nl = '\0';
		hear_line(c->fd, c->line);
	}
	conn_close(c);		/* one line each; a longer one is no record */
}

/* One round: wait up to WAIT_MS (-1: until something happens) for the
 * listening socket, the open connections, and (WITH_WAKE) the wake pipe;
 * true once woken. */
static bool hear_round(int wait_ms, bool with_wake)
{
	struct pollfd p[CONNS_MAX + 2];
	unsigned long long now = now_ms(), soonest = 0;
	size_t n = 2;
	int timeout = wait_ms;

	p[0] = (struct pollfd){ .fd = watch.listen_fd, .events = POLLIN };
	p[1] = (struct pollfd){ .fd = with_wake ? watch.wake[0] : -1,
				.events = POLLIN };
	for (size_t i = 0; i < CONNS_MAX; i++) {
		if (conns[i].fd < 0)
			continue;
		if (conns[i].deadline <= now) {
			conn_close(&conns[i]);
			continue;
		}
		if (!soonest || conns[i].deadline < soonest)
			soonest = conns[i].deadline;
		p[n++] = (struct pollfd){ .fd = conns[i].fd, .events = POLLIN };
	}
	if (soonest && (timeout < 0 || soonest - now < (unsigned)timeout))
		timeout = (int)(soonest - now);
	/* A poll that keeps failing would spin: it ends the watch, as the
	 * old loop did. */
	if (poll(p, n, timeout) < 0)
		return errno != EINTR;
	for (size_t i = 0, k = 2; i < CONNS_MAX && k < n; i++) {
		if (conns[i].fd != p[k].fd)
			continue;
		if (p[k].revents)
			read_conn(&conns[i]);
		k++;
	}
	if (p[0].revents & POLLIN)
		accept_waiting();
	return p[1].revents != 0;
}

static bool any_open(void)
{
	for (size_t i = 0; i < CONNS_MAX; i++)
		if (conns[i].fd >= 0)
			return true;
	return false;
}

static void *watch_loop(void *arg)
{
	unsigned long long until;
	sigset_t all;

	(void)arg;
	/* srun's own threads take its signals. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (size_t i = 0; i < CONNS_MAX; i++)
		conns[i].fd = -1;
	/* accept_waiting takes what waits, and never waits itself. */
	fcntl(watch.listen_fd, F_SETFL,
	      fcntl(watch.listen_fd, F_GETFL) | O_NONBLOCK);
	for (;;) {
		unsigned long long now = now_ms();

		if (watch.kill_at && now >= watch.kill_at) {
			watch.kill_at = 0;
			if (watch.tally.n_exited < watch.tally.tasks)
				stop_step(SIGKILL);
		}
		if (hear_round(watch.kill_at ? (int)(watch.kill_at - now) : -1,
			       true))
			break;
	}
	/* The last tasks' records may still be queued or on their way. */
	accept_waiting();
	until = now_ms() + RECORD_WAIT_MS;
	for (unsigned long long now = now_ms(); any_open() && now < until;
	     now = now_ms())
		hear_round((int)(until - now), false);
	for (size_t i = 0; i < CONNS_MAX; i++)
		if (conns[i].fd >= 0)
			conn_close(&conns[i]);
	return NULL;
}

/*
 * The step's record folder, as an absolute path, for the tasks: where the
 * Python hook has NCCL's flight recorder dump (helper/python).
 */
static void pass_record_dir(void)
{
	char *dir;

	unsetenv(DT_RECORD_DIR_ENV);
	if (watch.record_off)
		return;
	dir = realpath(watch.record_dir[0] ? watch.record_dir : ".", NULL);
	if (dir)
		setenv(DT_RECORD_DIR_ENV, dir, 1);
	free(dir);
}

int watch_start(spank_t sp, const struct dt_config *cfg)
{
	uint32_t nodes, tasks;
	struct sockaddr_storage addr;
	socklen_t len = sizeof(addr);
	const char *secret = getenv(DT_SECRET_ENV);
	char port[8];
	uint16_t p;

	if (spank_get_item(sp, S_JOB_ID, &watch.job_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &watch.step_id) !=
	    ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_NNODES, &nodes) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &tasks) !=
	    ESPANK_SUCCESS || !secret ||
	    dt_secret_parse(secret, watch.key) < 0)
		goto off;
	snprintf(watch.step_text, sizeof(watch.step_text), "%u.%u",
		 watch.job_id, watch.step_id);
	if (dt_exit_tally_init(&watch.tally, tasks, nodes,
			       cfg->max_nodes ? cfg->min_nodes : 0,
			       cfg->fail_fast, cfg->torchrun) < 0)
		goto off;
	watch.record_off = cfg->record_off;
	snprintf(watch.record_dir, sizeof(watch.record_dir), "%s",
		 cfg->record_dir);
	watch.listen_fd = net_listen(0);
	if (watch.listen_fd < 0 ||
	    getsockname(watch.listen_fd, (struct sockaddr *)&addr, &len) < 0)
		goto off;
	p = (uint16_t)dt_sockaddr_port((struct sockaddr *)&addr);
	if (pipe2(watch.wake, O_CLOEXEC) < 0)
		goto off;
	if (pthread_create(&watch.thread, NULL, watch_loop, NULL) != 0)
		goto off;
	watch.running = true;
	snprintf(port, sizeof(port), "%u", p);
	setenv(DT_WATCH_PORT_ENV, port, 1);
	pass_record_dir();
	return 0;
off:
	/* The step runs as before: without fail-fast or a record. */
	if (cfg->verbose)
		/* message: not a problem (verbose's note) */
		dt_log_info("srun does not watch this step's tasks: a failed "
			    "task will not stop the others");
	if (watch.listen_fd >= 0)
		close(watch.listen_fd);
	watch.listen_fd = -1;
	for (int i = 0; i < 2; i++)
		if (watch.wake[i] >= 0)
			close(watch.wake[i]);
	watch.wake[0] = watch.wake[1] = -1;
	dt_exit_tally_free(&watch.tally);
	unsetenv(DT_WATCH_PORT_ENV);
	unsetenv(DT_RECORD_DIR_ENV);
	return 0;
}

/* DIR/dist-train-JOB.STEP.json, as the user; its path, or "", and how
 * many files of the ranks it lists (*SAVED). */
static void write_record(char *path, size_t len, size_t *saved_count)
{
	const char *dir = watch.record_dir[0] ? watch.record_dir : ".";
	struct dt_saved_file *saved = NULL;
	size_t n_saved = 0;
	bool written;
	char *json;
	int fd;

	*saved_count = 0;
	/* The ranks' files, written before their nodes told srun they
	 * ended (plugin/report.c): none is missed by being late. */
	if (dt_saved_files(dir, watch.step_text, &saved, &n_saved) == 0) {
		watch.tally.saved = saved;
		watch.tally.n_saved = n_saved;
	}
	*saved_count = n_saved;
	json = dt_exit_tally_json(&watch.tally, watch.step_text);
	watch.tally.saved = NULL;
	watch.tally.n_saved = 0;
	dt_saved_files_free(saved, n_saved);
	path[0] = '\0';
	if (!json)
		return;
	snprintf(path, len, "%s/dist-train-%s.json", dir, watch.step_text);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		  0644);
	if (fd < 0) {
		dt_log_error("cannot write this step's record %s (%s): give "
			     "a folder you can write with "
			     "--dist-train=record=DIR", path, strerror(errno));
		path[0] = '\0';
		free(json);
		return;
	}
	written = dt_write_all(fd, json, strlen(json));
	if (close(fd) < 0 || !written) {
		dt_log_error("this step's record %s is incomplete (%s): give a "
			     "folder with room with --dist-train=record=DIR",
			     path, strerror(errno));
		path[0] = '\0';
	}
	free(json);
}

/* What srun reads of the ranks' saved files as it ends; past it, the
 * ranks behind are left to dist-train why. */
#define BEHIND_READ_MAX (64u << 20)

/*
 * The ranks that were behind, from their stacks and NCCL dumps beside the
 * record (common/rank_evidence.h): where the first failed rank's
 * collective timed out, in the cause (IN_CAUSE), which is said after;
 * otherwise a line of their own, where the rank srun named first may only
 * have been the first to give up waiting for them.
 */
static void find_behind(bool in_cause)
{
	const char *dir = watch.record_dir[0] ? watch.record_dir : ".";
	const struct dt_rank_evidence *first;
	const char *ranks, *were;
	struct dt_evidence ev;
	size_t *order = NULL, n;
	char list[256], words[DT_BEHIND_MAX];

	/* The user's own files: in a shared folder, another's file of
	 * the same name is not believed. */
	if (dt_evidence_read(&ev, dir, watch.step_text, watch.tally.tasks,
			     getuid(), BEHIND_READ_MAX) < 0 || ev.partial)
		goto out;
	order = calloc(ev.tasks + 1, sizeof(*order));
	if (!order)
		goto out;
	n = dt_evidence_behind(&ev, order);
	if (!n)
		goto out;
	dt_rank_ranges(order, n, list, sizeof(list));
	first = &ev.ranks[order[0]];
	ranks = n == 1 ? "rank" : "ranks";
	were = n == 1 ? "was" : "were";
	if (in_cause && first->collective && n == 1)
		snprintf(words, sizeof(words), "rank %s, which was behind: its "
			 "newest NCCL collective was %s, older than the "
			 "others'", list, first->collective);
	else if (in_cause && first->collective)
		snprintf(words, sizeof(words), "ranks %s, which were behind: "
			 "rank %zu's newest NCCL collective was %s, older than "
			 "the others'", list, order[0], first->collective);
	else if (in_cause && n == 1)
		snprintf(words, sizeof(words), "rank %s, which was behind: at "
			 "%s, not in the collective", list, first->where);
	else if (in_cause)
		snprintf(words, sizeof(words), "ranks %s, which were behind: "
			 "rank %zu at %s, not in the collective", list,
			 order[0], first->where);
	else if (first->collective)
		dt_log_info("%s %s %s behind: rank %zu's newest NCCL "
			    "collective was %s, older than the others'; see "
			    "each rank's with '" DT_NAME " why %s'", ranks,
			    list, were, order[0], first->collective,
			    watch.step_text);
	else
		dt_log_info("%s %s %s behind: rank %zu was at %s, not in the "
			    "collective the others waited in; see each rank's "
			    "stacks with '" DT_NAME " why %s'", ranks, list,
			    were, order[0], first->where, watch.step_text);
	if (in_cause)
		dt_exit_tally_behind(&watch.tally, words);
out:
	free(order);
	dt_evidence_free(&ev);
}

void watch_finish(void)
{
	char path[DT_HELPER_PATH_MAX + 64];

	if (!watch.running)
		return;
	watch.running = false;
	while (write(watch.wake[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(watch.thread, NULL);
	close(watch.listen_fd);
	close(watch.wake[0]);
	close(watch.wake[1]);
	watch.listen_fd = watch.wake[0] = watch.wake[1] = -1;
	if (watch.tally.have_first) {
		bool timed_out;

		if (watch.tally.ended && !strcmp(watch.tally.ended, "node_fail"))
			find_lost_nodes();
		if (!watch.cause_said) {
			if (!watch.tally.first_timed_out[0])
				note_first_timeout();
			timed_out = watch.tally.first_timed_out[0] != '\0';
			if (timed_out)
				find_behind(true);
			say_cause();
		} else {
			timed_out = false;
		}
		if (!watch.record_off) {
			size_t saved;

			write_record(path, sizeof(path), &saved);
			if (saved && !timed_out)
				find_behind(false);
			if (path[0] && saved)
				/* message: not a problem (where the record is) */
				dt_log_info("what happened to each task is in "
					    "%s; '" DT_NAME " why %s' shows "
					    "where each rank stood", path,
					    watch.step_text);
			else if (path[0])
				/* message: not a problem (where the record is) */
				dt_log_info("what happened to each task is in %s",
					    path);
		}
	}
	dt_exit_tally_free(&watch.tally);
	explicit_bzero(watch.key, sizeof(watch.key));
}
