#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "join.h"
#include "../common/member.h"
#include "../common/net.h"
#include "node.h"

int node_listen(const char *name, char *err, size_t errlen)
{
	struct sockaddr_un a;
	socklen_t alen = dt_node_address(name, &a);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, alen) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
		snprintf(err, errlen, "cannot open this node's socket for its "
			 "ranks (%s%s): rerun the step, and report it to your "
			 "administrator if it recurs", strerror(errno),
			 errno == EADDRINUSE ? ", as if two steps had one "
			 "local rank 0 here" : "");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int node_accept(int listen_fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return -1;
	/* The name is the step's secret; the user, the kernel's word. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    cred.uid != geteuid()) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

int node_member_read(struct node_member *m)
{
	ssize_t n = recv(m->fd, m->line + m->len, sizeof(m->line) - 1 - m->len,
			 0);
	char *nl;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0 || m->joined)
		return -1;	/* gone, or more than a member says */
	m->len = (uint16_t)(m->len + n);
	m->line[m->len] = '\0';
	nl = strchr(m->line, '\n');
	if (!nl)
		return m->len < sizeof(m->line) - 1 ? 0 : -1;
	*nl = '\0';
	if (nl[1] || dt_rdv_parse_member(m->line, &m->rank, &m->nccl_ok,
					 m->cnonce) < 0)
		return -1;
	return 1;
}

int node_member_check(struct node_member *m, const struct node_views *views,
		      char *err, size_t errlen)
{
	if (!views)
		return 0;
	return views->check(m->rank, &m->local_rank, err, errlen, views->arg);
}

void node_member_answer(struct node_member *m, const uint8_t *secret,
			const struct dt_rdv_reply *reply,
			const struct node_views *views)
{
	struct dt_rdv_reply mine = *reply;
	char line[DT_RDV_LINE_MAX];
	int n;

	if (views && reply->ok) {
		mine.view = views->base;
		mine.view.local_rank = m->local_rank;
		mine.view.present = true;
	}
	n = dt_rdv_answer_for(secret, m->cnonce, &mine, line, sizeof(line));

	if (n > 0)
		net_send_all(m->fd, line, (size_t)n, now_ms() + 5000);
	close(m->fd);
	m->fd = -1;
}

static int compare_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* As node_member_read; a member VIEWS does not place here is told why
 * (its fd closed) and dropped. */
static int read_member(struct node_member *m, const struct node_views *views,
		       const uint8_t *secret)
{
	struct dt_rdv_reply refusal;
	int got = node_member_read(m);

	if (got <= 0)
		return got;
	memset(&refusal, 0, sizeof(refusal));
	if (node_member_check(m, views, refusal.message,
			      sizeof(refusal.message)) == 0)
		return 1;
	node_member_answer(m, secret, &refusal, NULL);
	return -1;
}

/* Members until EXPECTED have joined or DEADLINE; how many joined. */
static uint32_t gather(int listen_fd, struct node_member *m,
		       uint32_t expected, uint64_t deadline,
		       const struct node_views *views, const uint8_t *secret)
{
	struct pollfd *p = calloc(expected + 1, sizeof(*p));
	uint32_t open = 0, joined = 0;

	if (!p)
		return 0;
	while (joined < expected && now_ms() < deadline) {
		uint32_t i;

		/* Full: let the rest wait in the backlog, not spin. */
		p[0].fd = open < expected ? listen_fd : -1;
		p[0].events = POLLIN;
		for (i = 0; i < open; i++) {
			p[i + 1].fd = m[i].joined ? -1 : m[i].fd;
			p[i + 1].events = POLLIN;
		}
		if (poll(p, open + 1, net_remaining_ms(deadline)) <= 0)
			continue;
		for (i = 0; i < open; i++) {
			int got;

			if (!p[i + 1].revents || m[i].joined)
				continue;
			got = read_member(&m[i], views, secret);
			if (got > 0) {
				m[i].joined = true;
				joined++;
			} else if (got < 0) {
				/* Not a member after all: its place is free. */
				if (m[i].fd >= 0)
					close(m[i].fd);
				m[i--] = m[--open];
				p[i + 2] = p[open + 1];
			}
		}
		while ((p[0].revents & POLLIN) && open < expected) {
			int fd = node_accept(listen_fd);

			if (fd < 0 && errno != EPERM)
				break;
			if (fd < 0)
				continue;
			memset(&m[open], 0, sizeof(m[open]));
			m[open++].fd = fd;
		}
	}
	/* Members not yet heard from are not spoken for. */
	for (uint32_t i = 0; i < open; i++)
		if (!m[i].joined) {
			close(m[i].fd);
			m[i--] = m[--open];
		}
	free(p);
	return joined;
}

uint64_t node_gather_deadline(uint64_t deadline_ms)
{
	return deadline_ms > now_ms() + 6000 ? deadline_ms - 3000 : deadline_ms;
}

int node_lead(int listen_fd, uint32_t local_size, uint64_t gather_deadline_ms,
	      const struct node_views *views, const struct join_target *target,
	      const uint8_t *secret,
	      const struct dt_rdv_hello *self, uint64_t connect_deadline_ms,
	      uint64_t reply_wait_ms, struct dt_rdv_result *res,
	      bool *from_rank0, char *err, size_t errlen)
{
	struct node_member *m = calloc(local_size, sizeof(*m));
	uint32_t *ranks = calloc(local_size, sizeof(uint32_t));
	struct dt_rdv_hello hello = *self;
	struct dt_rdv_reply reply;
	uint32_t joined = 0;
	int rc = -1;

	if (!m || !ranks) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	joined = gather(listen_fd, m, local_size - 1, gather_deadline_ms, views,
			secret);
	ranks[0] = self->ranks[0];
	for (uint32_t i = 0; i < joined; i++) {
		ranks[i + 1] = m[i].rank;
		hello.nccl_ok = hello.nccl_ok && m[i].nccl_ok;
	}
	qsort(ranks, joined + 1, sizeof(uint32_t), compare_u32);
	for (uint32_t i = 1; i <= joined; i++)
		if (ranks[i] == ranks[i - 1]) {
			snprintf(err, errlen, "rank %u arrived twice on %s: "
				 "rerun the step, and report it to your "
				 "administrator if it recurs", ranks[i],
				 self->host);
			goto answer;
		}
	hello.ranks = ranks;
	hello.nranks = joined + 1;
	rc = join_rank0(target, secret, &hello, connect_deadline_ms,
			reply_wait_ms, res, from_rank0, err, errlen);
answer:
	memset(&reply, 0, sizeof(reply));
	if (rc == 0) {
		reply.ok = true;
		snprintf(reply.address, sizeof(reply.address), "%s",
			 res->address);
		reply.port = res->port;
		reply.nccl_port = res->nccl_port;
		reply.nccl_check = res->nccl_check;
	} else {
		snprintf(reply.message, sizeof(reply.message), "%s", err);
	}
	for (uint32_t i = 0; i < joined; i++)
		node_member_answer(&m[i], secret, &reply, views);
	/* The members say nothing of a failure their leader reports. */
out:
	free(m);
	free(ranks);
	return rc;
}
