#include "config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netif.h"

/* Whether A is in the network of interface address IA with mask M. */
static bool same_net(const struct sockaddr *a, const struct sockaddr *ia,
		     const struct sockaddr *m, bool exact)
{
	const unsigned char *x, *y, *mask;
	size_t n;

	if (!ia || a->sa_family != ia->sa_family)
		return false;
	if (a->sa_family == AF_INET) {
		x = (const void *)&((const struct sockaddr_in *)a)->sin_addr;
		y = (const void *)&((const struct sockaddr_in *)ia)->sin_addr;
		mask = m ? (const void *)&((const struct sockaddr_in *)m)->sin_addr
			 : NULL;
		n = 4;
	} else if (a->sa_family == AF_INET6) {
		x = (const void *)&((const struct sockaddr_in6 *)a)->sin6_addr;
		y = (const void *)&((const struct sockaddr_in6 *)ia)->sin6_addr;
		mask = m ? (const void *)&((const struct sockaddr_in6 *)m)->sin6_addr
			 : NULL;
		n = 16;
	} else {
		return false;
	}
	if (exact || !mask)
		return !memcmp(x, y, n);
	for (size_t i = 0; i < n; i++)
		if ((x[i] & mask[i]) != (y[i] & mask[i]))
			return false;
	return true;
}

int dt_netif_towards(const char *address, char *name, size_t len)
{
	struct sockaddr_storage dst, src;
	socklen_t srclen = sizeof(src);
	struct ifaddrs *ifs = NULL;
	int fd, rc = -1;

	memset(&dst, 0, sizeof(dst));
	if (inet_pton(AF_INET, address,
		      &((struct sockaddr_in *)&dst)->sin_addr) == 1) {
		dst.ss_family = AF_INET;
		((struct sockaddr_in *)&dst)->sin_port = htons(9);
	} else if (inet_pton(AF_INET6, address,
			     &((struct sockaddr_in6 *)&dst)->sin6_addr) == 1) {
		dst.ss_family = AF_INET6;
		((struct sockaddr_in6 *)&dst)->sin6_port = htons(9);
	} else {
		return -1;
	}
	/* A UDP "connect" sends nothing: it only picks the route. */
	fd = socket(dst.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&dst, dst.ss_family == AF_INET ?
		    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&src, &srclen) < 0 ||
	    getifaddrs(&ifs) < 0)
		goto out;
	/* The interface holding the source address, else its network. */
	for (int pass = 0; pass < 2 && rc < 0; pass++) {
		for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
			if (same_net((struct sockaddr *)&src, i->ifa_addr,
				     i->ifa_netmask, pass == 0)) {
				snprintf(name, len, "%s", i->ifa_name);
				rc = 0;
				break;
			}
		}
	}
out:
	if (ifs)
		freeifaddrs(ifs);
	close(fd);
	return rc;
}

int dt_resolve_host(const char *host, char *address, size_t len)
{
	struct addrinfo hints, *ai = NULL;
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai)
		return -1;
	rc = getnameinfo(ai->ai_addr, ai->ai_addrlen, address, (socklen_t)len,
			 NULL, 0, NI_NUMERICHOST) == 0 ? 0 : -1;
	freeaddrinfo(ai);
	return rc;
}

int dt_netif_towards_host(const char *host, char *name, size_t len)
{
	char address[INET6_ADDRSTRLEN];

	if (dt_resolve_host(host, address, sizeof(address)) < 0)
		return -1;
	return dt_netif_towards(address, name, len);
}
