#include "config.h"

#include "store_guard.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int text_order(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char *dt_store_peers_join(char *const addrs[], size_t n, bool *too_long)
{
	char **sorted = NULL, *list = NULL, *at;
	size_t len = 1;

	*too_long = false;
	sorted = malloc((n ? n : 1) * sizeof(*sorted));
	if (!sorted)
		return NULL;
	memcpy(sorted, addrs, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), text_order);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || strcmp(sorted[i], sorted[i - 1]))
			len += strlen(sorted[i]) + 1;
	if (len > DT_STORE_PEERS_MAX) {
		*too_long = true;
		goto out;
	}
	list = malloc(len);
	if (!list)
		goto out;
	at = list;
	*at = '\0';
	for (size_t i = 0; i < n; i++) {
		if (i && !strcmp(sorted[i], sorted[i - 1]))
			continue;
		at += sprintf(at, "%s%s", at == list ? "" : ",", sorted[i]);
	}
out:
	free(sorted);
	return list;
}

static int addr_order(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct in6_addr));
}

static int parse_address(const char *word, struct in6_addr *out)
{
	struct in_addr v4;

	if (inet_pton(AF_INET, word, &v4) == 1) {
		memset(out, 0, sizeof(*out));
		out->s6_addr[10] = out->s6_addr[11] = 0xff;
		memcpy(&out->s6_addr[12], &v4, 4);
		return 0;
	}
	return inet_pton(AF_INET6, word, out) == 1 ? 0 : -1;
}

int dt_peer_set_parse(const char *list, struct dt_peer_set *set)
{
	char word[INET6_ADDRSTRLEN];
	size_t words = 1;

	memset(set, 0, sizeof(*set));
	if (!*list)
		return 0;
	for (const char *p = list; *p; p++)
		words += *p == ',';
	set->addrs = malloc(words * sizeof(*set->addrs));
	if (!set->addrs)
		return -1;
	while (*list) {
		size_t len = strcspn(list, ",");

		if (len == 0 || len >= sizeof(word))
			goto bad;
		memcpy(word, list, len);
		word[len] = '\0';
		if (parse_address(word, &set->addrs[set->count]) < 0)
			goto bad;
		set->count++;
		list += len;
		if (*list == ',' && !*++list)
			goto bad;	/* a trailing comma */
	}
	qsort(set->addrs, set->count, sizeof(*set->addrs), addr_order);
	return 0;
bad:
	dt_peer_set_free(set);
	return -1;
}

bool dt_peer_set_has(const struct dt_peer_set *set,
		     const struct in6_addr *addr)
{
	return set->count && bsearch(addr, set->addrs, set->count,
				     sizeof(*set->addrs), addr_order);
}

void dt_peer_set_free(struct dt_peer_set *set)
{
	free(set->addrs);
	memset(set, 0, sizeof(*set));
}

unsigned dt_sockaddr_port(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *a6 = (const void *)sa;
	const struct sockaddr_in *a4 = (const void *)sa;

	if (sa->sa_family == AF_INET6)
		return ntohs(a6->sin6_port);
	if (sa->sa_family == AF_INET)
		return ntohs(a4->sin_port);
	return 0;
}

int dt_peer_key(const struct sockaddr *sa, struct in6_addr *key)
{
	const struct sockaddr_in6 *a6 = (const void *)sa;
	const struct sockaddr_in *a4 = (const void *)sa;

	memset(key, 0, sizeof(*key));
	if (sa->sa_family == AF_INET6) {
		*key = a6->sin6_addr;
		return 0;
	}
	if (sa->sa_family == AF_INET) {
		key->s6_addr[10] = key->s6_addr[11] = 0xff;
		memcpy(&key->s6_addr[12], &a4->sin_addr, 4);
		return 0;
	}
	return -1;
}

enum dt_store_verdict dt_store_admit(enum dt_peer_owner owner_state,
				     uid_t owner, uid_t self,
				     bool from_this_host,
				     const struct dt_peer_set *proven,
				     const struct in6_addr *peer)
{
	if (owner_state == DT_OWNER_FOUND)
		return owner == self ? DT_STORE_ADMIT : DT_STORE_OTHER_USER;
	if (owner_state == DT_OWNER_CLOSED)
		return DT_STORE_CLOSED;
	/* This node's socket, not found or not asked: bound to an
	 * interface, gone, or a kernel without tcp_diag. Never guessed. */
	if (from_this_host)
		return DT_STORE_UNNAMED;
	if (!proven || dt_peer_set_has(proven, peer))
		return DT_STORE_ADMIT;
	return DT_STORE_NOT_PROVEN;
}
