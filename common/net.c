#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "net.h"

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void net_backoff_upto(unsigned *delay_ms, unsigned cap_ms, uint64_t deadline)
{
	unsigned d = *delay_ms ? *delay_ms : 1;
	int left = net_remaining_ms(deadline);

	if (d > cap_ms)
		d = cap_ms ? cap_ms : 1;
	if ((unsigned)left < d)
		d = (unsigned)left;
	if (d)
		usleep(d * 1000);
	*delay_ms = d * 2 > cap_ms ? cap_ms : d * 2;
}

void net_backoff(unsigned *delay_ms, uint64_t deadline)
{
	net_backoff_upto(delay_ms, 50, deadline);
}

int net_remaining_ms(uint64_t deadline)
{
	uint64_t now = now_ms();

	if (now >= deadline)
		return 0;
	return deadline - now > 60000 ? 60000 : (int)(deadline - now);
}

int net_listen(uint16_t port)
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

bool net_port_is_free(uint16_t port)
{
	int fd = net_listen(port);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

uint16_t net_nccl_port(uint16_t rendezvous, uint16_t low, uint16_t high)
{
	unsigned span = (unsigned)(high - low + 1);

	for (unsigned i = 1; i < NET_PORT_SEARCH; i++) {
		uint16_t port = (uint16_t)(low + (rendezvous - low + i) % span);

		if (rendezvous < low || rendezvous > high)
			port = (uint16_t)(rendezvous + i);	/* reserved */
		if (port != rendezvous && net_port_is_free(port))
			return port;
	}
	return 0;
}

bool net_send_all(int fd, const char *buf, size_t len, uint64_t deadline)
{
	while (len) {
		struct pollfd p = { fd, POLLOUT, 0 };
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (poll(&p, 1, net_remaining_ms(deadline)) <= 0)
				return false;
			continue;
		}
		if (n <= 0)
			return false;
		buf += n;
		len -= (size_t)n;
	}
	return true;
}

int net_read_line(int fd, uint64_t deadline, char *line, size_t size)
{
	size_t len = 0;

	while (!memchr(line, '\n', len)) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t got;

		if (len == size - 1 ||
		    poll(&p, 1, net_remaining_ms(deadline)) <= 0)
			return -1;
		got = recv(fd, line + len, size - 1 - len, 0);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0)
			return -2;
		len += (size_t)got;
	}
	line[len] = '\0';
	*strchr(line, '\n') = '\0';
	return 0;
}

void net_address_text(const struct sockaddr_storage *sa, char *buf,
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

int net_random(void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One non-blocking connect to AI, bounded by DEADLINE. */
static int try_connect(const struct addrinfo *ai, uint64_t deadline)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
			SOCK_NONBLOCK, ai->ai_protocol);
	struct pollfd p;
	int soerr = 0, saved;
	socklen_t len = sizeof(soerr);

	if (fd < 0)
		return -1;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno != EINPROGRESS)
		goto fail;
	p.fd = fd;
	p.events = POLLOUT;
	if (poll(&p, 1, net_remaining_ms(deadline)) <= 0) {
		errno = ETIMEDOUT;
		goto fail;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr) {
		errno = soerr ? soerr : errno;
		goto fail;
	}
	return fd;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

int net_connect(const char *host, const char *port, uint64_t deadline,
		const char **why)
{
	struct addrinfo hints, *ais = NULL;
	int fd = -1, gai;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	gai = getaddrinfo(host, port, &hints, &ais);
	if (gai) {
		*why = gai_strerror(gai);
		return -1;
	}
	for (struct addrinfo *ai = ais; ai && fd < 0; ai = ai->ai_next) {
		fd = try_connect(ai, deadline);
		if (fd < 0)
			*why = strerror(errno);
	}
	freeaddrinfo(ais);
	return fd;
}
