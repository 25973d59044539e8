/*
 * common/store_guard.c: the addresses the barrier proved, carried to rank
 * 0's program, and who the store admits.
 */
#include "config.h"

#include <arpa/inet.h>
#include <string.h>

#include "unit.h"
#include "../../common/store_guard.h"

static struct in6_addr key_of(const char *text)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	struct in6_addr key;

	if (inet_pton(AF_INET, text, &a4.sin_addr) == 1) {
		CU_ASSERT_EQUAL(dt_peer_key((struct sockaddr *)&a4, &key), 0);
	} else {
		CU_ASSERT_EQUAL_FATAL(inet_pton(AF_INET6, text, &a6.sin6_addr),
				      1);
		CU_ASSERT_EQUAL(dt_peer_key((struct sockaddr *)&a6, &key), 0);
	}
	return key;
}

static void test_port(void)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET,
				  .sin_port = htons(29500) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
				   .sin6_port = htons(20001) };
	struct sockaddr other = { .sa_family = AF_UNIX };

	CU_ASSERT_EQUAL(dt_sockaddr_port((struct sockaddr *)&a4), 29500);
	CU_ASSERT_EQUAL(dt_sockaddr_port((struct sockaddr *)&a6), 20001);
	CU_ASSERT_EQUAL(dt_sockaddr_port(&other), 0);
}

static void test_join(void)
{
	char *addrs[] = { "10.0.0.3", "10.0.0.1", "fe80::1", "10.0.0.3",
			  "10.0.0.1" };
	bool too_long = true;
	char *list;

	list = dt_store_peers_join(addrs, 5, &too_long);
	CU_ASSERT_PTR_NOT_NULL_FATAL(list);
	CU_ASSERT_FALSE(too_long);
	CU_ASSERT_STRING_EQUAL(list, "10.0.0.1,10.0.0.3,fe80::1");
	free(list);
	/* One node: nothing from elsewhere is proven. */
	list = dt_store_peers_join(addrs, 0, &too_long);
	CU_ASSERT_PTR_NOT_NULL_FATAL(list);
	CU_ASSERT_STRING_EQUAL(list, "");
	free(list);
}

/* 4,000 IPv4 nodes fit; 4,000 IPv6 ones do not, and say so. */
static void test_join_bound(void)
{
	enum { NODES = 4000 };
	static char text[NODES][INET6_ADDRSTRLEN];
	char *addrs[NODES], *list;
	bool too_long;

	for (int i = 0; i < NODES; i++) {
		snprintf(text[i], sizeof(text[i]), "100.%d.%d.%d",
			 (i >> 8) & 255, i & 255, 200);
		addrs[i] = text[i];
	}
	list = dt_store_peers_join(addrs, NODES, &too_long);
	CU_ASSERT_PTR_NOT_NULL_FATAL(list);
	CU_ASSERT_TRUE(strlen(list) <= DT_STORE_PEERS_MAX);
	free(list);
	for (int i = 0; i < NODES; i++)
		snprintf(text[i], sizeof(text[i]),
			 "2001:db8:aaaa:bbbb:cccc:dddd:%x:%x", i, i);
	list = dt_store_peers_join(addrs, NODES, &too_long);
	CU_ASSERT_PTR_NULL(list);
	CU_ASSERT_TRUE(too_long);
}

static void test_set(void)
{
	struct dt_peer_set set;
	struct in6_addr a;

	CU_ASSERT_EQUAL_FATAL(dt_peer_set_parse("10.0.0.3,fe80::1,10.0.0.1",
						&set), 0);
	CU_ASSERT_EQUAL(set.count, 3);
	a = key_of("10.0.0.1");
	CU_ASSERT_TRUE(dt_peer_set_has(&set, &a));
	/* IPv4 as a dual-stack socket sees it */
	a = key_of("::ffff:10.0.0.3");
	CU_ASSERT_TRUE(dt_peer_set_has(&set, &a));
	a = key_of("fe80::1");
	CU_ASSERT_TRUE(dt_peer_set_has(&set, &a));
	a = key_of("10.0.0.2");
	CU_ASSERT_FALSE(dt_peer_set_has(&set, &a));
	dt_peer_set_free(&set);

	CU_ASSERT_EQUAL(dt_peer_set_parse("", &set), 0);
	CU_ASSERT_EQUAL(set.count, 0);
	a = key_of("10.0.0.1");
	CU_ASSERT_FALSE(dt_peer_set_has(&set, &a));
	/* Not as written: refused whole. */
	CU_ASSERT_EQUAL(dt_peer_set_parse("10.0.0.1,,10.0.0.2", &set), -1);
	CU_ASSERT_EQUAL(dt_peer_set_parse("10.0.0.1,n1", &set), -1);
	CU_ASSERT_EQUAL(dt_peer_set_parse("10.0.0.1,", &set), -1);
	CU_ASSERT_EQUAL(set.count, 0);
	CU_ASSERT_PTR_NULL(set.addrs);
}

static void test_admit(void)
{
	struct dt_peer_set proven;
	struct in6_addr node2 = key_of("10.0.0.2"), login = key_of("10.9.9.9");

	CU_ASSERT_EQUAL_FATAL(dt_peer_set_parse("10.0.0.2", &proven), 0);
	/* From rank 0's node: the kernel names the socket's owner. */
	CU_ASSERT_EQUAL(dt_store_admit(DT_OWNER_FOUND, 1000, 1000, true,
				       &proven, &login), DT_STORE_ADMIT);
	CU_ASSERT_EQUAL(dt_store_admit(DT_OWNER_FOUND, 1001, 1000, true,
				       &proven, &node2), DT_STORE_OTHER_USER);
	/* From this node, closed before the check: its owner is unknown,
	 * and what it sent before leaving is not read. */
	CU_ASSERT_EQUAL(dt_store_admit(DT_OWNER_CLOSED, 0, 1000, true,
				       &proven, &node2), DT_STORE_CLOSED);
	/* From another node: only a proven address. */
	CU_ASSERT_EQUAL(dt_store_admit(DT_OWNER_NOT_FOUND, 0, 1000, false,
				       &proven, &node2), DT_STORE_ADMIT);
	CU_ASSERT_EQUAL(dt_store_admit(DT_OWNER_NOT_FOUND, 0, 1000, false,
				       &proven, &login), DT_STORE_NOT_PROVEN);
	/* Without a barrier, other nodes are not checked. */
	CU_ASSERT_EQUAL(dt_store_admit(DT_OWNER_NOT_FOUND, 0, 1000, false,
				       NULL, &login), DT_STORE_ADMIT);
	/* From an address of this node, a socket the kernel does not name
	 * (bound to an interface, reset, link-local, no tcp_diag): refused,
	 * with a barrier or without. */
	CU_ASSERT_EQUAL(dt_store_admit(DT_OWNER_NOT_FOUND, 0, 1000, true,
				       NULL, &login), DT_STORE_UNNAMED);
	CU_ASSERT_EQUAL(dt_store_admit(DT_OWNER_NOT_FOUND, 0, 1000, true,
				       &proven, &node2), DT_STORE_UNNAMED);
	CU_ASSERT_EQUAL(dt_store_admit(DT_OWNER_UNKNOWN, 0, 1000, true,
				       NULL, &login), DT_STORE_UNNAMED);
	/* The kernel could not be asked of another host's: only when
	 * proven. */
	CU_ASSERT_EQUAL(dt_store_admit(DT_OWNER_UNKNOWN, 0, 1000, false,
				       &proven, &login), DT_STORE_NOT_PROVEN);
	CU_ASSERT_EQUAL(dt_store_admit(DT_OWNER_UNKNOWN, 0, 1000, false,
				       &proven, &node2), DT_STORE_ADMIT);
	dt_peer_set_free(&proven);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_port),
	UNIT_TEST(test_join),
	UNIT_TEST(test_join_bound),
	UNIT_TEST(test_set),
	UNIT_TEST(test_admit),
};

UNIT_MAIN("store_guard", tests)
