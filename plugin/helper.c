/*
 * Run `dist-train bootstrap` for one task and collect the environment it
 * computed. It runs in task_init, so as the user, with the task's
 * environment; its path comes from plugstack.conf or the install prefix,
 * never from the job. PMIx, NCCL and CUDA stay out of slurmstepd.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin.h"
#include "../common/train_env.h"

/* The records fit easily; more means something is wrong. */
#define RECORDS_MAX (1 << 20)
#define RESULT_FD 3
#define SECRET_FD 4
/* A fork or pipe that failed: the node is short of processes or files. */
#define CANNOT_START \
	"cannot start the helper (%s): run fewer tasks per node, or ask " \
	"your administrator to raise this node's limits on processes and " \
	"open files"

/*
 * ENVP for the helper, with DIST_TRAIN_PROGRAM=PROGRAM for its NCCL check
 * (helper/nccl_check.h): a new array to free, or NULL to use ENVP as is.
 */
static char **helper_env(char *const envp[], const char *program)
{
	static const char name[] = "DIST_TRAIN_PROGRAM=";
	size_t n = 0, k = 0;
	char **env;

	if (!program || !*program)
		return NULL;
	while (envp && envp[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return NULL;
	env[k] = malloc(sizeof(name) + strlen(program));
	if (!env[k]) {
		free(env);
		return NULL;
	}
	memcpy(env[k], name, sizeof(name) - 1);
	memcpy(env[k++] + sizeof(name) - 1, program, strlen(program) + 1);
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], name, sizeof(name) - 1))
			env[k++] = envp[i];
	return env;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void exec_helper(const char *path, char *const argv[],
			char *const envp[], int result_fd, int secret_fd)
{
	sigset_t none;
	char node[256];
	int error;

	/* Its own group, so that a late helper can be killed whole. */
	setpgid(0, 0);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Out of the way first: either may be 3 or 4 already. */
	result_fd = fcntl(result_fd, F_DUPFD_CLOEXEC, 10);
	if (secret_fd >= 0)
		secret_fd = fcntl(secret_fd, F_DUPFD_CLOEXEC, 10);
	if (result_fd < 0 || dup2(result_fd, RESULT_FD) < 0 ||
	    (secret_fd >= 0 && dup2(secret_fd, SECRET_FD) < 0))
		_exit(127);
	/* Nothing else of slurmstepd's or the task's goes with it. */
	syscall(SYS_close_range, SECRET_FD + 1, ~0U, 0);
	execve(path, argv, envp);
	error = errno;
	plugin_node_name(envp, node, sizeof(node));
	dprintf(STDERR_FILENO, DT_NAME ": error: on %s: cannot run the helper "
		"%s (%s): ask your administrator to install dist-train there, "
		"or to name it with helper= in plugstack.conf\n", node, path,
		strerror(error));
	_exit(127);
}

/* A descriptor passed in MSG (SCM_RIGHTS) into *FD when it is -1; any
 * other is closed. */
static void take_passed_fd(struct msghdr *msg, int *fd)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c;
	     c = CMSG_NXTHDR(msg, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int passed;

			memcpy(&passed, CMSG_DATA(c) + i * sizeof(int),
			       sizeof(int));
			if (fd && *fd < 0)
				*fd = passed;
			else
				close(passed);
		}
	}
}

/* read(2) of FD into BUF, with what take_passed_fd takes. */
static ssize_t read_some(int fd, char *buf, size_t len, int *passed_fd)
{
	char control[CMSG_SPACE(sizeof(int) * 4)];
	struct iovec iov = { buf, len };
	struct msghdr msg = { 0 };
	ssize_t n;

	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = control;
	msg.msg_controllen = sizeof(control);
	n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	if (n >= 0)
		take_passed_fd(&msg, passed_fd);
	return n;
}

/*
 * Read everything from FD until EOF or DEADLINE; a descriptor the helper
 * passes with it (rank 0's listening socket) into *PASSED_FD.
 */
static int read_all(int fd, long long deadline, char **buf, size_t *len,
		    int *passed_fd)
{
	size_t cap = 4096;

	*len = 0;
	*buf = malloc(cap);
	if (!*buf)
		return -1;
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		long long left = deadline - now_ms();
		ssize_t n;

		if (left <= 0)
			return -1;
		n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			continue;
		if (*len == cap) {
			char *nb;

			if (cap >= RECORDS_MAX)
				return -1;
			nb = realloc(*buf, cap * 2);
			if (!nb)
				return -1;
			*buf = nb;
			cap *= 2;
		}
		n = read_some(fd, *buf + *len, cap - *len, passed_fd);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? 0 : -1;
		*len += (size_t)n;
	}
}

/*
 * A pipe holding SECRET and its end, to read from (the helper's SECRET_FD):
 * no file, argv or environment ever holds it. -1 when there is none.
 */
static int secret_pipe(const char *secret)
{
	size_t len = strlen(secret);
	int fds[2];

	/* 65 bytes fit in any pipe: the write cannot block. */
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	if (write(fds[1], secret, len) != (ssize_t)len ||
	    write(fds[1], "\n", 1) != 1) {
		close(fds[0]);
		fds[0] = -1;
	}
	close(fds[1]);
	return fds[0];
}

int helper_bootstrap(const struct dt_config *cfg, char *const envp[],
		     const char *secret, const char *rank0_host,
		     bool rank0_port_only, struct dt_env *out, int *store_fd,
		     char *err, size_t errlen)
{
	static char command[] = "bootstrap", result[] = "--result-fd=3",
		    secret_arg[] = "--secret-fd=4", port_only[] = "--rank0-port";
	char settings[256], ports[32], rank0[256 + 14];
	char *argv[] = { (char *)cfg->helper, command, result, ports, settings,
			 NULL, NULL, NULL, NULL };
	int next_arg = 5;
	int secret_fd = -1, passed = -1;
	struct sigaction dfl, old;
	unsigned wait_s = cfg->timeout + 15 + (cfg->check ? cfg->timeout : 0);
	long long deadline = now_ms() + (long long)wait_s * 1000;
	char *records = NULL, **env;
	size_t len = 0;
	int fds[2], status = 0, rc = -1, got;
	pid_t pid;

	err[0] = '\0';
	snprintf(ports, sizeof(ports), "--port-range=%u-%u", cfg->port_lo,
		 cfg->port_hi);
	memcpy(settings, "--settings=", 11);
	dt_config_format_settings(cfg, settings + 11, sizeof(settings) - 11);

	if (secret) {
		secret_fd = secret_pipe(secret);
		if (secret_fd < 0) {
			snprintf(err, errlen, "cannot hand the step's secret "
				 "to the helper (%s): rerun the step, and "
				 "report it to your administrator if it "
				 "recurs", strerror(errno));
			return -1;
		}
		argv[next_arg++] = secret_arg;
	}
	if (rank0_host) {
		snprintf(rank0, sizeof(rank0), "--rank0-host=%s", rank0_host);
		argv[next_arg++] = rank0;
	}
	if (rank0_port_only)
		argv[next_arg++] = port_only;
	/* A socket, not a pipe: rank 0's helper passes its listening
	 * socket back with the records. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0) {
		snprintf(err, errlen, CANNOT_START, strerror(errno));
		if (secret_fd >= 0)
			close(secret_fd);
		return -1;
	}
	/* We must be able to reap it, whatever the task inherited. */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &dfl, &old);
	env = cfg->check ? helper_env(envp, plugin_state()->program) : NULL;
	pid = fork();
	if (pid == 0)
		exec_helper(cfg->helper, argv, env ? env : envp, fds[1],
			    secret_fd);
	if (env) {
		free(env[0]);
		free(env);
	}
	close(fds[1]);
	if (secret_fd >= 0)
		close(secret_fd);
	if (pid < 0) {
		snprintf(err, errlen, CANNOT_START, strerror(errno));
		goto out;
	}
	got = read_all(fds[0], deadline, &records, &len, &passed);
	if (got < 0 && now_ms() < deadline) {
		/* Not a result: no reason to wait for the rest of it. */
		reap_child(pid, 0, &status);
		snprintf(err, errlen, "the helper %s sent no readable result: "
			 "ask your administrator to install the helper "
			 "(helper= in plugstack.conf) of the plugin's own "
			 "release", cfg->helper);
		goto out;
	}
	if (reap_child(pid, (uint64_t)deadline, &status) < 0 || got < 0) {
		snprintf(err, errlen, "the helper %s did not finish within "
			 "%u s, waiting for PMIx or the other ranks: give it "
			 "longer with --dist-train=timeout=SECONDS, or use "
			 "--dist-train=pmix=no if PMIx hangs", cfg->helper,
			 wait_s);
		goto out;
	}
	/* A failing helper printed why (exit 127: exec failed, said so). */
	if (status == -1 ? len == 0 : !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		if (status != -1 && WIFSIGNALED(status))
			snprintf(err, errlen, "the helper %s was killed by "
				 "signal %d (%s): give the step more memory "
				 "(--mem) if it ran out, else rerun with "
				 "--dist-train=pmix=no and report it to your "
				 "administrator", cfg->helper, WTERMSIG(status),
				 strsignal(WTERMSIG(status)));
		goto out;
	}
	if (dt_env_deserialize(records, len, out, err, errlen) < 0)
		goto out;
	if (store_fd) {
		*store_fd = passed;
		passed = -1;
	}
	rc = 0;
out:
	if (passed >= 0)
		close(passed);
	sigaction(SIGCHLD, &old, NULL);
	close(fds[0]);
	free(records);
	return rc;
}
