/*
 * slurmstepd, as each task of a --dist-train step ends: how it ended, to
 * srun (watch.c), signed with the step's secret (common/exit_record.h).
 *
 * The address comes from the launch's environment, which the user
 * controls: the record is sent by a process that has become the user (the
 * node's reporter, exit_reporter.c, or a child of the task's own), and
 * every wait is bounded, so that a wrong or dead address costs slurmstepd
 * at most a second once per node, and nothing more.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin.h"
#include "../common/exit_record.h"
#include "../common/exit_tally.h"
#include "../common/fd_io.h"
#include "../common/net.h"

/* Sending one record and hearing srun's answer, at most. */
#define SEND_MS 1000
/* All a sender may take, stacks and record, before it is ended. */
#define REPORT_ALARM_S 3

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Whether S is an IPv4 or IPv6 address: a name would be looked up, and
 * a resolver can stall task_exit for its whole timeout. */
static bool numeric_host(const char *s)
{
	struct in6_addr a6;
	struct in_addr a4;

	return inet_pton(AF_INET, s, &a4) == 1 ||
	       inet_pton(AF_INET6, s, &a6) == 1;
}

void report_setup(spank_t sp, struct plugin_state *st, char **env)
{
	const char *port = dt_envp_get(env, DT_WATCH_PORT_ENV);
	/* The address srun's own messages come to, as Slurm gave it. */
	const char *host = dt_envp_get(env, "SLURM_SRUN_COMM_HOST");
	const char *secret = dt_envp_get(env, DT_SECRET_ENV);
	const char *record;

	st->report_on = false;
	st->started_ms = now_ms();
	if (!port || !host || !secret || !dt_is_port(port) ||
	    !numeric_host(host) || dt_secret_parse(secret, st->report_key) < 0 ||
	    spank_get_item(sp, S_JOB_UID, &st->job_uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &st->job_gid) != ESPANK_SUCCESS) {
		dt_log_debug("step %u.%u: srun does not watch it here (%s=%s, "
			     "SLURM_SRUN_COMM_HOST=%s, secret %s)",
			     st->job_id, st->step_id, DT_WATCH_PORT_ENV,
			     port ? port : "unset", host ? host : "unset",
			     secret ? "set" : "unset");
		return;
	}
	snprintf(st->report_host, sizeof(st->report_host), "%s", host);
	/* Where exit_stacks.c's files go: srun's absolute path, written
	 * by a child as the user; one too long for it is left out. */
	record = dt_envp_get(env, DT_RECORD_DIR_ENV);
	st->record_dir[0] = '\0';
	if (record && record[0] == '/' && strlen(record) < sizeof(st->record_dir))
		memcpy(st->record_dir, record, strlen(record) + 1);
	snprintf(st->report_port, sizeof(st->report_port), "%s", port);
	plugin_node_name(env, st->report_node, sizeof(st->report_node));
	st->report_on = true;
}

/* The "oom_kill N" count of a cgroup's memory events file, or -1 where
 * there is no such file. */
static long oom_kills(const char *path)
{
	char buf[4096], *p;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strstr(buf, "oom_kill ");
	if (!p || (p != buf && p[-1] != '\n'))
		return 0;
	return strtol(p + strlen("oom_kill "), NULL, 10);
}

/* The task's own count where Slurm gave it a cgroup, else its step's. */
static bool counted(const char *task_path, const char *step_path)
{
	long n = oom_kills(task_path);

	return n > 0 || (n < 0 && oom_kills(step_path) > 0);
}

/*
 * Whether the out-of-memory killer ended the task, as its memory cgroup
 * counts: where Slurm confines memory (task/cgroup), on cgroup v2 or v1.
 * Only Slurm's own cgroups of the step are read (a path with job_ and
 * step_), never one that other processes share.
 */
static bool killed_for_memory(uint32_t local_id)
{
	char self[4096], task[4400], step[4400], *line, *save = NULL, *cut;
	ssize_t n;
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, self, sizeof(self) - 1);
	close(fd);
	if (n <= 0)
		return false;
	self[n] = '\0';
	for (line = strtok_r(self, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *rel;

		if (!strstr(line, "/job_") || !strstr(line, "/step_"))
			continue;
		if (!strncmp(line, "0::/", 4)) {
			/* v2: slurmstepd in STEP/slurm, tasks in
			 * STEP/user/task_N. */
			rel = line + 3;
			cut = strrchr(line, '/');
			*cut = '\0';
			snprintf(task, sizeof(task), "/sys/fs/cgroup%s/user/"
				 "task_%u/memory.events", rel, local_id);
			snprintf(step, sizeof(step),
				 "/sys/fs/cgroup%s/memory.events", rel);
		} else if ((cut = strstr(line, ":memory:/"))) {
			/* v1: the step's folder, tasks in task_N. */
			rel = cut + strlen(":memory:");
			snprintf(task, sizeof(task), "/sys/fs/cgroup/memory%s/"
				 "task_%u/memory.oom_control", rel, local_id);
			snprintf(step, sizeof(step), "/sys/fs/cgroup/memory%s/"
				 "memory.oom_control", rel);
		} else {
			continue;
		}
		if (counted(task, step))
			return true;
	}
	return false;
}

/* Time the stacks' file has to be written before the record goes. */
#define STACKS_WRITE_MS 1000

/*
 * As the user: STACKS (LEN bytes, exit_stacks.c) and how the task ended
 * into RECORD_DIR/dist-train-STEP.stacks-rank-RANK. A grandchild writes
 * it, so that a folder on a hung file system holds up neither this child
 * nor, through it, slurmstepd: after STACKS_WRITE_MS it is left to finish.
 * Returns false when it was left so.
 */
static bool save_stacks(const struct plugin_state *st, const char *step_id,
			const struct dt_task_exit *e, const char *stacks,
			size_t len)
{
	uint64_t deadline = now_ms() + STACKS_WRITE_MS;
	char path[sizeof(st->record_dir) + 96], how[128];
	pid_t pid = fork();
	int fd, rc;

	if (pid < 0)
		return true;
	if (pid > 0) {
		while (waitpid(pid, &rc, WNOHANG) == 0) {
			if (now_ms() >= deadline)
				return false;
			usleep(5000);
		}
		return true;
	}
	alarm(10);	/* not inherited: its own, for a file system that
			 * answers slowly but does answer */
	snprintf(path, sizeof(path), "%s/dist-train-%s.stacks-rank-%u",
		 st->record_dir, step_id, e->rank);
	/* Not a link, and no FIFO to wait on (O_NONBLOCK: ENXIO). */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK |
		  O_CLOEXEC, 0644);
	if (fd < 0)
		_exit(1);
	dt_exit_describe(e, how, sizeof(how));
	/* Whatever the task wrote, then one line of the plugin's own, which
	 * dist-train why reads for how it ended. */
	if (!dt_write_all(fd, stacks, len) ||
	    dprintf(fd, "%sdist-train: rank %u on %s ended by %s%s\n",
		    len && stacks[len - 1] != '\n' ? "\n" : "", e->rank,
		    e->node, how, len == EXIT_STACKS_MAX ? " (its stacks are "
		    "cut at 256 KiB)" : "") < 0)
		_exit(1);
	_exit(close(fd) == 0 ? 0 : 1);
}

int report_become_user(const struct plugin_state *st)
{
	gid_t gid = st->job_gid;

	if (setgroups(1, &gid) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(st->job_uid, st->job_uid, st->job_uid) < 0)
		return -1;
	return 0;
}

/* The stacks first, then the record; srun's answer is waited for, so that
 * srun names a failed task before slurmstepd tells it the task ended. */
int report_deliver(const struct plugin_state *st, const char *record,
		   size_t len, const char *step_id,
		   const struct dt_task_exit *e, const char *stacks,
		   size_t stacks_len)
{
	uint64_t deadline;
	const char *why;
	char answer[8];
	bool saved = true;
	int fd, rc;

	if (stacks)
		saved = save_stacks(st, step_id, e, stacks, stacks_len);
	deadline = now_ms() + SEND_MS;
	fd = net_connect(st->report_host, st->report_port, deadline, &why);
	if (fd < 0)
		return REPORT_UNSENT;
	/* Sent: srun heard it, even when its answer is late; and the
	 * stacks' folder too slow to wait for again is said first. */
	if (!net_send_all(fd, record, len, deadline))
		rc = REPORT_UNSENT;
	else if (!saved)
		rc = REPORT_STACKS_SLOW;
	else if (net_read_line(fd, deadline, answer, sizeof(answer)) == 0)
		rc = REPORT_HEARD;
	else
		rc = REPORT_LATE;
	close(fd);
	return rc;
}

/* The child of one task's record, where the node has no reporter
 * (exit_reporter.c): as the job's user, deliver it and exit with its
 * answer. */
static void send_as_user(const struct plugin_state *st, const char *record,
			 size_t len, const char *step_id,
			 const struct dt_task_exit *e, const char *stacks,
			 size_t stacks_len)
{
	sigset_t alarm_only;

	/* Whatever hangs, the child ends: slurmstepd blocks SIGALRM, and
	 * the child inherits its mask and handlers. */
	sigemptyset(&alarm_only);
	sigaddset(&alarm_only, SIGALRM);
	signal(SIGALRM, SIG_DFL);
	sigprocmask(SIG_UNBLOCK, &alarm_only, NULL);
	alarm(REPORT_ALARM_S);
	if (report_become_user(st) < 0)
		_exit(REPORT_NOT_USER);
	_exit(report_deliver(st, record, len, step_id, e, stacks, stacks_len));
}

/* One record sent by a child of its own, as the job's user: its outcome,
 * or -1 with how it was GONE where the child ended otherwise. */
static int send_by_child(const struct plugin_state *st, const char *record,
			 size_t len, const char *step_id,
			 const struct dt_task_exit *e, const char *stacks,
			 size_t stacks_len, char *gone, size_t gone_len)
{
	pid_t pid = fork();
	int rc;

	if (pid == 0)
		send_as_user(st, record, len, step_id, e, stacks, stacks_len);
	if (pid < 0) {
		snprintf(gone, gone_len, "fork: %s", strerror(errno));
		return -1;
	}
	/* Past its own alarm: only a stopped child is still there. */
	if (reap_child(pid, now_ms() + (REPORT_ALARM_S + 1) * 1000, &rc) < 0 ||
	    rc == -1) {
		snprintf(gone, gone_len, "no answer in time");
		return -1;
	}
	if (WIFEXITED(rc))
		return WEXITSTATUS(rc);
	snprintf(gone, gone_len, "signal %d", WTERMSIG(rc));
	return -1;
}

void report_task_exit(spank_t sp, struct plugin_state *st)
{
	struct dt_task_exit e;
	char record[DT_EXIT_RECORD_MAX], step_id[32], gone[64], *stacks;
	uint32_t rank, local_id;
	size_t stacks_len;
	int status, len, rc;

	if (!st->report_on ||
	    spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_ID, &local_id) != ESPANK_SUCCESS)
		return;
	memset(&e, 0, sizeof(e));
	e.rank = rank;
	e.local_rank = local_id;
	e.node_rank = st->layout.node_rank;
	snprintf(e.node, sizeof(e.node), "%s", st->report_node);
	e.status = status;
	e.oom = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL &&
		killed_for_memory(local_id);
	e.after_ms = now_ms() - st->started_ms;
	e.at_ms = wall_ms();
	snprintf(step_id, sizeof(step_id), "%u.%u", st->job_id, st->step_id);
	len = dt_exit_record_format(st->report_key, step_id, &e, record,
				    sizeof(record));
	if (len < 0)
		return;
	stacks = st->record_dir[0] ?
		 exit_stacks_take(st, local_id, status, &stacks_len) : NULL;
	if (!stacks)
		stacks_len = 0;
	gone[0] = '\0';
	rc = exit_reporter_send(st, record, (size_t)len, step_id, &e, stacks,
				stacks_len, gone, sizeof(gone));
	if (rc == EXIT_REPORTER_NONE)
		rc = send_by_child(st, record, (size_t)len, step_id, &e,
				   stacks, stacks_len, gone, sizeof(gone));
	free(stacks);
	/* srun is gone or out of reach: the node's other tasks keep quiet.
	 * A late answer (srun asking slurmctld, or busy with a stranger's
	 * connection) is no reason to. */
	if (rc == REPORT_STACKS_SLOW) {
		dt_log_debug("step %s: the record folder %s took over %d ms "
			     "to write task %u's stacks: this node saves no "
			     "more", step_id, st->record_dir, STACKS_WRITE_MS,
			     rank);
		st->record_dir[0] = '\0';
		return;
	}
	if (rc != REPORT_HEARD && rc != REPORT_LATE) {
		if (rc >= 0)
			snprintf(gone, sizeof(gone), "exit %d", rc);
		dt_log_debug("step %s: srun at %s:%s did not hear how task %u "
			     "ended (%s)", step_id, st->report_host,
			     st->report_port, rank, gone);
		st->report_on = false;
	}
}
