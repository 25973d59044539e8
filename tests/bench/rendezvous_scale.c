/*
 * Rank 0's start barrier at scale, on one machine: simulated nodes of
 * PER_NODE ranks each join rank 0 as the product's nodes do (one
 * connection per node, its leader's hello for all its ranks; rank 0's own
 * node's members over its Unix socket), against the product's own code
 * (common/rank0.c over common/rendezvous.c, linked, not copied), and, in
 * the same run, against a bare accept loop that reads one line from each
 * of the same connections and answers "OK" once all are in: the floor of
 * any TCP barrier.
 *
 *   rendezvous_scale dt|bare N [PER_NODE]    prints "SECONDS PEAK_RSS_KB"
 *
 * Rank 0 runs in a process of its own (this program, re-executed), so
 * that its peak RSS is its own. The simulated leaders connect to
 * 127.0.0.x, a few addresses, so that the connections fit the ephemeral
 * ports, with at most IN_FLIGHT handshakes under way at once (as a real
 * job's nodes arrive spread, and the listen backlog holds).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../peak_memory.h"
#include "../../common/net.h"
#include "../../common/node.h"
#include "../../common/rank0.h"

#define IN_FLIGHT 1024
#define PER_ADDRESS 2048
#define EVENTS 512

static const uint8_t secret[DT_SECRET_LEN] = { 42 };
#define STEP "1.0"
#define HOST "rank0"

static void die(const char *what)
{
	fprintf(stderr, "rendezvous_scale: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void raise_fd_limit(uint32_t n)
{
	struct rlimit rl = { (rlim_t)n + 8192, (rlim_t)n + 8192 };

	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		getrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_max < (rlim_t)n + 100) {
			fprintf(stderr, "rendezvous_scale: %u connections need "
				"an open-files limit above %llu: run as root\n",
				n, (unsigned long long)rl.rlim_max);
			exit(1);
		}
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* The bare floor: accept, read a line, answer all once all are in. */
static int serve_bare(int lfd, uint32_t world)
{
	int ep = epoll_create1(0), *fds = calloc(world, sizeof(int));
	uint32_t accepted = 0, lines = 0;
	struct epoll_event ev, evs[EVENTS];
	char buf[DT_RDV_LINE_MAX];

	if (ep < 0 || !fds)
		die("bare");
	fcntl(lfd, F_SETFL, O_NONBLOCK);
	ev.events = EPOLLIN;
	ev.data.u32 = UINT32_MAX;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	while (lines < world - 1) {
		int n = epoll_wait(ep, evs, EVENTS, 60000);

		if (n <= 0)
			return -1;
		for (int i = 0; i < n; i++) {
			uint32_t id = evs[i].data.u32;

			if (id == UINT32_MAX) {
				int fd;

				while ((fd = accept4(lfd, NULL, NULL,
						     SOCK_NONBLOCK)) >= 0) {
					fds[accepted] = fd;
					ev.events = EPOLLIN;
					ev.data.u32 = accepted++;
					epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
				}
				continue;
			}
			if (recv(fds[id], buf, sizeof(buf), 0) > 0) {
				lines++;
				epoll_ctl(ep, EPOLL_CTL_DEL, fds[id], NULL);
			}
		}
	}
	for (uint32_t i = 0; i < accepted; i++) {
		if (send(fds[i], "OK\n", 3, MSG_NOSIGNAL) < 0)
			return -1;
		close(fds[i]);
	}
	return 0;
}

static int serve(const char *mode, uint32_t world, uint32_t per_node)
{
	struct sockaddr_in6 a;
	socklen_t alen = sizeof(a);
	static const uint32_t zero;
	struct dt_rdv_hello self = { &zero, 1, world, HOST, false };
	struct dt_rdv_result res;
	struct rank0_params p;
	char err[1024], name[DT_RDV_NODE_SOCKET_LEN + 1];
	int lfd = net_listen(0), rc;

	raise_fd_limit(world / per_node);
	if (lfd < 0 || getsockname(lfd, (struct sockaddr *)&a, &alen) < 0)
		die("listen");
	memset(&p, 0, sizeof(p));
	p.node_fd = -1;
	if (per_node > 1 && strcmp(mode, "bare")) {
		dt_rdv_node_socket(secret, STEP, HOST, name);
		p.node_fd = node_listen(name, err, sizeof(err));
		if (p.node_fd < 0)
			die(err);
		p.members = per_node - 1;
	}
	/* Listening: the ranks may come. */
	printf("%u\n", ntohs(a.sin6_port));
	fflush(stdout);
	if (!strcmp(mode, "bare")) {
		rc = serve_bare(lfd, world / per_node);
	} else {
		p.nodes = world / per_node;
		p.self = &self;
		p.secret = secret;
		p.port = ntohs(a.sin6_port);
		p.deadline_ms = now_ms() + 120000;
		p.timeout_s = 120;
		rc = rank0_serve(lfd, &p, &res, err, sizeof(err));
		if (rc < 0)
			fprintf(stderr, "rendezvous_scale: rank 0: %s\n", err);
	}
	printf("%d %ld\n", rc, peak_memory_kb());
	return rc < 0;
}

enum sim_state { SIM_CONNECTING, SIM_ANSWER, SIM_DONE };

struct sim {
	int fd;
	uint8_t state;
	uint16_t len;
	uint8_t cnonce[DT_RDV_NONCE_LEN];
	char buf[160];
};

/* Rank 0's own node's members, at its Unix socket, before the rest. */
static void members_join(int ep, struct sim *sims, uint32_t first,
			 uint32_t per_node)
{
	char name[DT_RDV_NODE_SOCKET_LEN + 1], line[128];
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct epoll_event ev;

	dt_rdv_node_socket(secret, STEP, HOST, name);
	memcpy(a.sun_path + 1, name, strlen(name));
	for (uint32_t r = 1; r < per_node; r++) {
		struct sim *s = &sims[first + r - 1];
		int n;

		s->fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (s->fd < 0 || connect(s->fd, (struct sockaddr *)&a,
					 (socklen_t)(offsetof(struct sockaddr_un,
							      sun_path) + 1 +
						     strlen(name))) < 0)
			die("member");
		memcpy(s->cnonce, &r, sizeof(r));
		n = dt_rdv_member_line(r, false, s->cnonce, line,
				       sizeof(line));
		if (send(s->fd, line, (size_t)n, 0) != n)
			die("member hello");
		s->state = SIM_ANSWER;
		ev.events = EPOLLIN;
		ev.data.u32 = first + r - 1;
		epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
	}
}

/*
 * The simulated nodes (and rank 0's members); returns the seconds until
 * the last was released.
 */
static double drive(bool dt, uint32_t world, uint32_t per_node, uint16_t port)
{
	uint32_t nodes = world / per_node, n = nodes - 1;
	uint32_t members = dt ? per_node - 1 : 0;
	uint32_t started = 0, connecting = 0, done = 0;
	struct sim *sims = calloc(n + members, sizeof(*sims));
	uint32_t *ranks = calloc(per_node, sizeof(uint32_t));
	struct epoll_event ev, evs[EVENTS];
	int ep = epoll_create1(0);
	uint64_t t0;

	if (!sims || !ranks || ep < 0)
		die("drive");
	t0 = now_ms();
	if (members)
		members_join(ep, sims, n, per_node);
	while (done < n + members) {
		int k;

		/* More connections, as handshakes finish. */
		while (started < n && connecting < IN_FLIGHT) {
			struct sockaddr_in a = { .sin_family = AF_INET };
			struct sim *s = &sims[started];

			a.sin_port = htons(port);
			a.sin_addr.s_addr = htonl(0x7f000001 +
						  started / PER_ADDRESS);
			s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
			if (s->fd < 0)
				die("socket");
			if (connect(s->fd, (struct sockaddr *)&a, sizeof(a)) < 0 &&
			    errno != EINPROGRESS)
				die("connect");
			s->state = SIM_CONNECTING;
			ev.events = dt ? EPOLLIN : EPOLLOUT;
			ev.data.u32 = started++;
			epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
			connecting++;
		}
		k = epoll_wait(ep, evs, EVENTS, 30000);
		if (k <= 0) {
			fprintf(stderr, "rendezvous_scale: stuck at %u of %u\n",
				done, n + members);
			exit(1);
		}
		for (int i = 0; i < k; i++) {
			uint32_t id = evs[i].data.u32;
			struct sim *s = &sims[id];
			/* Node id + 1, ranks (id + 1) * PER_NODE on. */
			struct dt_rdv_hello h = { ranks, per_node, world,
						  "sim", false };
			struct dt_rdv_reply reply;
			char line[DT_RDV_LINE_MAX];
			ssize_t got;
			int len;

			if (s->state == SIM_CONNECTING && !dt) {
				/* The floor: a line at once. */
				if (send(s->fd, "HELLO\n", 6, MSG_NOSIGNAL) != 6)
					die("send");
				s->state = SIM_ANSWER;
				connecting--;
				ev.events = EPOLLIN;
				ev.data.u32 = id;
				epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &ev);
				continue;
			}
			got = recv(s->fd, s->buf + s->len,
				   sizeof(s->buf) - 1 - s->len, 0);
			if (got < 0 && errno == EAGAIN)
				continue;
			if (got <= 0) {
				fprintf(stderr, "rendezvous_scale: node %u was "
					"dropped\n", id + 1);
				exit(1);
			}
			s->len = (uint16_t)(s->len + got);
			s->buf[s->len] = '\0';
			if (!strchr(s->buf, '\n'))
				continue;
			*strchr(s->buf, '\n') = '\0';
			s->len = 0;
			if (s->state == SIM_CONNECTING) {
				for (uint32_t r = 0; r < per_node; r++)
					ranks[r] = (id + 1) * per_node + r;
				memcpy(s->cnonce, &id, sizeof(id));
				/* As a leader does: is this rank 0? */
				if (dt_rdv_challenge_ok(secret, s->buf,
							port) < 0)
					die("challenge");
				len = dt_rdv_hello_line(secret, s->cnonce,
							s->buf, &h, line,
							sizeof(line));
				if (len < 0 || send(s->fd, line, (size_t)len,
						    MSG_NOSIGNAL) != len)
					die("hello");
				s->state = SIM_ANSWER;
				connecting--;
				continue;
			}
			if (dt && (dt_rdv_read_answer(secret, s->cnonce,
						      s->buf, &reply) < 0 ||
				   !reply.ok)) {
				fprintf(stderr, "rendezvous_scale: node %u: "
					"not released: '%s'\n", id + 1,
					s->buf);
				exit(1);
			}
			s->state = SIM_DONE;
			done++;
			{
				/* No TIME_WAIT left for the next run. */
				struct linger lg = { 1, 0 };

				setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg,
					   sizeof(lg));
			}
			close(s->fd);
		}
	}
	free(sims);
	free(ranks);
	close(ep);
	return (double)(now_ms() - t0) / 1000.0;
}

int main(int argc, char **argv)
{
	uint32_t world, per_node;
	int out[2], status;
	unsigned port;
	long rss;
	double secs;
	char n_arg[16], per_arg[16];
	FILE *from;
	pid_t pid;
	int rc;

	if (argc == 5 && !strcmp(argv[1], "serve"))
		return serve(argv[2], (uint32_t)strtoul(argv[3], NULL, 10),
			     (uint32_t)strtoul(argv[4], NULL, 10));
	if (argc < 3 || argc > 4 ||
	    (strcmp(argv[1], "dt") && strcmp(argv[1], "bare"))) {
		fprintf(stderr, "usage: rendezvous_scale dt|bare N "
			"[PER_NODE]\n");
		return 2;
	}
	world = (uint32_t)strtoul(argv[2], NULL, 10);
	per_node = argc == 4 ? (uint32_t)strtoul(argv[3], NULL, 10) : 8;
	if (per_node < 1 || world < 2 * per_node || world % per_node) {
		fprintf(stderr, "rendezvous_scale: N must be a multiple of "
			"PER_NODE, two nodes at least\n");
		return 2;
	}
	raise_fd_limit(world / per_node);
	signal(SIGPIPE, SIG_IGN);
	snprintf(n_arg, sizeof(n_arg), "%u", world);
	snprintf(per_arg, sizeof(per_arg), "%u", per_node);
	if (pipe(out) < 0)
		die("pipe");
	pid = fork();
	if (pid == 0) {
		dup2(out[1], STDOUT_FILENO);
		close(out[0]);
		execl("/proc/self/exe", argv[0], "serve", argv[1], n_arg,
		      per_arg, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	from = fdopen(out[0], "r");
	if (!from || fscanf(from, "%u", &port) != 1)
		die("rank 0 did not start");
	secs = drive(!strcmp(argv[1], "dt"), world, per_node, (uint16_t)port);
	if (fscanf(from, "%d %ld", &rc, &rss) != 2 || rc != 0)
		die("rank 0 failed");
	waitpid(pid, &status, 0);
	printf("%.3f %ld\n", secs, rss);
	return 0;
}
