#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "barrier.h"

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int remaining_ms(uint64_t deadline)
{
	uint64_t now = now_ms();

	if (now >= deadline)
		return 0;
	return deadline - now > 60000 ? 60000 : (int)(deadline - now);
}

int barrier_listen(uint16_t port)
{
	int one = 1, zero = 0, fd, saved;
	struct sockaddr_in6 a6;
	struct sockaddr_in a4;

	/* Both IPv6 and IPv4, as PyTorch's store listens. */
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		memset(&a6, 0, sizeof(a6));
		a6.sin6_family = AF_INET6;
		a6.sin6_addr = in6addr_any;
		a6.sin6_port = htons(port);
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&a6, sizeof(a6)) == 0 &&
		    listen(fd, SOMAXCONN) == 0)
			return fd;
		saved = errno;
		close(fd);
		if (saved != EAFNOSUPPORT && saved != EADDRNOTAVAIL) {
			errno = saved;
			return -1;
		}
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	memset(&a4, 0, sizeof(a4));
	a4.sin_family = AF_INET;
	a4.sin_addr.s_addr = htonl(INADDR_ANY);
	a4.sin_port = htons(port);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a4, sizeof(a4)) == 0 &&
	    listen(fd, SOMAXCONN) == 0)
		return fd;
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

bool port_is_free(uint16_t port)
{
	int fd = barrier_listen(port);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Write all of BUF before DEADLINE; false on failure. */
static bool send_all(int fd, const char *buf, size_t len, uint64_t deadline)
{
	while (len) {
		struct pollfd p = { fd, POLLOUT, 0 };
		ssize_t n;

		if (poll(&p, 1, remaining_ms(deadline)) <= 0)
			return false;
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return false;
		buf += n;
		len -= (size_t)n;
	}
	return true;
}

/* The numeric address of SA, IPv4-mapped IPv6 shown as IPv4. */
static void address_text(const struct sockaddr_storage *sa, char *buf,
			 size_t len)
{
	if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a6 = (const void *)sa;

		if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr))
			inet_ntop(AF_INET, &a6->sin6_addr.s6_addr[12], buf,
				  (socklen_t)len);
		else
			inet_ntop(AF_INET6, &a6->sin6_addr, buf,
				  (socklen_t)len);
	} else {
		const struct sockaddr_in *a4 = (const void *)sa;

		inet_ntop(AF_INET, &a4->sin_addr, buf, (socklen_t)len);
	}
}

struct peer {
	int fd;
	int64_t rank;		/* -1 until its hello came */
	bool nccl_ok;
	size_t len;
	char line[DT_RDV_LINE_MAX];
};

static void peer_close(struct peer *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

/* Answer one peer with REPLY, best effort, within a few seconds. */
static void peer_reply(struct peer *p, const struct dt_rdv_reply *reply)
{
	char line[DT_RDV_LINE_MAX];
	int n = dt_rdv_format_reply(line, sizeof(line), reply);

	if (n > 0)
		send_all(p->fd, line, (size_t)n, now_ms() + 5000);
}

static void fail_reply(struct dt_rdv_reply *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void fail_reply(struct dt_rdv_reply *r, const char *fmt, ...)
{
	va_list ap;

	memset(r, 0, sizeof(*r));
	va_start(ap, fmt);
	vsnprintf(r->message, sizeof(r->message), fmt, ap);
	va_end(ap);
}

/*
 * Read what PEER sent; once a full hello is in, check it and mark the rank
 * arrived. Returns false when the peer is to be dropped.
 */
static bool peer_read(struct peer *p, const struct dt_rdv_hello *self,
		      bool *arrived, uint32_t *count)
{
	struct dt_rdv_hello hello;
	struct dt_rdv_reply bad;
	ssize_t n;
	char *nl;

	n = recv(p->fd, p->line + p->len, sizeof(p->line) - 1 - p->len, 0);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0) {
		/* A rank that left before the answer is missing again. */
		if (p->rank >= 0) {
			arrived[p->rank] = false;
			(*count)--;
		}
		return false;
	}
	if (p->rank >= 0)
		return true;	/* nothing more is expected from it */
	p->len += (size_t)n;
	p->line[p->len] = '\0';
	nl = strchr(p->line, '\n');
	if (!nl)
		return p->len < sizeof(p->line) - 1;
	*nl = '\0';
	if (dt_rdv_parse_hello(p->line, &hello) < 0)
		return false;	/* not one of ours */
	if (hello.world != self->world) {
		fail_reply(&bad, "rank %u on %s says the step has %u tasks, "
			   "rank 0 on %s says %u", hello.rank, hello.host,
			   hello.world, self->host, self->world);
		peer_reply(p, &bad);
		return false;
	}
	if (hello.rank == 0 || arrived[hello.rank]) {
		fail_reply(&bad, "rank %u arrived twice (again from %s)",
			   hello.rank, hello.host);
		peer_reply(p, &bad);
		return false;
	}
	p->rank = hello.rank;
	p->nccl_ok = hello.nccl_ok;
	arrived[hello.rank] = true;
	(*count)++;
	return true;
}

int barrier_serve(int listen_fd, const struct dt_rdv_hello *self,
		  uint16_t nccl_port, bool want_nccl, uint64_t deadline_ms,
		  unsigned timeout_s, dt_rank_host_fn host_of, void *arg,
		  struct barrier_result *res, char *err, size_t errlen)
{
	uint32_t world = self->world, count = 1, npeers = 0;
	size_t cap = (size_t)world + 16;
	struct peer *peers = calloc(cap, sizeof(*peers));
	struct pollfd *pfds = calloc(cap + 1, sizeof(*pfds));
	bool *arrived = calloc(world, sizeof(bool));
	struct dt_rdv_reply reply;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	if (!peers || !pfds || !arrived) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	arrived[0] = true;
	fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);

	while (count < world && now_ms() < deadline_ms) {
		uint32_t i, kept = 0;

		pfds[0].fd = listen_fd;
		pfds[0].events = POLLIN;
		pfds[0].revents = 0;
		for (i = 0; i < npeers; i++) {
			pfds[i + 1].fd = peers[i].fd;
			pfds[i + 1].events = POLLIN;
			pfds[i + 1].revents = 0;
		}
		if (poll(pfds, npeers + 1, remaining_ms(deadline_ms)) < 0 &&
		    errno != EINTR) {
			snprintf(err, errlen, "poll: %s", strerror(errno));
			goto out;
		}
		for (i = 0; i < npeers; i++) {
			if (pfds[i + 1].revents &&
			    !peer_read(&peers[i], self, arrived, &count))
				peer_close(&peers[i]);
			if (peers[i].fd >= 0)
				peers[kept++] = peers[i];
		}
		npeers = kept;
		while (pfds[0].revents & POLLIN) {
			int fd = accept4(listen_fd, NULL, NULL,
					 SOCK_CLOEXEC | SOCK_NONBLOCK);

			if (fd < 0)
				break;
			if (npeers == cap) {
				close(fd);	/* more than the step has */
				continue;
			}
			memset(&peers[npeers], 0, sizeof(peers[npeers]));
			peers[npeers].fd = fd;
			peers[npeers++].rank = -1;
		}
	}

	if (count < world) {
		char who[1024];
		uint32_t missing = dt_rdv_describe_missing(arrived, world,
							  host_of, arg, who,
							  sizeof(who));

		snprintf(err, errlen, "%u of %u ranks did not arrive within "
			 "%u s: %s. See those nodes' slurmd logs, or give them "
			 "longer with --dist-train=timeout=SECONDS", missing,
			 world, timeout_s, who);
		fail_reply(&reply, "%s", err);
		for (uint32_t i = 0; i < npeers; i++)
			peer_reply(&peers[i], &reply);
		goto out;
	}

	/* The address the ranks reached is the one NCCL should use too. */
	memset(&reply, 0, sizeof(reply));
	reply.ok = true;
	reply.nccl_port = nccl_port;
	reply.nccl_check = want_nccl && self->nccl_ok;
	for (uint32_t i = 0; i < npeers; i++) {
		if (peers[i].rank < 0)
			continue;
		reply.nccl_check = reply.nccl_check && peers[i].nccl_ok;
		if (!reply.address[0]) {
			struct sockaddr_storage sa;
			socklen_t salen = sizeof(sa);

			if (getsockname(peers[i].fd, (struct sockaddr *)&sa,
					&salen) == 0)
				address_text(&sa, reply.address,
					     sizeof(reply.address));
		}
	}
	for (uint32_t i = 0; i < npeers; i++)
		if (peers[i].rank >= 0)
			peer_reply(&peers[i], &reply);
	snprintf(res->address, sizeof(res->address), "%s", reply.address);
	res->nccl_port = reply.nccl_port;
	res->nccl_check = reply.nccl_check;
	rc = 0;
out:
	for (uint32_t i = 0; peers && i < npeers; i++)
		peer_close(&peers[i]);
	free(peers);
	free(pfds);
	free(arrived);
	return rc;
}

/* One non-blocking connect to AI, bounded by DEADLINE. */
static int try_connect(const struct addrinfo *ai, uint64_t deadline)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
			SOCK_NONBLOCK, ai->ai_protocol);
	struct pollfd p;
	int soerr = 0;
	socklen_t len = sizeof(soerr);

	if (fd < 0)
		return -1;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno != EINPROGRESS)
		goto fail;
	p.fd = fd;
	p.events = POLLOUT;
	if (poll(&p, 1, remaining_ms(deadline)) <= 0) {
		errno = ETIMEDOUT;
		goto fail;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr) {
		errno = soerr ? soerr : errno;
		goto fail;
	}
	return fd;
fail:
	{
		int saved = errno;

		close(fd);
		errno = saved;
	}
	return -1;
}

int barrier_join(const char *host, uint16_t port,
		 const struct dt_rdv_hello *hello, uint64_t connect_deadline_ms,
		 uint64_t reply_wait_ms, struct barrier_result *res,
		 bool *from_rank0, char *err, size_t errlen)
{
	struct addrinfo hints, *ais = NULL;
	struct dt_rdv_reply reply;
	char line[DT_RDV_LINE_MAX], portstr[8];
	const char *why = "no address";
	uint64_t deadline;
	size_t len = 0;
	int fd = -1, n, rc = -1;

	*from_rank0 = false;
	memset(res, 0, sizeof(*res));
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(portstr, sizeof(portstr), "%u", port);

	/* Rank 0 may not listen yet: try until the deadline. */
	while (fd < 0 && now_ms() < connect_deadline_ms) {
		int gai = getaddrinfo(host, portstr, &hints, &ais);

		if (gai) {
			why = gai_strerror(gai);
		} else {
			for (struct addrinfo *ai = ais; ai && fd < 0;
			     ai = ai->ai_next) {
				fd = try_connect(ai, connect_deadline_ms);
				if (fd < 0)
					why = strerror(errno);
			}
			freeaddrinfo(ais);
		}
		if (fd < 0)
			usleep(50000);
	}
	if (fd < 0) {
		snprintf(err, errlen, "cannot reach rank 0 at %s:%u: %s",
			 host, port, why);
		return -1;
	}

	deadline = now_ms() + reply_wait_ms;
	n = dt_rdv_format_hello(line, sizeof(line), hello);
	if (n < 0 || !send_all(fd, line, (size_t)n, deadline)) {
		snprintf(err, errlen, "lost rank 0 at %s:%u while saying "
			 "hello", host, port);
		goto out;
	}
	/* The answer comes once everyone is there, or when time is up. */
	while (!memchr(line, '\n', len)) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t got;

		if (len == sizeof(line) - 1 ||
		    poll(&p, 1, remaining_ms(deadline)) <= 0) {
			snprintf(err, errlen, "rank 0 at %s:%u did not answer",
				 host, port);
			goto out;
		}
		got = recv(fd, line + len, sizeof(line) - 1 - len, 0);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0) {
			snprintf(err, errlen, "rank 0 at %s:%u hung up without "
				 "an answer", host, port);
			goto out;
		}
		len += (size_t)got;
	}
	line[len] = '\0';
	*strchr(line, '\n') = '\0';
	if (dt_rdv_parse_reply(line, &reply) < 0) {
		snprintf(err, errlen, "%s:%u is not a dist-train rank 0 (it "
			 "said '%.60s')", host, port, line);
		goto out;
	}
	if (!reply.ok) {
		*from_rank0 = true;
		snprintf(err, errlen, "%s", reply.message);
		goto out;
	}
	snprintf(res->address, sizeof(res->address), "%s", reply.address);
	res->nccl_port = reply.nccl_port;
	res->nccl_check = reply.nccl_check;
	rc = 0;
out:
	close(fd);
	return rc;
}
