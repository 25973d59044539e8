/*
 * common/store_port.c: which port rank 0's store serves, and which
 * programs are Python that runs the hook (so that rank 0's socket is
 * kept open into them).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/net.h"
#include "common/store_guard.h"
#include "common/store_hold.h"
#include "common/store_port.h"
#include "unit.h"

static const char *no_path(const char *name, void *arg)
{
	(void)name, (void)arg;
	return NULL;
}

/* A free port, as the kernel gives one. */
static uint16_t free_port(void)
{
	int fd = net_listen(0);
	uint16_t port = dt_socket_port(fd);

	close(fd);
	return port;
}

/* Whether a plain socket (SO_REUSEADDR, as torch's) can bind PORT. */
static bool can_bind(uint16_t port)
{
	int fd = net_listen(port), saved = errno;

	if (fd >= 0)
		close(fd);
	errno = saved;
	return fd >= 0;
}

static bool runs(const char *line, const char *head)
{
	char copy[256], *argv[16];
	int argc = 0;

	snprintf(copy, sizeof(copy), "%s", line);
	for (char *save = NULL, *w = strtok_r(copy, " ", &save); w && argc < 15;
	     w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	argv[argc] = NULL;
	return dt_runs_python(argc, argv, head, head ? strlen(head) : 0);
}

static void test_store_port(void)
{
	struct dt_env env = { 0 };

	CU_ASSERT_EQUAL(dt_store_port(&env), 0);
	dt_env_add(&env, "MASTER_PORT", "29500", DT_ENV_SET);
	CU_ASSERT_EQUAL(dt_store_port(&env), 29500);
	/* torchrun mode: the agents' store, whatever MASTER_PORT says. */
	dt_env_add(&env, "PET_RDZV_ENDPOINT", "n1:20417", DT_ENV_SET);
	CU_ASSERT_EQUAL(dt_store_port(&env), 20417);
	dt_env_free(&env);
	memset(&env, 0, sizeof(env));
	dt_env_add(&env, "MASTER_PORT", "29500x", DT_ENV_KEPT);
	CU_ASSERT_EQUAL(dt_store_port(&env), 0);
	dt_env_free(&env);
	memset(&env, 0, sizeof(env));
	dt_env_add(&env, "PET_RDZV_ENDPOINT", "n1", DT_ENV_SET);
	CU_ASSERT_EQUAL(dt_store_port(&env), 0);
	dt_env_free(&env);
}

static void test_python_by_name(void)
{
	CU_ASSERT_TRUE(runs("python train.py", NULL));
	CU_ASSERT_TRUE(runs("python3 -u train.py", NULL));
	CU_ASSERT_TRUE(runs("/opt/venv/bin/python3.11 -W ignore -X dev train.py",
			    NULL));
	CU_ASSERT_TRUE(runs("python3 -m torch.distributed.run train.py",
			    NULL));
	CU_ASSERT_TRUE(runs("python3 -c import", NULL));
	/* The program's own options, after the script, are its own. */
	CU_ASSERT_TRUE(runs("python3 train.py -E -I", NULL));
	/* PYTHONPATH or the site module ignored: no hook. */
	CU_ASSERT_FALSE(runs("python3 -E train.py", NULL));
	CU_ASSERT_FALSE(runs("python3 -I train.py", NULL));
	CU_ASSERT_FALSE(runs("python3 -S train.py", NULL));
	CU_ASSERT_FALSE(runs("python3 -uE train.py", NULL));
	/* -W's value is not an option cluster. */
	CU_ASSERT_TRUE(runs("python3 -W E train.py", NULL));
	CU_ASSERT_FALSE(runs("pythonic train.py", NULL));
	CU_ASSERT_FALSE(runs("python3-config", NULL));
	CU_ASSERT_FALSE(runs("bash run.sh", NULL));
	CU_ASSERT_FALSE(runs("./a.out", "\177ELF"));
	CU_ASSERT_FALSE(dt_runs_python(0, NULL, NULL, 0));
}

static void test_python_by_first_line(void)
{
	CU_ASSERT_TRUE(runs("./train.py", "#!/usr/bin/python3\nimport x\n"));
	CU_ASSERT_TRUE(runs("torchrun", "#!/usr/bin/python3 -u\n"));
	CU_ASSERT_TRUE(runs("./t", "#! /usr/bin/env python3\n"));
	CU_ASSERT_TRUE(runs("./t", "#!/usr/bin/env -S A=1 python3 -u\n"));
	CU_ASSERT_FALSE(runs("./t", "#!/usr/bin/env -i python3\n"));
	CU_ASSERT_FALSE(runs("./t", "#!/usr/bin/python3 -E\n"));
	CU_ASSERT_FALSE(runs("./t", "#!/bin/sh\nexec python3 x.py\n"));
	CU_ASSERT_FALSE(runs("./t", "#!/usr/bin/env\n"));
	CU_ASSERT_FALSE(runs("./t", "#!"));
	CU_ASSERT_FALSE(runs("./t", "import torch\n"));
}

/* 1 when a connection to PORT on 127.0.0.1 is refused. */
static int refused(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), rc;

	rc = connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 &&
	     errno == ECONNREFUSED;
	close(fd);
	return rc;
}

/* A connection to PORT that its server closed first: TIME_WAIT there. */
static void time_wait(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int server = net_listen(port), client, conn;

	client = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(server >= 0 &&
			connect(client, (struct sockaddr *)&a, sizeof(a)) == 0);
	conn = accept(server, NULL, NULL);
	close(conn);
	usleep(20000);
	close(client);
	close(server);
}

/* common/store_hold.c on this host's sockets. */
static void test_hold(void)
{
	char *python[] = { "python3", "train.py", NULL };
	char *shell[] = { "sh", "run.sh", NULL };
	struct dt_env env = { 0 };
	uint16_t port = free_port();
	const char *named;
	int fd, barrier;

	CU_ASSERT_FATAL(port != 0);
	/* Without a barrier: taken here, held into Python. */
	CU_ASSERT_EQUAL(dt_store_hold(-1, port, true, NULL, 2,
				      python, no_path, NULL, &env), 1);
	named = dt_env_get(&env, DT_STORE_FD_ENV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(named);
	fd = atoi(named);
	CU_ASSERT_EQUAL(dt_socket_port(fd), port);
	CU_ASSERT_EQUAL(fcntl(fd, F_GETFD), 0);	/* survives exec */
	CU_ASSERT_FALSE(can_bind(port));
	/* Not listening: a rank that comes first is refused, not queued. */
	CU_ASSERT_EQUAL(refused(port), 1);
	/* Taken: the next step on this port hears of it. */
	CU_ASSERT_EQUAL(dt_store_hold(-1, port, true, NULL, 2,
				      python, no_path, NULL, &env), -2);
	close(fd);
	CU_ASSERT_TRUE(can_bind(port));
	dt_env_free(&env);

	/* From the barrier's listening socket: the port is never free. */
	memset(&env, 0, sizeof(env));
	barrier = net_listen(port);
	CU_ASSERT_FATAL(barrier >= 0);
	CU_ASSERT_EQUAL(dt_store_hold(barrier, port, true, NULL, 2,
				      python, no_path, NULL, &env), 1);
	CU_ASSERT_EQUAL(fcntl(barrier, F_GETFD), -1);	/* closed */
	fd = atoi(dt_env_get(&env, DT_STORE_FD_ENV));
	CU_ASSERT_EQUAL(dt_socket_port(fd), port);
	CU_ASSERT_FALSE(can_bind(port));
	close(fd);
	dt_env_free(&env);

	/* Not Python, or no hook: let go, and no variable. */
	memset(&env, 0, sizeof(env));
	CU_ASSERT_EQUAL(dt_store_hold(-1, port, true, NULL, 2,
				      shell, no_path, NULL, &env), 0);
	CU_ASSERT_PTR_NULL(dt_env_get(&env, DT_STORE_FD_ENV));
	CU_ASSERT_EQUAL(dt_env_find(&env, DT_STORE_FD_ENV)->action,
			DT_ENV_UNSET);
	CU_ASSERT_EQUAL(dt_store_hold(-1, port, false, NULL, 2,
				      python, no_path, NULL, &env), 0);
	CU_ASSERT_TRUE(can_bind(port));
	dt_env_free(&env);

	/* The last step's store left connections in TIME_WAIT on the port,
	 * as it does at every step's end: the port is held all the same. */
	memset(&env, 0, sizeof(env));
	time_wait(port);
	CU_ASSERT_EQUAL(dt_store_hold(-1, port, true, NULL, 2,
				      python, no_path, NULL, &env), 1);
	fd = atoi(dt_env_get(&env, DT_STORE_FD_ENV));
	CU_ASSERT_FALSE(can_bind(port));
	close(fd);
	dt_env_free(&env);
}

static const char *preloading(const char *name, void *arg)
{
	return strcmp(name, "LD_PRELOAD") ? NULL : arg;
}

/* The guard, preloaded where the port is kept (common/store_guard.h);
 * its list of addresses gone where it is not. */
static void test_hold_guard(void)
{
	char *python[] = { "python3", "train.py", NULL };
	char *shell[] = { "sh", "run.sh", NULL };
	const char *lib = "/bin/sh";	/* any file that can be read */
	struct dt_env env = { 0 };
	uint16_t port = free_port();

	CU_ASSERT_EQUAL(dt_store_hold(-1, port, true, lib, 2, python,
				      preloading, "/opt/x.so", &env), 1);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "LD_PRELOAD"),
			       "/bin/sh:/opt/x.so");
	close(atoi(dt_env_get(&env, DT_STORE_FD_ENV)));
	dt_env_free(&env);

	/* Already there (torchrun mode's workers): once is enough. */
	memset(&env, 0, sizeof(env));
	CU_ASSERT_EQUAL(dt_store_hold(-1, port, true, lib, 2, python,
				      preloading, "/opt/x.so /bin/sh", &env),
			1);
	CU_ASSERT_PTR_NULL(dt_env_find(&env, "LD_PRELOAD"));
	close(atoi(dt_env_get(&env, DT_STORE_FD_ENV)));
	dt_env_free(&env);

	/* Kept: a list this step's barrier made stays; one the task
	 * inherited (a step inside another step's rank 0) goes. */
	memset(&env, 0, sizeof(env));
	CU_ASSERT_EQUAL(dt_env_put(&env, DT_STORE_PEERS_ENV, "10.0.0.2",
				   DT_ENV_SET), 0);
	CU_ASSERT_EQUAL(dt_store_hold(-1, port, true, lib, 2, python,
				      preloading, NULL, &env), 1);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, DT_STORE_PEERS_ENV),
			       "10.0.0.2");
	close(atoi(dt_env_get(&env, DT_STORE_FD_ENV)));
	dt_env_free(&env);
	memset(&env, 0, sizeof(env));
	CU_ASSERT_EQUAL(dt_store_hold(-1, port, true, lib, 2, python,
				      preloading, NULL, &env), 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(dt_env_find(&env, DT_STORE_PEERS_ENV));
	CU_ASSERT_EQUAL(dt_env_find(&env, DT_STORE_PEERS_ENV)->action,
			DT_ENV_UNSET);
	close(atoi(dt_env_get(&env, DT_STORE_FD_ENV)));
	dt_env_free(&env);

	/* Not kept: nothing preloaded, and no list for the program. */
	memset(&env, 0, sizeof(env));
	CU_ASSERT_EQUAL(dt_env_put(&env, DT_STORE_PEERS_ENV, "10.0.0.2",
				   DT_ENV_SET), 0);
	CU_ASSERT_EQUAL(dt_store_hold(-1, port, true, lib, 2, shell,
				      preloading, NULL, &env), 0);
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "LD_PRELOAD"));
	CU_ASSERT_EQUAL(dt_env_find(&env, DT_STORE_PEERS_ENV)->action,
			DT_ENV_UNSET);
	dt_env_free(&env);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_store_port),
	UNIT_TEST(test_python_by_name),
	UNIT_TEST(test_python_by_first_line),
	UNIT_TEST(test_hold),
	UNIT_TEST(test_hold_guard),
};

UNIT_MAIN("store_port", tests)
