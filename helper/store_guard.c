/*
 * Part of dist_train_worker.so, preloaded into rank 0's program wherever
 * the port of torch's store is held for it (common/store_hold.h): accept()
 * and accept4() on the store's listening socket, the one bound to the
 * port DIST_TRAIN_STORE_FD names, admit only the step's own
 * (common/store_guard.h). Any other connection is closed as soon as it is
 * accepted, before the store reads a byte of it, and the first one is
 * reported. Every other socket, and every other process, is untouched.
 */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "../common/store_guard.h"
#include "../common/store_port.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);

static struct {
	uint16_t port;			/* the store's; 0: not armed */
	bool checked;			/* PROVEN holds the barrier's */
	struct dt_peer_set proven;
	accept4_fn accept4;
	atomic_uint told;	/* the kinds of refusal reported */
} guard;

__attribute__((constructor)) static void arm_store_guard(void)
{
	const char *held = getenv(DT_STORE_FD_ENV);	/* "FD:PORT" */
	const char *list = getenv(DT_STORE_PEERS_ENV);
	const char *colon = held ? strchr(held, ':') : NULL;
	char *end;
	unsigned long port;

	/* Every process that preloads the library accepts through libc. */
	guard.accept4 = (accept4_fn)(uintptr_t)dlsym(RTLD_NEXT, "accept4");
	if (!colon)
		return;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || port == 0 || port > 65535)
		return;
	/* A list not as written is admitted none from elsewhere. */
	if (list) {
		guard.checked = true;
		if (strlen(list) > DT_STORE_PEERS_MAX ||
		    dt_peer_set_parse(list, &guard.proven) < 0)
			dt_peer_set_free(&guard.proven);
	}
	guard.port = (uint16_t)port;
}

static int real_accept4(int fd, struct sockaddr *addr, socklen_t *len,
			int flags)
{
	if (guard.accept4)
		return guard.accept4(fd, addr, len, flags);
	return (int)syscall(SYS_accept4, fd, addr, len, flags);
}

/* Whether FD is the store's listening socket. */
static bool is_store(int fd)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);

	return guard.port &&
	       getsockname(fd, (struct sockaddr *)&a, &len) == 0 &&
	       dt_sockaddr_port((struct sockaddr *)&a) == guard.port;
}

/* A's address into an inet_diag id's 4 words; its family for the kernel
 * (a mapped IPv4 address is the IPv4 socket's). */
static int diag_address(const struct sockaddr_storage *a, __be32 out[4],
			__be16 *port)
{
	const struct sockaddr_in6 *a6 = (const void *)a;
	const struct sockaddr_in *a4 = (const void *)a;

	memset(out, 0, 4 * sizeof(*out));
	if (a->ss_family == AF_INET) {
		memcpy(out, &a4->sin_addr, 4);
		*port = a4->sin_port;
		return AF_INET;
	}
	if (a->ss_family != AF_INET6)
		return -1;
	*port = a6->sin6_port;
	if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
		memcpy(out, &a6->sin6_addr.s6_addr[12], 4);
		return AF_INET;
	}
	memcpy(out, &a6->sin6_addr, 16);
	return AF_INET6;
}

/* Whether the kernel's answer M is the socket asked for in ASK: the exact
 * lookup falls back to a listening socket on the asked source port (a
 * remote client's port that a local server listens on). Its addresses
 * may be written as IPv6 (a dual-stack socket) where ASK's are IPv4. */
static bool is_asked(const struct inet_diag_msg *m,
		     const struct inet_diag_req_v2 *ask)
{
	return m->idiag_state != TCP_LISTEN &&
	       m->id.idiag_sport == ask->id.idiag_sport &&
	       m->id.idiag_dport == ask->id.idiag_dport;
}

/*
 * Whose is the socket that connected from PEER to SELF, asked of the
 * kernel (sock_diag, as ss does; any user may): it names the socket's
 * owner when the socket is in this node's network. IFINDEX: the
 * interface the socket may be bound to (0: none), which an exact lookup
 * must name.
 */
static enum dt_peer_owner peer_owner(const struct sockaddr_storage *peer,
				     const struct sockaddr_storage *self,
				     unsigned ifindex, uid_t *uid)
{
	struct {
		struct nlmsghdr head;
		struct inet_diag_req_v2 req;
	} ask;
	union {
		struct nlmsghdr head;
		char bytes[2048];
	} answer;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	struct timeval wait = { .tv_sec = 1 };
	enum dt_peer_owner rc = DT_OWNER_UNKNOWN;
	int family, other, fd;
	ssize_t n;

	memset(&ask, 0, sizeof(ask));
	family = diag_address(peer, ask.req.id.idiag_src,
			      &ask.req.id.idiag_sport);
	other = diag_address(self, ask.req.id.idiag_dst,
			     &ask.req.id.idiag_dport);
	if (family < 0 || family != other)
		return DT_OWNER_UNKNOWN;
	ask.head.nlmsg_len = sizeof(ask);
	ask.head.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	ask.head.nlmsg_flags = NLM_F_REQUEST;
	ask.req.sdiag_family = (__u8)family;
	ask.req.sdiag_protocol = IPPROTO_TCP;
	ask.req.idiag_states = ~0U;
	ask.req.id.idiag_if = ifindex;
	ask.req.id.idiag_cookie[0] = ask.req.id.idiag_cookie[1] =
		INET_DIAG_NOCOOKIE;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return DT_OWNER_UNKNOWN;
	/* Never hold the store's accepting thread long. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
	if (sendto(fd, &ask, sizeof(ask), 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) != (ssize_t)sizeof(ask))
		goto out;
	do
		n = recv(fd, &answer, sizeof(answer), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0 || !NLMSG_OK(&answer.head, (size_t)n))
		goto out;
	if (answer.head.nlmsg_type == NLMSG_ERROR &&
	    answer.head.nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
		const struct nlmsgerr *e = NLMSG_DATA(&answer.head);

		if (e->error == -ENOENT)
			rc = DT_OWNER_NOT_FOUND;
	} else if (answer.head.nlmsg_type == SOCK_DIAG_BY_FAMILY &&
		   answer.head.nlmsg_len >=
		   NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
		const struct inet_diag_msg *m = NLMSG_DATA(&answer.head);

		/* Closed, the socket is the kernel's (uid 0 in TIME_WAIT, and
		 * in FIN_WAIT2 once its owner closed it); a client that only
		 * shut down its sending side still waits for the answer. */
		*uid = m->idiag_uid;
		if (!is_asked(m, &ask.req))
			rc = DT_OWNER_NOT_FOUND;
		else if (m->idiag_state == TCP_ESTABLISHED ||
			 ((m->idiag_state == TCP_FIN_WAIT1 ||
			   m->idiag_state == TCP_FIN_WAIT2 ||
			   m->idiag_state == TCP_CLOSING) &&
			  m->idiag_uid != 0))
			rc = DT_OWNER_FOUND;
		else
			rc = DT_OWNER_CLOSED;
	}
out:
	close(fd);
	return rc;
}

/* The interface a link-local peer's address is scoped to; 0: none. */
static unsigned scope_of(const struct sockaddr_storage *a)
{
	const struct sockaddr_in6 *a6 = (const void *)a;

	return a->ss_family == AF_INET6 ? a6->sin6_scope_id : 0;
}

/*
 * The owner of a socket of this node that the plain lookup did not find:
 * one bound to an interface is found only by a lookup that names it.
 */
static enum dt_peer_owner bound_peer_owner(const struct sockaddr_storage *peer,
					   const struct sockaddr_storage *self,
					   uid_t *uid)
{
	struct if_nameindex *ifs = if_nameindex();
	enum dt_peer_owner rc = DT_OWNER_NOT_FOUND;

	if (!ifs)
		return DT_OWNER_UNKNOWN;
	for (struct if_nameindex *i = ifs; i->if_index; i++) {
		rc = peer_owner(peer, self, i->if_index, uid);
		if (rc != DT_OWNER_NOT_FOUND)
			break;
	}
	if_freenameindex(ifs);
	return rc;
}

/* Whether ADDR is one of this node's interfaces' addresses. */
static bool is_own_address(const struct in6_addr *addr)
{
	struct ifaddrs *all, *i;
	bool own = false;

	if (getifaddrs(&all) < 0)
		return true;	/* unknown: asked of the kernel as local */
	for (i = all; i && !own; i = i->ifa_next) {
		struct in6_addr key;

		own = i->ifa_addr &&
		      dt_peer_key(i->ifa_addr, &key) == 0 &&
		      !memcmp(&key, addr, sizeof(key));
	}
	freeifaddrs(all);
	return own;
}

/* Whether the accepted connection FD was reset or closed already. */
static bool was_reset(int fd)
{
	struct tcp_info info;
	socklen_t len = sizeof(info);

	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
	       info.tcpi_state == TCP_CLOSE;
}

static bool same_address(const struct in6_addr *a, const struct in6_addr *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

static bool is_loopback(const struct in6_addr *a)
{
	return IN6_IS_ADDR_LOOPBACK(a) ||
	       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

/* Tell the program's user, once for each kind of refusal: the store is
 * left running. */
static void tell(const struct in6_addr *from, enum dt_store_verdict verdict,
		 uid_t owner, bool kernel_answers)
{
	char address[INET6_ADDRSTRLEN] = "?";
	unsigned kind = 1u << (verdict * 2 + !kernel_answers);

	if (atomic_fetch_or(&guard.told, kind) & kind)
		return;
	if (IN6_IS_ADDR_V4MAPPED(from))
		inet_ntop(AF_INET, &from->s6_addr[12], address,
			  sizeof(address));
	else
		inet_ntop(AF_INET6, from, address, sizeof(address));
	if (verdict == DT_STORE_OTHER_USER)
		dprintf(STDERR_FILENO, "dist-train: warning: rank 0's store "
			"(port %u) refused a connection from %s (a socket of "
			"user %u on this node): only the step's ranks may use "
			"it, and the step goes on\n", guard.port, address,
			(unsigned)owner);
	else if (verdict == DT_STORE_UNNAMED && kernel_answers)
		dprintf(STDERR_FILENO, "dist-train: warning: rank 0's store "
			"(port %u) refused a connection from %s, an address "
			"of this node, whose socket the kernel did not name "
			"(gone, or hidden): only the step's ranks may use it, "
			"and the step goes on\n", guard.port, address);
	else if (verdict == DT_STORE_UNNAMED)
		dprintf(STDERR_FILENO, "dist-train: error: rank 0's store "
			"(port %u) refused a connection from %s, an address "
			"of this node, because the kernel cannot say whose "
			"socket it is (no tcp_diag, or sock_diag failed): "
			"ranks on rank 0's node cannot reach the store; ask "
			"your administrator to load the kernel's tcp_diag "
			"module (modprobe tcp_diag)\n", guard.port, address);
	else
		dprintf(STDERR_FILENO, "dist-train: warning: rank 0's store "
			"(port %u) refused a connection from %s (no node of "
			"the step proved itself from that address): only the "
			"step's ranks may use it; if one of them then cannot "
			"reach the store, give this line to your "
			"administrator\n", guard.port, address);
}

/* Whether the connection FD, from PEER, is the step's own. */
static bool admitted(int fd, const struct sockaddr_storage *peer)
{
	struct sockaddr_storage self;
	socklen_t len = sizeof(self);
	struct in6_addr from, to;
	enum dt_peer_owner state = DT_OWNER_UNKNOWN;
	enum dt_store_verdict verdict;
	bool local, kernel_answers = true;
	uid_t owner = 0, own = 0;

	if (dt_peer_key((const struct sockaddr *)peer, &from) < 0)
		return true;	/* not IP: not the store's kind */
	if (getsockname(fd, (struct sockaddr *)&self, &len) == 0 &&
	    dt_peer_key((const struct sockaddr *)&self, &to) == 0)
		state = peer_owner(peer, &self, scope_of(peer), &owner);
	else
		memset(&to, 0, sizeof(to));
	local = is_loopback(&from) || same_address(&from, &to) ||
		((state == DT_OWNER_NOT_FOUND || state == DT_OWNER_UNKNOWN) &&
		 is_own_address(&from));
	if (local && state == DT_OWNER_NOT_FOUND)
		state = bound_peer_owner(peer, &self, &owner);
	if (local && state == DT_OWNER_NOT_FOUND) {
		/* Reset before it was accepted: what it sent is not read.
		 * Else, whether the kernel finds this side of it at all. */
		if (was_reset(fd))
			state = DT_OWNER_CLOSED;
		else
			kernel_answers = peer_owner(&self, peer,
						    scope_of(&self), &own) !=
					 DT_OWNER_NOT_FOUND;
	}
	if (state == DT_OWNER_UNKNOWN)
		kernel_answers = false;
	verdict = dt_store_admit(state, owner, getuid(), local,
				 guard.checked ? &guard.proven : NULL, &from);
	if (verdict == DT_STORE_ADMIT)
		return true;
	if (verdict != DT_STORE_CLOSED)
		tell(&from, verdict, owner, kernel_answers);
	return false;
}

/*
 * Nothing the store may read, in place of a refused connection: one end of
 * a pair whose other end is closed, which reads as a client that left.
 * The store called accept() because its socket was readable and treats
 * an error as fatal (torch 1.13 to 2.7 end the store's thread), and
 * waiting for the next connection would stall every client already in.
 */
static int left_at_once(int flags)
{
	int pair[2];

	if (socketpair(AF_UNIX, SOCK_STREAM |
		       (flags & (SOCK_NONBLOCK | SOCK_CLOEXEC)), 0, pair) < 0)
		return -1;
	close(pair[1]);
	return pair[0];
}

/* Whether another connection waits on the listening socket FD. */
static bool another_waits(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static int guarded_accept(int fd, struct sockaddr *addr, socklen_t *len,
			  int flags)
{
	bool blocking;

	if (!is_store(fd))
		return real_accept4(fd, addr, len, flags);
	blocking = !(fcntl(fd, F_GETFL) & O_NONBLOCK);
	for (;;) {
		struct sockaddr_storage peer;
		socklen_t peer_len = sizeof(peer);
		int conn = real_accept4(fd, (struct sockaddr *)&peer,
					&peer_len, flags);

		if (conn < 0)
			return conn;
		if (!admitted(conn, &peer)) {
			close(conn);	/* turned away unread */
			/* Non-blocking, the next accept says EAGAIN when no
			 * other connection waits; blocking, it would wait. */
			if (!blocking || another_waits(fd))
				continue;
			conn = left_at_once(flags);
			if (conn < 0)
				return -1;
		}
		if (addr && len) {
			memcpy(addr, &peer, *len < peer_len ? *len : peer_len);
			*len = peer_len;
		}
		return conn;
	}
}

EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return guarded_accept(fd, addr, len, 0);
}

EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	return guarded_accept(fd, addr, len, flags);
}
