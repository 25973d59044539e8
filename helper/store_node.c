/*
 * Part of dist_train_worker.so: the step's store behind the node tree
 * (common/store_tree.h), started by the Python hook in each node's local
 * rank 0 through ctypes. It runs in a thread of its own, not Python's:
 * torch 1.13's store calls hold Python's lock while they wait, which would
 * stop a Python thread that had to answer them.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../common/store_tree.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int dist_train_store_start(int server_fd, const char *name,
				  const char *host, const char *port,
				  unsigned timeout_ms, char *err, size_t errlen);

static struct dt_store_loop *store_loop;
static volatile int store_stop;

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* HOST:PORT, tried until it answers or TIMEOUT_MS is up: the server may
 * start after this node's relay, as torch's may after its clients. */
static int connect_upstream(const char *host, const char *port,
			    unsigned timeout_ms, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL, *a;
	uint64_t deadline = mono_ms() + timeout_ms;
	unsigned pause_ms = 2;
	int rc, fd = -1, why = 0;

	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		/* message: the caller names the fix (helper/python/sitecustomize.py) */
		snprintf(err, errlen, "cannot resolve %s: %s", host,
			 gai_strerror(rc));
		return -1;
	}
	for (;;) {
		for (a = ai; a; a = a->ai_next) {
			fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
				    a->ai_protocol);
			if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) == 0)
				goto done;
			why = errno;
			if (fd >= 0)
				close(fd);
			fd = -1;
		}
		if (mono_ms() + pause_ms >= deadline)
			break;
		usleep(pause_ms * 1000);
		pause_ms = pause_ms < 200 ? pause_ms * 2 : 200;
	}
	/* message: the caller names the fix (helper/python/sitecustomize.py) */
	snprintf(err, errlen, "the step's store at %s:%s did not answer in "
		 "%u s (%s)", host, port, timeout_ms / 1000, strerror(why));
done:
	freeaddrinfo(ai);
	return fd;
}

static void *run_store(void *arg)
{
	char err[256] = "";

	(void)arg;
	if (dt_store_loop_run(store_loop, &store_stop, err, sizeof(err)) < 0 ||
	    err[0])
		dprintf(STDERR_FILENO, "dist-train: this node's store relay "
			"stopped: %s; the step's ranks on this node fail their "
			"next store call: rerun with --dist-train=store=torch "
			"to use torch's own store\n", err);
	return NULL;
}

/*
 * Start this node's relay, on the abstract Unix socket NAME, towards the
 * step's store at HOST:PORT; with SERVER_FD >= 0 (rank 0: the held port's
 * socket, bound), serve the store on it first. Once: a second call says
 * so. 0, or -1 with why in ERR.
 */
EXPORT int dist_train_store_start(int server_fd, const char *name,
				  const char *host, const char *port,
				  unsigned timeout_ms, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	int unix_fd = -1, up_fd = -1;
	pthread_t thread;
	pthread_attr_t attr;

	if (store_loop) {
		/* message: the caller names the fix (helper/python/sitecustomize.py) */
		snprintf(err, errlen, "this process runs its node's relay "
			 "already");
		return -1;
	}
	if (len + 1 > sizeof(sun.sun_path)) {
		/* message: the caller names the fix (helper/python/sitecustomize.py) */
		snprintf(err, errlen, "the relay's name is too long");
		return -1;
	}
	store_loop = dt_store_loop_new();
	if (!store_loop) {
		/* message: the caller names the fix (helper/python/sitecustomize.py) */
		snprintf(err, errlen, "out of memory or descriptors");
		return -1;
	}
	if (server_fd >= 0 && dt_store_loop_serve(store_loop, server_fd) < 0) {
		/* message: the caller names the fix (helper/python/sitecustomize.py) */
		snprintf(err, errlen, "cannot serve on the step's port: %s",
			 strerror(errno));
		goto fail;
	}
	/* Abstract (a leading NUL): nothing left behind in a folder. Bound
	 * before the step's store is reached, so that the node's ranks wait
	 * in its backlog for that, not for the name to appear. */
	memcpy(sun.sun_path + 1, name, len);
	unix_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (unix_fd < 0 ||
	    bind(unix_fd, (struct sockaddr *)&sun,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len))
	    < 0 || listen(unix_fd, 4096) < 0) {
		/* message: the caller names the fix (helper/python/sitecustomize.py) */
		snprintf(err, errlen, "cannot listen for this node's ranks: "
			 "%s", strerror(errno));
		goto fail;
	}
	up_fd = connect_upstream(host, port, timeout_ms, err, errlen);
	if (up_fd < 0)
		goto fail;
	if (dt_store_loop_relay(store_loop, unix_fd, up_fd) < 0) {
		unix_fd = up_fd = -1;	/* closed there */
		/* message: the caller names the fix (helper/python/sitecustomize.py) */
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	unix_fd = up_fd = -1;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&thread, &attr, run_store, NULL)) {
		pthread_attr_destroy(&attr);
		/* message: the caller names the fix (helper/python/sitecustomize.py) */
		snprintf(err, errlen, "cannot start its thread");
		goto fail;
	}
	pthread_attr_destroy(&attr);
	return 0;
fail:
	if (unix_fd >= 0)
		close(unix_fd);
	if (up_fd >= 0)
		close(up_fd);
	dt_store_loop_free(store_loop);
	store_loop = NULL;
	return -1;
}
