/*
 * Simulated ranks against a step's store (tests/bench/store-scale.sh):
 * N ranks, PER_NODE to a node, each node with a loopback address of its
 * own, each rank doing to the store what torch's env:// start and its
 * first process group do (doc/performance.md, "The store behind the node
 * tree", has the recordings these follow).
 *
 *   store_scale torch PORT N PER_NODE V    torch's TCPStore on PORT
 *   store_scale tree N PER_NODE V          the node tree, run here:
 *                                          a server process, a process
 *                                          for all the relays
 *
 * V is torch's generation: 1 for 1.13 (its wire protocol, and the store
 * barrier init_process_group ends with), 2 for 2.x. Prints the seconds
 * from the first connection to the last rank holding the group's id,
 * and (tree) the server's peak resident memory in kB.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../common/store_tree.h"
#include "../peak_memory.h"

#define INIT_KEY "init/"
#define BARRIER_KEY "/default_pg/store_based_barrier_key:1"
#define SEQ_KEY "/default_pg/0/SEQ_NUM_STORE_KEY"
#define UID_KEY "/default_pg/0//cuda//0"
#define UID_LEN 128	/* ncclUniqueId */
#define POLL_MS 10	/* torch's pause between polls */
#define WHEEL 4096
#define BUF 512

enum step { CONNECT, HELLO, ADD_INIT, MASTER_POLL, BARRIER_ADD,
	    BARRIER_POLL, SEQ, UID, DONE };

struct rank {
	int fd;
	uint32_t id;
	uint8_t step, sub;	/* sub: a get's wait, then its get */
	bool lenval;		/* torch: a length, then that many bytes */
	bool sleeping;
	uint16_t have;
	uint32_t want;		/* bytes of the answer; 0: a frame's header */
	struct rank *next_timer;
	uint8_t buf[BUF];
};

static struct {
	bool tree;
	int version;
	uint32_t n, per_node;
	uint32_t lo, hi;	/* this process's ranks */
	uint16_t port;
	int epfd;
	struct rank *ranks;
	uint32_t done;
	struct rank *wheel[WHEEL];
	uint64_t now;
	char relay_prefix[64];
} sim;

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "store_scale: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Node K's loopback address: 127.1.0.0 and on. */
static struct sockaddr_in node_addr(uint32_t node, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };

	a.sin_addr.s_addr = htonl(0x7f010000u + node);
	return a;
}

/* ---- torch's wire protocol (c10d TCPStore), as recorded ---- */

/* Opcodes: 1.13 has no VALIDATE, so each is one lower there. */
static uint8_t op(uint8_t v2)
{
	return sim.version == 1 ? (uint8_t)(v2 - 1) : v2;
}

enum { T_VALIDATE = 0, T_SET = 1, T_GET = 3, T_ADD = 4, T_WAIT = 6,
       T_PING = 13 };

static size_t put_u64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);	/* torch sends host order: little-endian */
	return 8;
}

static size_t put_key(uint8_t *p, const char *key)
{
	size_t len = strlen(key);

	put_u64(p, len);
	memcpy(p + 8, key, len);
	return 8 + len;
}

static void send_all(struct rank *r, const uint8_t *p, size_t len)
{
	/* Small: the socket's buffer takes it whole. */
	if (send(r->fd, p, len, MSG_NOSIGNAL) != (ssize_t)len)
		die("send");
}

/* ---- the node tree's frames (common/store_tree.h) ---- */

static size_t put_u32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
	return 4;
}

static size_t put_str(uint8_t *p, const void *s, uint32_t len)
{
	put_u32(p, len);
	memcpy(p + 4, s, len);
	return 4 + len;
}

static void tree_send(struct rank *r, uint8_t kind, const uint8_t *body,
		      size_t len)
{
	uint8_t f[BUF];

	put_u32(f, (uint32_t)(len + 5));
	put_u32(f + 4, ++r->sub);
	f[8] = kind;
	memcpy(f + 9, body, len);
	r->have = 0;
	r->want = 0;
	send_all(r, f, len + 9);
}

/* ---- each rank's script ---- */

static void expect(struct rank *r, uint32_t bytes)
{
	r->have = 0;
	r->want = bytes;
	r->lenval = false;
}

static void request_add(struct rank *r, const char *key, int64_t amount)
{
	uint8_t b[BUF];
	size_t n = 0;

	if (sim.tree) {
		n += put_u64(b, (uint64_t)amount);
		n += put_str(b + n, key, (uint32_t)strlen(key));
		tree_send(r, DT_STORE_ADD, b, n);
		return;
	}
	b[n++] = op(T_ADD);
	n += put_key(b + n, key);
	n += put_u64(b + n, (uint64_t)amount);
	expect(r, 8);
	send_all(r, b, n);
}

/* torch's client gets a key with a wait, then the get; the tree's, one
 * get that waits. */
static void request_get(struct rank *r, const char *key, bool wait_first)
{
	uint8_t b[BUF];
	size_t n = 0;

	if (sim.tree) {
		n += put_u32(b, 300000);
		n += put_str(b + n, key, (uint32_t)strlen(key));
		tree_send(r, DT_STORE_GET, b, n);
		return;
	}
	if (wait_first) {
		b[n++] = op(T_WAIT);
		n += put_u64(b + n, 1);
		n += put_key(b + n, key);
		expect(r, 1);
	} else {
		b[n++] = op(T_GET);
		n += put_key(b + n, key);
		expect(r, 8);
		r->lenval = true;
	}
	send_all(r, b, n);
}

static void request_set(struct rank *r, const char *key, uint32_t vlen)
{
	uint8_t b[BUF], value[UID_LEN];
	size_t n = 0;

	memset(value, 0xa5, sizeof(value));
	if (sim.tree) {
		n += put_str(b, key, (uint32_t)strlen(key));
		n += put_str(b + n, value, vlen);
		tree_send(r, DT_STORE_SET, b, n);
		return;
	}
	b[n++] = op(T_SET);
	n += put_key(b + n, key);
	n += put_u64(b + n, vlen);
	memcpy(b + n, value, vlen);
	send_all(r, b, n + vlen);
}

static void sleep_poll(struct rank *r)
{
	uint64_t slot = (sim.now + POLL_MS) % WHEEL;

	r->sleeping = true;
	r->next_timer = sim.wheel[slot];
	sim.wheel[slot] = r;
}

static void enter(struct rank *r, uint8_t step);

/* A get: its wait, then the get (torch), or the get alone (tree). */
static void get_then(struct rank *r, const char *key)
{
	r->sub = 0;
	request_get(r, key, !sim.tree);
}

static void enter(struct rank *r, uint8_t step)
{
	uint8_t b[32];
	size_t n = 0;

	r->step = step;
	switch (step) {
	case HELLO:
		if (sim.tree || sim.version == 1) {
			enter(r, sim.tree ? (sim.version == 1 ? BARRIER_ADD :
					     UID) : ADD_INIT);
			return;
		}
		b[n++] = T_VALIDATE;
		n += put_u32(b + n, 0x3C85F7CEu);
		b[n++] = T_PING;
		n += put_u32(b + n, r->id);
		expect(r, 4);
		send_all(r, b, n);
		return;
	case ADD_INIT:
		request_add(r, INIT_KEY, 1);
		return;
	case MASTER_POLL:
		get_then(r, INIT_KEY);
		return;
	case BARRIER_ADD:
		request_add(r, BARRIER_KEY, 1);
		return;
	case BARRIER_POLL:
		request_add(r, BARRIER_KEY, 0);
		return;
	case SEQ:
	case UID:
		if (r->id == 0) {
			request_set(r, step == SEQ ? SEQ_KEY : UID_KEY,
				    step == SEQ ? 8 : UID_LEN);
			if (!sim.tree)	/* torch's set has no answer */
				enter(r, step == SEQ ? UID : DONE);
			return;
		}
		get_then(r, step == SEQ ? SEQ_KEY : UID_KEY);
		return;
	case DONE:
		sim.done++;
		return;
	}
}

static int64_t answer_int(struct rank *r)
{
	int64_t v;
	char num[32];

	if (sim.tree) {
		memcpy(&v, r->buf + 9, 8);
		return v;
	}
	if (r->step == MASTER_POLL) {	/* a value: the count as text */
		size_t len = r->have - 8 < 31 ? r->have - 8 : 31;

		memcpy(num, r->buf + 8, len);
		num[len] = '\0';
		return atoll(num);
	}
	memcpy(&v, r->buf, 8);
	return v;
}

/* R's answer is whole: the next request, or a poll again later. */
static void answered(struct rank *r)
{
	if (!sim.tree && r->sub == 0 && !r->lenval &&
	    (r->step == MASTER_POLL || r->step == SEQ || r->step == UID)) {
		r->sub = 1;	/* waited: now the get */
		request_get(r, r->step == MASTER_POLL ? INIT_KEY :
			    r->step == SEQ ? SEQ_KEY : UID_KEY, false);
		return;
	}
	switch (r->step) {
	case HELLO:
		enter(r, ADD_INIT);
		break;
	case ADD_INIT:
		if (r->id == 0)
			enter(r, MASTER_POLL);
		else
			enter(r, sim.version == 1 ? BARRIER_ADD : UID);
		break;
	case MASTER_POLL:
		if (answer_int(r) >= sim.n)
			enter(r, sim.version == 1 ? BARRIER_ADD : UID);
		else
			sleep_poll(r);
		break;
	case BARRIER_ADD:
	case BARRIER_POLL:
		if (answer_int(r) >= sim.n)
			enter(r, SEQ);
		else
			sleep_poll(r);
		break;
	case SEQ:
		enter(r, UID);
		break;
	case UID:
		enter(r, DONE);
		break;
	}
}

static void readable(struct rank *r)
{
	while (r->step != DONE && !r->sleeping) {
		ssize_t got;

		if (sim.tree && !r->want && r->have >= 4) {
			uint32_t len;

			memcpy(&len, r->buf, 4);
			r->want = len + 4;
		}
		if (r->lenval && r->want == 8 && r->have >= 8) {
			uint64_t len;

			memcpy(&len, r->buf, 8);
			r->want = 8 + (uint32_t)len;
		}
		if (r->want > BUF)
			die("answer too long");
		if (r->want && r->have >= r->want) {
			answered(r);
			continue;
		}
		got = read(r->fd, r->buf + r->have,
			   (r->want ? r->want : 9) - r->have);
		if (got <= 0) {
			if (got < 0 && errno == EAGAIN)
				return;
			fprintf(stderr, "store_scale: rank %u lost its store "
				"(step %u): %s\n", r->id, r->step,
				got ? strerror(errno) : "closed");
			exit(1);
		}
		r->have += (uint16_t)got;
	}
}

static int nonblocking(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void watch(int fd, uint32_t events, uint32_t id)
{
	struct epoll_event ev = { .events = events, .data.u32 = id };

	if (epoll_ctl(sim.epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl");
}

/* Rank R's connection: to torch's store from its node's address, or to
 * its node's relay. */
static void start_rank(struct rank *r)
{
	uint32_t node = r->id / sim.per_node;
	int rc;

	if (sim.tree) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		int len = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1,
				   "%s%u", sim.relay_prefix, node);

		r->fd = socket(AF_UNIX, SOCK_STREAM, 0);
		while ((rc = connect(r->fd, (struct sockaddr *)&a,
				     (socklen_t)(sizeof(sa_family_t) + 1 +
						 len))) < 0 &&
		       errno == ECONNREFUSED)
			usleep(1000);	/* its relay not up yet */
	} else {
		/* From 127.0.0.1, not the node's address: torch 2.x's server
		 * stalls 5 s once some 60 connections come from 127.1.x.y
		 * addresses (a lookup of each peer's name, likely; real
		 * nodes' names resolve), never from 127.0.0.1. One address
		 * gives each connection a port of its own up to about
		 * 28,000, more than torch's store can hold here (its open
		 * files). */
		struct sockaddr_in dst = { .sin_family = AF_INET,
					   .sin_port = htons(sim.port) };

		(void)node;
		dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		r->fd = socket(AF_INET, SOCK_STREAM, 0);
		if (r->fd < 0)
			die("socket");
		nonblocking(r->fd);
		rc = connect(r->fd, (struct sockaddr *)&dst, sizeof(dst));
		if (rc < 0 && errno == EINPROGRESS) {
			watch(r->fd, EPOLLOUT, r->id - sim.lo);
			return;
		}
	}
	if (rc < 0)
		die("connect");
	nonblocking(r->fd);
	watch(r->fd, EPOLLIN, r->id - sim.lo);
	enter(r, HELLO);
	readable(r);
}

static void connected(struct rank *r)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u32 = r->id - sim.lo };
	int err = 0;
	socklen_t len = sizeof(err);

	getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &err, &len);
	if (err) {
		errno = err;
		die("connect");
	}
	if (epoll_ctl(sim.epfd, EPOLL_CTL_MOD, r->fd, &ev) < 0)
		die("epoll_ctl");
	enter(r, HELLO);
	readable(r);
}

static long peak_kb(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	return peak_memory_kb_at(path);
}

/* The tree's server, in a process of its own, on PORT; it says when it
 * listens by closing READY. */
static pid_t start_server(int ready)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(sim.port) };
	pid_t pid = fork();
	struct dt_store_loop *loop;
	volatile int stop = 0;
	char err[256];
	int fd, one = 1;

	if (pid)
		return pid;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	loop = dt_store_loop_new();
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    !loop || dt_store_loop_serve(loop, fd) < 0)
		die("the tree's server");
	close(ready);
	dt_store_loop_run(loop, &stop, err, sizeof(err));
	_exit(0);
}

/* Every node's relay, in one process, one loop: each connects up from
 * its node's address, then listens. */
static pid_t start_relays(uint32_t first, uint32_t end)
{
	uint32_t k;
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_port = htons(sim.port) };
	pid_t pid = fork();
	struct dt_store_loop *loop;
	volatile int stop = 0;
	char err[256];

	if (pid)
		return pid;
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	loop = dt_store_loop_new();
	for (k = first; loop && k < end; k++) {
		struct sockaddr_in src = node_addr(k, 0);
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		int len = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1,
				   "%s%u", sim.relay_prefix, k);
		int up = socket(AF_INET, SOCK_STREAM, 0);
		int un = socket(AF_UNIX, SOCK_STREAM, 0);

		if (up < 0 || un < 0 ||
		    bind(up, (struct sockaddr *)&src, sizeof(src)) < 0 ||
		    connect(up, (struct sockaddr *)&dst, sizeof(dst)) < 0 ||
		    bind(un, (struct sockaddr *)&a,
			 (socklen_t)(sizeof(sa_family_t) + 1 + len)) < 0 ||
		    listen(un, 64) < 0 ||
		    dt_store_loop_relay(loop, un, up) < 0)
			die("a relay");
	}
	dt_store_loop_run(loop, &stop, err, sizeof(err));
	_exit(0);
}

/* Ranks [LO, HI), in a process of their own: when the last has the
 * group's id, the time. */
static double run_ranks(uint32_t lo, uint32_t hi)
{
	struct epoll_event events[1024];
	uint64_t last;
	uint32_t i;

	sim.lo = lo;
	sim.hi = hi;
	sim.ranks = calloc(hi - lo, sizeof(*sim.ranks));
	sim.epfd = epoll_create1(0);
	if (!sim.ranks || sim.epfd < 0)
		die("setup");
	sim.now = last = mono_ms();
	for (i = lo; i < hi; i++) {
		sim.ranks[i - lo].id = i;
		start_rank(&sim.ranks[i - lo]);
	}
	while (sim.done < hi - lo) {
		int n = epoll_wait(sim.epfd, events, 1024, 1), k;

		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (k = 0; k < n; k++) {
			struct rank *r = &sim.ranks[events[k].data.u32];

			if (events[k].events & EPOLLOUT)
				connected(r);
			else
				readable(r);
		}
		sim.now = mono_ms();
		for (; last < sim.now; last++) {
			struct rank *r = sim.wheel[(last + 1) % WHEEL], *next;

			sim.wheel[(last + 1) % WHEEL] = NULL;
			for (; r; r = next) {
				next = r->next_timer;
				r->next_timer = NULL;
				r->sleeping = false;
				enter(r, r->step == BARRIER_ADD ? BARRIER_POLL :
				      r->step);
				readable(r);
			}
		}
	}
	return mono_s();
}

/* The open files a process may have here: ranks and relays are spread
 * over processes to fit (a process may not raise its hard limit without
 * CAP_SYS_RESOURCE). */
static uint32_t files_per_process(void)
{
	struct rlimit rl;

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	return rl.rlim_cur > 2048 + 1024 ? (uint32_t)(rl.rlim_cur - 1024) :
	       2048;
}

int main(int argc, char **argv)
{
	uint32_t nodes, per_proc, nodes_per_proc, k;
	pid_t server = 0, *relays = NULL;
	size_t nrelays = 0;
	double t0, end = 0;
	int a = 2, out[2];
	long kb = 0;

	if (argc < 5 || (strcmp(argv[1], "torch") && strcmp(argv[1], "tree")))
		goto usage;
	sim.tree = !strcmp(argv[1], "tree");
	if (!sim.tree) {
		if (argc != 6)
			goto usage;
		sim.port = (uint16_t)atoi(argv[a++]);
	} else if (argc != 5) {
		goto usage;
	}
	sim.n = (uint32_t)atoi(argv[a++]);
	sim.per_node = (uint32_t)atoi(argv[a++]);
	sim.version = atoi(argv[a]);
	if (!sim.n || !sim.per_node || sim.version < 1 || sim.version > 2)
		goto usage;
	signal(SIGPIPE, SIG_IGN);
	nodes = (sim.n + sim.per_node - 1) / sim.per_node;
	per_proc = files_per_process();
	if (sim.tree) {
		int ready[2];
		char c;

		snprintf(sim.relay_prefix, sizeof(sim.relay_prefix),
			 "store-scale-%d-", (int)getpid());
		sim.port = (uint16_t)(20000 + getpid() % 20000);
		if (pipe(ready) < 0)
			die("pipe");
		server = start_server(ready[1]);
		close(ready[1]);
		if (read(ready[0], &c, 1) < 0)
			die("read");
		close(ready[0]);
	}
	if (pipe(out) < 0)
		die("pipe");
	t0 = mono_s();
	if (sim.tree) {
		/* A relay holds its node's ranks, its listener and one up. */
		nodes_per_proc = per_proc / (sim.per_node + 2);
		relays = calloc(nodes / nodes_per_proc + 1, sizeof(*relays));
		for (k = 0; relays && k < nodes; k += nodes_per_proc)
			relays[nrelays++] = start_relays(
				k, k + nodes_per_proc < nodes ?
				k + nodes_per_proc : nodes);
	}
	nodes_per_proc = per_proc / sim.per_node;
	for (k = 0; k < nodes; k += nodes_per_proc) {
		uint32_t lo = k * sim.per_node;
		uint32_t hi = (k + nodes_per_proc) * sim.per_node;

		if (fork() == 0) {
			double t = run_ranks(lo, hi < sim.n ? hi : sim.n);

			if (write(out[1], &t, sizeof(t)) != sizeof(t))
				_exit(1);
			_exit(0);
		}
	}
	close(out[1]);
	for (k = 0; k < nodes; k += nodes_per_proc) {
		double t;

		if (read(out[0], &t, sizeof(t)) != sizeof(t)) {
			fprintf(stderr, "store_scale: a process of ranks "
				"failed\n");
			return 1;
		}
		end = t > end ? t : end;
	}
	if (sim.tree) {
		kb = peak_kb(server);
		kill(server, SIGKILL);
		while (nrelays > 0)
			kill(relays[--nrelays], SIGKILL);
		while (wait(NULL) > 0 || errno == EINTR)
			;
	}
	printf("%.3f %ld\n", end - t0, kb);
	return 0;
usage:
	fprintf(stderr, "usage: store_scale torch PORT N PER_NODE 1|2\n"
		"       store_scale tree N PER_NODE 1|2\n");
	return 2;
}
