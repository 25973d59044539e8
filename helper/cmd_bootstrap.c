/*
 * dist-train bootstrap --result-fd=N [--settings=...] [--port-range=...]:
 * what the plugin runs in each task. The environment it computed goes to
 * file descriptor N as records (common/train_env.h); messages go to
 * stderr, the task's.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bootstrap.h"
#include "commands.h"

/*
 * BUF to FD; PASS_FD, when not -1, with its first bytes: rank 0's
 * listening socket, which the plugin keeps for the program's store
 * (common/store_port.h). A result pipe, not a socket, gets the bytes
 * alone.
 */
static int write_all(int fd, const char *buf, size_t len, int pass_fd)
{
	while (len && pass_fd >= 0) {
		char control[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { (void *)buf, len };
		struct msghdr msg = { 0 };
		struct cmsghdr *cmsg;
		ssize_t n;

		memset(control, 0, sizeof(control));
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = control;
		msg.msg_controllen = sizeof(control);
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
		n = sendmsg(fd, &msg, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != ENOTSOCK)
			return -1;
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
		}
		break;
	}
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

#define USAGE \
	"usage: " DT_NAME " bootstrap --result-fd=N [-s SETTINGS] " \
	"[--port-range=LOW-HIGH]\n" \
	"                           [--secret-fd=N] [--rank0-host=NAME] " \
	"[--rank0-port]\n" \
	"\n" \
	"Run by the dist_train plugin in a task, as the user: the PMIx " \
	"bootstrap,\n" \
	"whose environment goes to file descriptor N. Not for use by " \
	"hand: run\n" \
	DT_NAME " exec or " DT_NAME " env instead.\n" \
	"\n" \
	"See dist-train(1).\n"

int cmd_bootstrap(int argc, char **argv)
{
	struct dt_config cfg;
	struct dt_env env = { 0 };
	char *records = NULL;
	size_t len;
	int fd, next, rc, store_fd = -1;

	rc = bootstrap_options(argc, argv, USAGE, &cfg, &fd, &next);
	if (rc)
		return rc == BOOTSTRAP_HELP ? 0 : rc;
	if (fd < 0 || next != argc) {
		helper_error("bootstrap is run by the dist_train plugin, with "
			     "--result-fd=N: run " DT_NAME " exec or env by "
			     "hand (" DT_NAME " bootstrap --help)");
		return 2;
	}
	rc = bootstrap_wants_rank0_port() ? bootstrap_rank0_port(&cfg, &env) :
	     bootstrap(&cfg, &env, &store_fd);
	if (rc)
		goto out;
	len = dt_env_serialize(&env, NULL, 0);
	records = malloc(len + 1);
	if (!records || dt_env_serialize(&env, records, len + 1) != len ||
	    write_all(fd, records, len, store_fd) < 0) {
		helper_error("cannot hand the environment to the plugin: "
			     "rerun the step, and report it to your "
			     "administrator if it recurs");
		rc = 1;
	}
out:
	if (store_fd >= 0)
		close(store_fd);
	close(fd);
	free(records);
	dt_env_free(&env);
	return rc;
}
