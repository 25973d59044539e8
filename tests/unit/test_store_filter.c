/*
 * common/store_filter.c: the program that admits only the step's
 * addresses to rank 0's store, built here and run by this machine's
 * kernel on loopback connections from chosen source addresses; and
 * common/store_hold.c passing it on to the socket that holds the port.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/store_filter.h"
#include "common/store_hold.h"
#include "common/store_port.h"
#include "unit.h"

static const char *no_path(const char *name, void *arg)
{
	(void)name, (void)arg;
	return NULL;
}

static struct sockaddr_in v4(const char *text, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };

	inet_pton(AF_INET, text, &a.sin_addr);
	return a;
}

static struct sockaddr_in6 v6(const char *text)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6 };

	inet_pton(AF_INET6, text, &a.sin6_addr);
	return a;
}

static void test_peer_set(void)
{
	struct dt_peer_set set = { 0 };
	struct sockaddr_in a = v4("10.1.2.3", 0), b = v4("10.1.2.4", 0);
	struct sockaddr_in6 mapped = v6("::ffff:10.1.2.3"),
			    six = v6("fd00::7");
	struct sockaddr unix_family = { .sa_family = AF_UNIX };

	CU_ASSERT_EQUAL(dt_peer_set_add(&set, (struct sockaddr *)&a), 0);
	CU_ASSERT_EQUAL(dt_peer_set_add(&set, (struct sockaddr *)&b), 0);
	/* A dual-stack socket's IPv4 peer is the same address. */
	CU_ASSERT_EQUAL(dt_peer_set_add(&set, (struct sockaddr *)&mapped), 0);
	CU_ASSERT_EQUAL(dt_peer_set_add(&set, (struct sockaddr *)&six), 0);
	CU_ASSERT_EQUAL(dt_peer_set_add(&set, (struct sockaddr *)&six), 0);
	CU_ASSERT_EQUAL(dt_peer_set_add(&set, &unix_family), -1);
	CU_ASSERT_EQUAL(set.n4, 2);
	CU_ASSERT_EQUAL(set.v4[0], 0x0a010203u);
	CU_ASSERT_EQUAL(set.n6, 1);
	dt_peer_set_free(&set);
	CU_ASSERT_EQUAL(set.n4 + set.n6, 0);
}

static void test_program_size(void)
{
	struct sock_filter prog[DT_FILTER_MAX_INSNS];
	struct dt_peer_set set = { 0 };
	int empty, two;

	empty = dt_store_filter_build(&set, 1, prog, DT_FILTER_MAX_INSNS);
	CU_ASSERT(empty > 0);
	set.v4 = calloc(2100, sizeof(*set.v4));
	CU_ASSERT_PTR_NOT_NULL_FATAL(set.v4);
	set.n4 = 2;
	two = dt_store_filter_build(&set, 1, prog, DT_FILTER_MAX_INSNS);
	CU_ASSERT_EQUAL(two, empty + 4);	/* two per IPv4 address */
	/* Too many for one program: none, rather than a wrong one. */
	set.n4 = 2100;
	CU_ASSERT_EQUAL(dt_store_filter_build(&set, 1, prog,
					      DT_FILTER_MAX_INSNS), -1);
	CU_ASSERT_EQUAL(dt_store_filter_build(&set, 1, prog, 10), -1);
	dt_peer_set_free(&set);
}

/* A listening socket on 127.0.0.1 with a filter that admits SET. */
static int filtered_listener(const struct dt_peer_set *set, int loopback,
			     uint16_t *port)
{
	struct sock_filter prog[DT_FILTER_MAX_INSNS];
	struct sockaddr_in a = v4("127.0.0.1", 0);
	socklen_t len = sizeof(a);
	struct sock_fprog fprog;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), n;

	n = dt_store_filter_build(set, loopback, prog, DT_FILTER_MAX_INSNS);
	if (fd < 0 || n < 0)
		return -1;
	fprog.len = (unsigned short)n;
	fprog.filter = prog;
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog,
		       sizeof(fprog)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* Whether a connection from SOURCE to 127.0.0.1:PORT is made within
 * 300 ms (a dropped SYN leaves it pending). */
static int connects_from(const char *source, uint16_t port)
{
	struct sockaddr_in from = v4(source, 0), to = v4("127.0.0.1", port);
	struct pollfd p;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), error = 0;
	socklen_t len = sizeof(error);

	if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return 0;
	}
	p.fd = fd;
	p.events = POLLOUT;
	if (poll(&p, 1, 300) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0 || error)
		error = 1;
	close(fd);
	return !error;
}

static void test_kernel_runs_it(void)
{
	struct dt_peer_set set = { 0 };
	struct sockaddr_in peer = v4("127.0.0.2", 0);
	uint16_t port;
	int fd;

	CU_ASSERT_EQUAL_FATAL(dt_peer_set_add(&set, (struct sockaddr *)&peer),
			      0);
	/* Without the loopback rule, 127.0.0.2 stands for a node of the
	 * step and 127.0.0.3 for any other host. */
	fd = filtered_listener(&set, 0, &port);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(connects_from("127.0.0.2", port), 1);
	CU_ASSERT_EQUAL(connects_from("127.0.0.3", port), 0);
	close(fd);
	/* With it, this node's own programs get in. */
	fd = filtered_listener(&set, 1, &port);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(connects_from("127.0.0.3", port), 1);
	close(fd);
	dt_peer_set_free(&set);
}

/* The socket that holds the port after the barrier keeps its filter. */
static void test_hold_keeps_it(void)
{
	struct dt_peer_set set = { 0 };
	struct sockaddr_in peer = v4("127.0.0.2", 0);
	char *python[] = { "python3", "x.py", NULL };
	struct dt_env env = { 0 };
	const char *named;
	uint16_t port;
	int barrier, held;

	dt_peer_set_add(&set, (struct sockaddr *)&peer);
	barrier = filtered_listener(&set, 0, &port);
	CU_ASSERT_FATAL(barrier >= 0);
	CU_ASSERT_EQUAL(dt_store_hold(barrier, port, true, 2, python, no_path,
				      NULL, &env), 1);
	named = dt_env_get(&env, DT_STORE_FD_ENV);
	CU_ASSERT_PTR_NOT_NULL_FATAL(named);
	held = atoi(named);
	/* What the store does with it: listen. */
	CU_ASSERT_EQUAL_FATAL(listen(held, 16), 0);
	CU_ASSERT_EQUAL(connects_from("127.0.0.2", port), 1);
	CU_ASSERT_EQUAL(connects_from("127.0.0.3", port), 0);
	close(held);
	dt_env_free(&env);
	dt_peer_set_free(&set);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_peer_set),
	UNIT_TEST(test_program_size),
	UNIT_TEST(test_kernel_runs_it),
	UNIT_TEST(test_hold_keeps_it),
};

UNIT_MAIN("store_filter", tests)
