/*
 * The node's reporter: one child of slurmstepd, made as the node's first
 * task ends, that becomes the job's user and sends each task's record to
 * srun (report.c's report_deliver). A child per task forked all of
 * slurmstepd each time: at 16 tasks a node, the fork and exit of its copy
 * cost more CPU than all the rest of the plugin's part of the step.
 *
 * slurmstepd hands it one record at a time over a socket pair and waits
 * for its answer, as it waited for a task's child: bounded (REPLY_MS), and
 * a reporter that does not answer in time is killed, after which the node
 * reports no more. The reporter takes the step's signals as a task would
 * (proctrack sends them to slurmstepd's children), so it ignores those
 * that end a step: the records of the tasks they end still go. It holds
 * none of slurmstepd's descriptors (a task's stdin pipe held open would
 * keep that task waiting), and is stopped and reaped as the node's last
 * task ends, before Slurm ends the step's processes.
 *
 * Only slurmstepd's own process has one: with SlurmdParameters=
 * contain_spank, Slurm runs task_exit in a clone that shares slurmstepd's
 * memory but not its descriptors, and there each record has a child of its
 * own, as before.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin.h"
#include "../common/exit_record.h"
#include "../common/fd_io.h"
#include "../common/net.h"

/* The reporter's time for one record, as a child's was (report.c). */
#define REPORTER_ALARM_S 3
/* slurmstepd's wait for its answer: past the reporter's own alarm, so
 * that only a stopped one is killed here. */
#define REPLY_MS 4000
/* How long a reporter told to go has to end before it is killed. */
#define STOP_MS 200

/* What slurmstepd sends before each record and its stacks. */
struct reporter_request {
	struct dt_task_exit exit;
	char step_id[32];
	uint32_t record_len;
	uint32_t stacks_len;
};

/* None of slurmstepd's descriptors kept but SOCK, which becomes 3; 0-2
 * on /dev/null. Returns 3, or -1. */
static int close_inherited(int sock)
{
	int null, keep = fcntl(sock, F_DUPFD, 3);
	struct dirent *d;
	DIR *dir;

	if (keep < 0 || (keep != 3 && dup2(keep, 3) < 0))
		return -1;
	null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
#ifdef SYS_close_range
	if (syscall(SYS_close_range, 4, ~0U, 0) == 0)
		return 3;
#endif
	dir = opendir("/proc/self/fd");
	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		int fd = atoi(d->d_name);

		if (fd > 3 && fd != dirfd(dir))
			close(fd);
	}
	closedir(dir);
	return 3;
}

/* The step's signals, which end a task (and SIGPIPE), do not end the
 * reporter; SIGALRM, its own bound, does. Nothing of slurmstepd's
 * handlers or mask is kept. */
static void reporter_signals(void)
{
	static const int ignored[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM,
				       SIGUSR1, SIGUSR2, SIGPIPE, SIGTSTP,
				       SIGTTIN, SIGTTOU, SIGXCPU };
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		signal(ignored[i], SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The reporter, as the job's user: each request answered with one line,
 * its outcome, until slurmstepd closes its end. */
static void reporter_main(const struct plugin_state *st, int sock)
{
	char record[DT_EXIT_RECORD_MAX], *stacks = NULL;
	struct reporter_request rq;

	prctl(PR_SET_NAME, "dist-train-exit");
	reporter_signals();
	sock = close_inherited(sock);
	if (sock < 0)
		_exit(1);
	if (report_become_user(st) < 0)
		_exit(REPORT_NOT_USER);
	while (dt_read_up_to(sock, (char *)&rq, sizeof(rq)) == sizeof(rq)) {
		char line[8];
		int outcome;

		alarm(REPORTER_ALARM_S);
		if (rq.record_len == 0 || rq.record_len > sizeof(record) ||
		    rq.stacks_len > EXIT_STACKS_MAX ||
		    !memchr(rq.step_id, '\0', sizeof(rq.step_id)) ||
		    (rq.stacks_len && !stacks &&
		     !(stacks = malloc(EXIT_STACKS_MAX))) ||
		    dt_read_up_to(sock, record, rq.record_len) !=
		    rq.record_len ||
		    dt_read_up_to(sock, stacks, rq.stacks_len) !=
		    rq.stacks_len)
			_exit(1);
		outcome = report_deliver(st, record, rq.record_len, rq.step_id,
					 &rq.exit,
					 rq.stacks_len ? stacks : NULL,
					 rq.stacks_len);
		snprintf(line, sizeof(line), "%d\n", outcome);
		if (!dt_write_all(sock, line, strlen(line)))
			_exit(1);
		alarm(0);
		/* Stacks writers left to finish (report.c's save_stacks). */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	_exit(0);
}

static int reporter_start(struct plugin_state *st)
{
	int pair[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
		return -1;
	pid = fork();
	if (pid == 0)
		reporter_main(st, pair[1]);
	close(pair[1]);
	if (pid < 0) {
		close(pair[0]);
		return -1;
	}
	st->reporter_pid = pid;
	st->reporter_fd = pair[0];
	return 0;
}

/* RQ, RECORD and STACKS to the reporter and its outcome back, by
 * DEADLINE: the outcome, or -1 (its FAULT; *ENDED where the reporter was
 * gone before its time) where it did not answer right; then it is
 * stopped. */
static int reporter_request(struct plugin_state *st,
			    const struct reporter_request *rq,
			    const char *record, const char *stacks,
			    uint64_t deadline, const char **fault, bool *ended)
{
	char line[8], *end;
	long outcome = -1;

	*ended = false;
	if (net_send_all(st->reporter_fd, (const char *)rq, sizeof(*rq),
			 deadline) &&
	    net_send_all(st->reporter_fd, record, rq->record_len,
			 deadline) &&
	    net_send_all(st->reporter_fd, stacks, rq->stacks_len,
			 deadline) &&
	    net_read_line(st->reporter_fd, deadline, line, sizeof(line)) == 0) {
		outcome = strtol(line, &end, 10);
		if (*end == '\0' && outcome >= REPORT_HEARD &&
		    outcome <= REPORT_STACKS_SLOW)
			return (int)outcome;
		*fault = "answered wrong";
	} else {
		*ended = now_ms() < deadline;
		*fault = *ended ? "ended" : "did not answer in time";
	}
	exit_reporter_stop(st);
	return -1;
}

int exit_reporter_send(struct plugin_state *st, const char *record,
		       size_t len, const char *step_id,
		       const struct dt_task_exit *e, const char *stacks,
		       size_t stacks_len, char *gone, size_t gone_len)
{
	struct reporter_request rq;
	const char *failed = NULL;
	bool ended = false;
	int outcome = -1;

	if (st->stepd_pid != getpid() || st->reporter_failed ||
	    len > DT_EXIT_RECORD_MAX || stacks_len > EXIT_STACKS_MAX ||
	    strlen(step_id) >= sizeof(rq.step_id))
		return EXIT_REPORTER_NONE;
	memset(&rq, 0, sizeof(rq));
	rq.exit = *e;
	memcpy(rq.step_id, step_id, strlen(step_id) + 1);
	rq.record_len = (uint32_t)len;
	rq.stacks_len = (uint32_t)stacks_len;
	/*
	 * A reporter that ended is started again, once: Slurm's SIGKILL to
	 * the step's processes (after KillWait) ends it with the tasks it
	 * kills, whose records are still to go.
	 */
	for (int start = 0; start < 2 && outcome < 0; start++) {
		if (!st->reporter_pid && reporter_start(st) < 0) {
			if (!failed) {
				st->reporter_failed = true;
				return EXIT_REPORTER_NONE;
			}
			break;
		}
		outcome = reporter_request(st, &rq, record, stacks,
					   now_ms() + REPLY_MS, &failed,
					   &ended);
		if (outcome < 0 && !ended)
			break;
	}
	if (outcome < 0) {
		snprintf(gone, gone_len, "the node's reporter %s", failed);
		st->reporter_failed = true;
	}
	return outcome;
}

void exit_reporter_stop(struct plugin_state *st)
{
	pid_t pid = st->reporter_pid;
	int status;

	if (!pid || st->stepd_pid != getpid())
		return;
	close(st->reporter_fd);
	st->reporter_fd = -1;
	st->reporter_pid = 0;
	/* Told to go by its socket's end: it has STOP_MS. */
	reap_child(pid, now_ms() + STOP_MS, &status);
}
