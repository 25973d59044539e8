#include "config.h"

#include "store_hold.h"
#include "net.h"
#include "store_guard.h"
#include "store_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

uint16_t dt_socket_port(int fd)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);

	if (fd < 0 || getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return 0;
	return (uint16_t)dt_sockaddr_port((struct sockaddr *)&a);
}

/*
 * A socket of FAMILY bound to PORT on every address, not listening, while
 * the listening socket of the same user still holds it (SO_REUSEPORT on
 * both), past the port's connections in TIME_WAIT (SO_REUSEADDR while it
 * binds). -1 with errno.
 */
static int bound_socket(int family, uint16_t port)
{
	int one = 1, zero = 0, fd, saved;
	struct sockaddr_in6 a6;
	struct sockaddr_in a4;
	int rc;

	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (family == AF_INET6) {
		memset(&a6, 0, sizeof(a6));
		a6.sin6_family = AF_INET6;
		a6.sin6_addr = in6addr_any;
		a6.sin6_port = htons(port);
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		rc = bind(fd, (struct sockaddr *)&a6, sizeof(a6));
	} else {
		memset(&a4, 0, sizeof(a4));
		a4.sin_family = AF_INET;
		a4.sin_addr.s_addr = htonl(INADDR_ANY);
		a4.sin_port = htons(port);
		rc = bind(fd, (struct sockaddr *)&a4, sizeof(a4));
	}
	/* A socket that does not listen and has SO_REUSEADDR lets any
	 * other with it bind the port: off, before the listening one goes. */
	if (rc == 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &zero, sizeof(zero)) == 0)
		return fd;
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

/*
 * The holding socket on PORT. FROM is the barrier's listening socket on
 * PORT, or -1: then one is made first, as the barrier's is, so that the
 * holding one never stands alone with SO_REUSEADDR. FROM is closed.
 * -1 with errno (EADDRINUSE: another program holds PORT).
 */
static int hold_port(int from, uint16_t port)
{
	int one = 1, fd = -1, saved;
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);

	if (from < 0 && (from = net_listen(port)) < 0)
		return -1;
	/* The barrier is over: only this user may share the port now. */
	if (setsockopt(from, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == 0 &&
	    getsockname(from, (struct sockaddr *)&a, &len) == 0)
		fd = bound_socket(a.ss_family, port);
	saved = errno;
	close(from);
	errno = saved;
	return fd;
}

/* The first bytes of the file PROGRAM names, found as execvp would. */
static size_t program_head(const char *program, dt_getenv_fn getenv,
			   void *arg, char *head, size_t len)
{
	const char *dirs = strchr(program, '/') ? NULL : getenv("PATH", arg);
	char path[PATH_MAX];
	ssize_t n = -1;
	int fd = -1;

	if (strchr(program, '/'))
		fd = open(program, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	/* Each folder of PATH, as the exec that follows searches. */
	while (dirs && *dirs && fd < 0) {
		size_t dlen = strcspn(dirs, ":");

		if (snprintf(path, sizeof(path), "%.*s/%s", (int)dlen, dirs,
			     program) < (int)sizeof(path) &&
		    access(path, X_OK) == 0)
			fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		dirs += dlen + (dirs[dlen] == ':');
	}
	if (fd >= 0) {
		n = read(fd, head, len);
		close(fd);
	}
	return n > 0 ? (size_t)n : 0;
}

/* Whether LIB is one of the libraries LD_PRELOAD (LIST) names. */
static bool preloads(const char *list, const char *lib)
{
	size_t len = strlen(lib);

	while (list && *list) {
		size_t word = strcspn(list, ": ");

		if (word == len && !strncmp(list, lib, len))
			return true;
		list += word + (list[word] != '\0');
	}
	return false;
}

/* The store's guard, preloaded into the program: LIB first in
 * LD_PRELOAD, unless it is there already. */
static int preload_guard(const char *lib, dt_getenv_fn getenv, void *arg,
			 struct dt_env *env)
{
	const char *now = dt_env_get(env, "LD_PRELOAD");

	if (!lib || !*lib || access(lib, R_OK) < 0)
		return 0;
	if (!now)
		now = getenv("LD_PRELOAD", arg);
	if (preloads(now, lib))
		return 0;
	return dt_env_prepend(env, "LD_PRELOAD", lib, now);
}

int dt_store_hold(int from, uint16_t port, bool hook, const char *guard_lib,
		  int argc, char *const argv[], dt_getenv_fn getenv,
		  void *arg, struct dt_env *env)
{
	char head[256], value[32];
	bool barrier = from >= 0;
	size_t got;
	int fd;

	if (from >= 0 && dt_socket_port(from) != port) {
		/* MASTER_PORT is the user's own, not the barrier's. */
		close(from);
		from = -1;
		barrier = false;
	}
	if (!port) {
		if (from >= 0)
			close(from);
		fd = -1;
	} else {
		fd = hold_port(from, port);
		if (fd < 0 && !barrier && errno == EADDRINUSE)
			return -2;
	}
	if (fd >= 0 && hook && argc > 0 && argv && argv[0]) {
		got = program_head(argv[0], getenv, arg, head, sizeof(head));
		if (dt_runs_python(argc, argv, got ? head : NULL, got) &&
		    fcntl(fd, F_SETFD, 0) == 0) {
			snprintf(value, sizeof(value), "%d:%u", fd, port);
			/* Only this step's barrier proves peers: a list the
			 * task inherited (a step inside another's) is not. */
			if (dt_env_put(env, DT_STORE_FD_ENV, value,
				       DT_ENV_SET) < 0 ||
			    (!dt_env_get(env, DT_STORE_PEERS_ENV) &&
			     dt_env_put(env, DT_STORE_PEERS_ENV, NULL,
					DT_ENV_UNSET) < 0) ||
			    preload_guard(guard_lib, getenv, arg, env) < 0)
				goto oom;
			return 1;
		}
	}
	if (fd >= 0)
		close(fd);
	return dt_env_put(env, DT_STORE_FD_ENV, NULL, DT_ENV_UNSET) < 0 ||
	       dt_env_put(env, DT_STORE_PEERS_ENV, NULL, DT_ENV_UNSET) < 0 ?
	       -1 : 0;
oom:
	close(fd);
	return -1;
}
