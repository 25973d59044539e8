#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/net.h"
#include "node.h"
#include "rank0.h"
#include "store_guard.h"

/* Descriptors rank 0 needs besides its connections. */
#define OTHER_FDS 64
#define EVENTS 256
#define ACCEPTS_PER_WAKEUP 512
/* The fewest unproven connections rank 0 keeps, whatever the limits. */
#define MIN_PENDING 64
/* What rank 0 says when its event loop fails. */
#define EPOLL_FAILED \
	"rank 0's event loop failed (epoll: %s): rerun the step, and " \
	"report it to your administrator if it recurs"

/* What an epoll event is about: the kind, and an index. */
enum tag { TAG_CONN, TAG_LISTEN, TAG_NODE_LISTEN, TAG_MEMBER };
#define TAG(kind, id) ((uint64_t)(kind) << 32 | (uint32_t)(id))

struct loop {
	struct dt_rdv_server *srv;
	const struct rank0_params *p;
	int epfd;
	int *fds;		/* by connection id */
	uint32_t slots;
	/* Accepted per wakeup: half the bound on the unproven at most, so
	 * that one wakeup's flood cannot evict a leader that came before it
	 * ahead of its hello. */
	uint32_t accept_batch;
	struct node_member *members;	/* of rank 0's node */
	uint32_t nmembers;
};

/*
 * One descriptor per node and member, and a bound on the unproven: raise
 * the soft limit to what that needs. A hard limit too low for the step
 * and MIN_PENDING strangers is an error; one too low for the bound lowers
 * the bound.
 */
static int raise_fd_limit(uint32_t conns, uint32_t *max_pending, char *err,
			  size_t errlen)
{
	struct rlimit rl;
	rlim_t need_step = (rlim_t)conns + OTHER_FDS;
	rlim_t need = need_step + *max_pending;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 0;
	if (rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY &&
	    rl.rlim_max < need_step + MIN_PENDING) {
		snprintf(err, errlen, "rank 0 needs a connection from each of "
			 "the step's nodes and its own node's ranks (%u), room "
			 "for %u connections not yet proven and %u other files, "
			 "but this node lets a process open only %llu files "
			 "(ulimit -Hn): ask your administrator to raise the hard "
			 "limit (slurmd's LimitNOFILE) to at least %llu", conns,
			 MIN_PENDING, OTHER_FDS,
			 (unsigned long long)rl.rlim_max,
			 (unsigned long long)(need_step + MIN_PENDING));
		return -1;
	}
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
		*max_pending = (uint32_t)(rl.rlim_max - need_step);
		need = rl.rlim_max;
	}
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		snprintf(err, errlen, "cannot raise the open-files limit to "
			 "%llu for %u connections (%s): raise it with ulimit "
			 "-n before srun, or ask your administrator to raise "
			 "the hard limit (slurmd's LimitNOFILE)",
			 (unsigned long long)need, conns, strerror(errno));
		return -1;
	}
	return 0;
}

static void conn_close(struct loop *l, uint32_t id)
{
	if (id < l->slots && l->fds[id] >= 0) {
		close(l->fds[id]);
		l->fds[id] = -1;
	}
}

/* Take what waits on the listening socket, a bounded number at a time. */
static void accept_some(struct loop *l, uint64_t now)
{
	char line[DT_RDV_LINE_MAX];

	for (uint32_t i = 0; i < l->accept_batch; i++) {
		struct epoll_event ev;
		uint32_t id, evicted;
		int fd, n;

		fd = accept4(l->fds[l->slots], NULL, NULL,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			/* Out of descriptors: the oldest stranger goes. */
			if (errno == EMFILE || errno == ENFILE) {
				uint32_t old = dt_rdv_expired(l->srv,
							      UINT64_MAX);

				if (old != DT_RDV_NONE) {
					conn_close(l, old);
					continue;
				}
			}
			return;
		}
		n = dt_rdv_accept(l->srv, now, &id, &evicted, line,
				  sizeof(line));
		if (evicted != DT_RDV_NONE)
			conn_close(l, evicted);
		l->fds[id] = fd;
		ev.events = EPOLLIN;
		ev.data.u64 = TAG(TAG_CONN, id);
		if (n < 0 || send(fd, line, (size_t)n,
				  MSG_NOSIGNAL | MSG_DONTWAIT) != n ||
		    epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			dt_rdv_closed(l->srv, id);
			conn_close(l, id);
		}
	}
}

/* Something arrived on connection ID, or it hung up. */
static void conn_readable(struct loop *l, uint32_t id)
{
	char data[DT_RDV_LINE_MAX], out[DT_RDV_LINE_MAX];
	size_t out_len;
	ssize_t n;

	if (id >= l->slots || l->fds[id] < 0)
		return;
	n = recv(l->fds[id], data, sizeof(data), 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* A rank that left before the answer is missing again. */
		dt_rdv_closed(l->srv, id);
		conn_close(l, id);
		return;
	}
	switch (dt_rdv_input(l->srv, id, data, (size_t)n, out, sizeof(out),
			     &out_len)) {
	case DT_RDV_WAIT:
	case DT_RDV_JOINED:
		return;
	case DT_RDV_REFUSE:
		net_send_all(l->fds[id], out, out_len, now_ms() + 2000);
		/* fall through */
	case DT_RDV_DROP:
		conn_close(l, id);
		return;
	}
}

/* A member of rank 0's node knocks: only the step's user gets in. */
static void member_arrives(struct loop *l)
{
	struct epoll_event ev;
	int fd;

	while ((fd = node_accept(l->p->node_fd)) >= 0 || errno == EPERM) {
		struct node_member *m;

		if (fd < 0)
			continue;
		if (l->nmembers == l->p->members) {
			close(fd);	/* more than the node has */
			continue;
		}
		m = &l->members[l->nmembers];
		memset(m, 0, sizeof(*m));
		m->fd = fd;
		ev.events = EPOLLIN;
		ev.data.u64 = TAG(TAG_MEMBER, l->nmembers);
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			continue;
		}
		l->nmembers++;
	}
}

static void member_readable(struct loop *l, uint32_t i)
{
	struct node_member *m = &l->members[i];
	struct dt_rdv_reply refusal;
	bool was_joined = m->joined;
	int got;

	if (i >= l->nmembers || m->fd < 0)
		return;
	got = node_member_read(m);
	if (got == 0)
		return;
	if (got > 0) {
		memset(&refusal, 0, sizeof(refusal));
		if (node_member_check(m, l->p->views, refusal.message,
				      sizeof(refusal.message)) == 0 &&
		    dt_rdv_join_member(l->srv, m->rank, m->nccl_ok,
				       l->p->self->host, refusal.message,
				       sizeof(refusal.message)) == 0) {
			m->joined = true;
			return;
		}
		node_member_answer(m, l->p->secret, &refusal, NULL);
		return;
	}
	/* Gone before the answer: missing again. */
	if (was_joined)
		dt_rdv_leave_member(l->srv, m->rank, m->nccl_ok);
	m->joined = false;
	close(m->fd);
	m->fd = -1;
}

/* Tell every rank that proved itself: REPLY. */
static void answer_all(struct loop *l, const struct dt_rdv_reply *reply)
{
	char line[DT_RDV_LINE_MAX];
	uint64_t deadline = now_ms() + 5000;

	for (uint32_t i = 0; i < l->nmembers; i++)
		if (l->members[i].fd >= 0 && l->members[i].joined)
			node_member_answer(&l->members[i], l->p->secret,
					   reply, l->p->views);

	for (uint32_t id = 0; id < l->slots; id++) {
		int n;

		if (l->fds[id] < 0 || dt_rdv_rank_of(l->srv, id) < 0)
			continue;
		n = dt_rdv_answer(l->srv, id, reply, line, sizeof(line));
		if (n > 0)
			net_send_all(l->fds[id], line, (size_t)n, deadline);
	}
}

/* The address of rank 0 that the ranks reached. */
static void reached_address(struct loop *l, char *buf, size_t len)
{
	for (uint32_t id = 0; id < l->slots; id++) {
		struct sockaddr_storage sa;
		socklen_t salen = sizeof(sa);

		if (l->fds[id] < 0 || dt_rdv_rank_of(l->srv, id) < 0)
			continue;
		if (getsockname(l->fds[id], (struct sockaddr *)&sa,
				&salen) == 0) {
			net_address_text(&sa, buf, len);
			return;
		}
	}
}

/* The addresses the proven connections came from (see rank0.h). */
static char *proven_peers(struct loop *l)
{
	char (*texts)[INET6_ADDRSTRLEN] = NULL, **words = NULL, *list = NULL;
	size_t n = 0;
	bool too_long;

	texts = malloc(((size_t)l->slots + 1) * sizeof(*texts));
	words = malloc(((size_t)l->slots + 1) * sizeof(*words));
	if (!texts || !words)
		goto out;
	for (uint32_t id = 0; id < l->slots; id++) {
		struct sockaddr_storage sa;
		socklen_t salen = sizeof(sa);

		if (l->fds[id] < 0 || dt_rdv_rank_of(l->srv, id) < 0 ||
		    getpeername(l->fds[id], (struct sockaddr *)&sa,
				&salen) < 0)
			continue;
		net_address_text(&sa, texts[n], sizeof(texts[n]));
		words[n] = texts[n];
		n++;
	}
	list = dt_store_peers_join(words, n, &too_long);
out:
	free(words);
	free(texts);
	return list;
}

int rank0_serve(int listen_fd, const struct rank0_params *p,
		struct dt_rdv_result *res, char *err, size_t errlen)
{
	struct dt_rdv_server_config cfg;
	struct epoll_event ev, events[EVENTS];
	struct dt_rdv_reply reply;
	struct loop l = { .epfd = -1, .p = p };
	uint8_t seed[DT_RDV_NONCE_LEN];
	int rc = -1;

	memset(res, 0, sizeof(*res));
	if (p->peers)
		*p->peers = NULL;
	memset(&cfg, 0, sizeof(cfg));
	cfg.world = p->self->world;
	cfg.secret = p->secret;
	cfg.seed = seed;
	cfg.host = p->self->host;
	cfg.port = p->port;
	cfg.nccl_ok = p->self->nccl_ok;
	cfg.max_pending = p->max_pending ? p->max_pending : RANK0_MAX_PENDING;
	cfg.hello_ms = p->hello_ms ? p->hello_ms : RANK0_HELLO_MS;
	if (raise_fd_limit((p->nodes ? p->nodes : cfg.world) + p->members,
			   &cfg.max_pending, err, errlen) < 0)
		return -1;
	if (net_random(seed, sizeof(seed)) < 0) {
		snprintf(err, errlen, "no random numbers (%s): ask your "
			 "administrator to check getrandom on this node",
			 strerror(errno));
		return -1;
	}
	l.srv = dt_rdv_server_new(&cfg);
	if (!l.srv)
		goto oom;
	l.slots = dt_rdv_server_slots(l.srv);
	l.accept_batch = cfg.max_pending / 2 < ACCEPTS_PER_WAKEUP ?
			 cfg.max_pending / 2 : ACCEPTS_PER_WAKEUP;
	if (l.accept_batch == 0)
		l.accept_batch = 1;
	/* One more: the listening socket, last. */
	l.fds = malloc(((size_t)l.slots + 1) * sizeof(int));
	if (!l.fds)
		goto oom;
	for (uint32_t i = 0; i < l.slots; i++)
		l.fds[i] = -1;
	l.fds[l.slots] = listen_fd;
	l.members = calloc(p->members + 1, sizeof(*l.members));
	if (!l.members)
		goto oom;
	l.epfd = epoll_create1(EPOLL_CLOEXEC);
	fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
	ev.events = EPOLLIN;
	ev.data.u64 = TAG(TAG_LISTEN, 0);
	if (l.epfd < 0 || epoll_ctl(l.epfd, EPOLL_CTL_ADD, listen_fd, &ev)) {
		snprintf(err, errlen, EPOLL_FAILED, strerror(errno));
		goto out;
	}
	ev.data.u64 = TAG(TAG_NODE_LISTEN, 0);
	if (p->node_fd >= 0 &&
	    epoll_ctl(l.epfd, EPOLL_CTL_ADD, p->node_fd, &ev)) {
		snprintf(err, errlen, EPOLL_FAILED, strerror(errno));
		goto out;
	}

	while (!dt_rdv_complete(l.srv)) {
		uint64_t now = now_ms(), wake;
		uint32_t gone;
		int n;

		if (now >= p->deadline_ms)
			break;
		while ((gone = dt_rdv_expired(l.srv, now)) != DT_RDV_NONE)
			conn_close(&l, gone);
		wake = dt_rdv_next_expiry(l.srv);
		if (wake > p->deadline_ms)
			wake = p->deadline_ms;
		n = epoll_wait(l.epfd, events, EVENTS, net_remaining_ms(wake));
		if (n < 0 && errno != EINTR) {
			snprintf(err, errlen, EPOLL_FAILED, strerror(errno));
			goto out;
		}
		now = now_ms();
		for (int i = 0; i < n; i++) {
			uint32_t id = (uint32_t)events[i].data.u64;

			switch (events[i].data.u64 >> 32) {
			case TAG_LISTEN:
				accept_some(&l, now);
				break;
			case TAG_NODE_LISTEN:
				member_arrives(&l);
				break;
			case TAG_MEMBER:
				member_readable(&l, id);
				break;
			default:
				conn_readable(&l, id);
			}
		}
	}

	memset(&reply, 0, sizeof(reply));
	if (!dt_rdv_complete(l.srv)) {
		char who[1024];
		uint32_t missing = dt_rdv_server_missing(l.srv, p->host_of,
							 p->host_arg, who,
							 sizeof(who));

		snprintf(err, errlen, "%u of %u ranks did not arrive within "
			 "%u s (%s): see their own messages; if they have none, "
			 "give them longer with --dist-train=timeout=SECONDS, "
			 "or ask your administrator to check those nodes",
			 missing, cfg.world, p->timeout_s, who);
		snprintf(reply.message, sizeof(reply.message), "%s", err);
		answer_all(&l, &reply);
		goto out;
	}

	/* The address the ranks reached is the one NCCL should use too. */
	reply.ok = true;
	reply.port = p->port;
	reply.nccl_port = p->nccl_port;
	reply.nccl_check = p->want_nccl && dt_rdv_all_nccl(l.srv);
	reached_address(&l, reply.address, sizeof(reply.address));
	if (!reply.address[0] && p->address)
		snprintf(reply.address, sizeof(reply.address), "%s",
			 p->address);
	answer_all(&l, &reply);
	if (p->peers)
		*p->peers = proven_peers(&l);
	snprintf(res->address, sizeof(res->address), "%s", reply.address);
	res->port = reply.port;
	res->nccl_port = reply.nccl_port;
	res->nccl_check = reply.nccl_check;
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory for %u ranks", cfg.world);
out:
	for (uint32_t i = 0; l.fds && i < l.slots; i++)
		conn_close(&l, i);
	for (uint32_t i = 0; i < l.nmembers; i++)
		if (l.members[i].fd >= 0)
			close(l.members[i].fd);
	free(l.members);
	if (l.epfd >= 0)
		close(l.epfd);
	free(l.fds);
	dt_rdv_server_free(l.srv);
	return rc;
}
