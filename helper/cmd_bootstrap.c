/*
 * dist-train bootstrap --result-fd=N [--settings=...] [--port-range=...]:
 * what the plugin runs in each task. The environment it computed goes to
 * file descriptor N as records (common/train_env.h); messages go to
 * stderr, the task's.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "bootstrap.h"
#include "commands.h"

static int write_all(int fd, const char *buf, size_t len)
{
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

int cmd_bootstrap(int argc, char **argv)
{
	struct dt_config cfg;
	struct dt_env env = { 0 };
	char *records = NULL;
	size_t len;
	int fd, next, rc;

	rc = bootstrap_options(argc, argv, &cfg, &fd, &next);
	if (rc)
		return rc;
	if (fd < 0 || next != argc) {
		helper_error("usage: " DT_NAME " bootstrap --result-fd=N "
			     "[--settings=SETTINGS] [--port-range=LOW-HIGH]");
		return 2;
	}
	rc = bootstrap_wants_rank0_port() ? bootstrap_rank0_port(&cfg, &env) :
	     bootstrap(&cfg, &env);
	if (rc)
		goto out;
	len = dt_env_serialize(&env, NULL, 0);
	records = malloc(len + 1);
	if (!records || dt_env_serialize(&env, records, len + 1) != len ||
	    write_all(fd, records, len) < 0) {
		helper_error("cannot hand the environment to the plugin");
		rc = 1;
	}
out:
	close(fd);
	free(records);
	dt_env_free(&env);
	return rc;
}
