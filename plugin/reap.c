/*
 * Waiting for a child of the plugin's, bounded: the helper (helper.c), the
 * node's reporter and a task's record sender (exit_reporter.c, report.c).
 * A child the user stopped (SIGSTOP: the reporter and the sender run as
 * the user) never holds slurmstepd or the task past its deadline.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin.h"
#include "../common/net.h"

int reap_child(pid_t pid, uint64_t deadline, int *status)
{
	int pidfd = -1, rc = 0;
	unsigned nap_ms = 1;

#ifdef SYS_pidfd_open
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		long long left = (long long)deadline - (long long)now_ms();

		if (r == pid)
			goto out;
		if (r < 0 && errno != EINTR) {
			*status = -1;	/* not ours to reap (ECHILD) */
			goto out;
		}
		if (left <= 0)
			break;
		if (pidfd >= 0) {
			struct pollfd p = { pidfd, POLLIN, 0 };

			poll(&p, 1, left > 60000 ? 60000 : (int)left);
		} else {
			usleep((left < nap_ms ? (unsigned)left : nap_ms) * 1000);
			nap_ms = nap_ms >= 20 ? 20 : nap_ms * 2;
		}
	}
	rc = -1;
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
out:
	if (pidfd >= 0)
		close(pidfd);
	return rc;
}
