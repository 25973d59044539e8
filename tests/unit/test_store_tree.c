/*
 * common/store_tree.c: the frames, parsed strictly; torch's compare_set;
 * and a server with two relays in one loop (a thread here), driven over
 * their sockets as ranks drive them: every operation, a read shared by a
 * node and kept until the key changes, a wait that times out, a frame out
 * of bounds.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include "common/store_tree.h"
#include "unit.h"

static size_t put_u32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);	/* the test machine is little-endian */
	return 4;
}

static size_t put_str(uint8_t *p, const char *s)
{
	size_t len = strlen(s);

	put_u32(p, (uint32_t)len);
	memcpy(p + 4, s, len);
	return 4 + len;
}

/* A frame: header, then BODY (LEN bytes). */
static size_t frame(uint8_t *f, uint32_t id, uint8_t op, const uint8_t *body,
		    size_t len)
{
	put_u32(f, (uint32_t)(len + 5));
	put_u32(f + 4, id);
	f[8] = op;
	memcpy(f + 9, body, len);
	return len + 9;
}

static void test_parse(void)
{
	struct dt_store_request req;
	uint8_t b[256], f[300];
	size_t n, len;

	n = put_str(b, "key");
	n += put_str(b + n, "value");
	len = frame(f, 7, DT_STORE_SET, b, n);
	CU_ASSERT_EQUAL(dt_store_parse_request(f, len, &req), 0);
	CU_ASSERT_EQUAL(req.id, 7);
	CU_ASSERT_EQUAL(req.key.len, 3);
	CU_ASSERT_EQUAL(memcmp(req.value.p, "value", 5), 0);
	/* Bytes left over, a string past the end, a frame cut short. */
	CU_ASSERT_EQUAL(dt_store_parse_request(f, len - 1, &req), -1);
	f[0]++;
	CU_ASSERT_EQUAL(dt_store_parse_request(f, len, &req), -1);
	f[0]--;
	put_u32(b, 1000);
	len = frame(f, 7, DT_STORE_SET, b, n);
	CU_ASSERT_EQUAL(dt_store_parse_request(f, len, &req), -1);
	/* An unknown kind; a wait for no key, or for too many. */
	len = frame(f, 1, 99, b, 0);
	CU_ASSERT_EQUAL(dt_store_parse_request(f, len, &req), -1);
	n = put_u32(b, 100);
	n += put_u32(b + n, 0);
	len = frame(f, 1, DT_STORE_WAIT, b, n);
	CU_ASSERT_EQUAL(dt_store_parse_request(f, len, &req), -1);
	n = put_u32(b, 100);
	n += put_u32(b + n, DT_STORE_WAIT_KEYS_MAX + 1);
	len = frame(f, 1, DT_STORE_WAIT, b, n);
	CU_ASSERT_EQUAL(dt_store_parse_request(f, len, &req), -1);
	/* Two keys, each found. */
	n = put_u32(b, 100);
	n += put_u32(b + n, 2);
	n += put_str(b + n, "a");
	n += put_str(b + n, "bc");
	len = frame(f, 1, DT_STORE_WAIT, b, n);
	CU_ASSERT_EQUAL_FATAL(dt_store_parse_request(f, len, &req), 0);
	CU_ASSERT_EQUAL(req.nkeys, 2);
	CU_ASSERT_EQUAL(dt_store_request_key(&req, 1).len, 2);
	CU_ASSERT_EQUAL(memcmp(dt_store_request_key(&req, 1).p, "bc", 2), 0);
}

static struct dt_store_str s(const char *text)
{
	struct dt_store_str out = { (const uint8_t *)text,
				    (uint32_t)strlen(text) };
	return out;
}

static void test_compare_set(void)
{
	struct dt_store_str out;
	bool write;

	/* torch's: a missing key is written when nothing was expected. */
	out = dt_store_cas_result(false, s(""), s(""), s("new"), &write);
	CU_ASSERT(write);
	CU_ASSERT_EQUAL(out.len, 3);
	out = dt_store_cas_result(false, s(""), s("old"), s("new"), &write);
	CU_ASSERT(!write);
	CU_ASSERT_EQUAL(memcmp(out.p, "old", 3), 0);
	out = dt_store_cas_result(true, s("old"), s("old"), s("new"), &write);
	CU_ASSERT(write);
	out = dt_store_cas_result(true, s("cur"), s("old"), s("new"), &write);
	CU_ASSERT(!write);
	CU_ASSERT_EQUAL(memcmp(out.p, "cur", 3), 0);
}

/* ---- a server and two relays, in a thread ---- */

static volatile int stop_loop;

static void *run(void *loop)
{
	char err[256];

	dt_store_loop_run(loop, &stop_loop, err, sizeof(err));
	return NULL;
}

/* NAME's abstract address, and its length. */
static socklen_t abstract(struct sockaddr_un *a, const char *name)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path + 1, name, strlen(name));
	return (socklen_t)(sizeof(sa_family_t) + 1 + strlen(name));
}

static int relay_socket(const char *name)
{
	struct sockaddr_un a;
	socklen_t len = abstract(&a, name);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	if (bind(fd, (struct sockaddr *)&a, len) < 0 || listen(fd, 16) < 0)
		return -1;
	return fd;
}

static int rank_socket(const char *name)
{
	struct sockaddr_un a;
	socklen_t len = abstract(&a, name);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	return connect(fd, (struct sockaddr *)&a, len) < 0 ? -1 : fd;
}

static bool read_all(int fd, uint8_t *p, size_t len)
{
	while (len > 0) {
		ssize_t got = read(fd, p, len);

		if (got <= 0)
			return false;
		p += got;
		len -= (size_t)got;
	}
	return true;
}

/* One request, its answer: the kind; the value or integer in OUT. */
static int call(int fd, uint8_t op, const uint8_t *body, size_t len,
		uint8_t *out, size_t *outlen)
{
	static uint32_t ids;
	uint32_t id = __atomic_add_fetch(&ids, 1, __ATOMIC_RELAXED);
	uint8_t f[1024], head[9];
	uint32_t n, got_id;

	len = frame(f, id, op, body, len);
	if (write(fd, f, len) != (ssize_t)len || !read_all(fd, head, 9))
		return -1;
	memcpy(&n, head, 4);
	memcpy(&got_id, head + 4, 4);
	if (got_id != id || n - 5 > 1024 || !read_all(fd, out, n - 5))
		return -1;
	*outlen = n - 5;
	return head[8];
}

static int set(int fd, const char *key, const char *value)
{
	uint8_t b[256], out[1024];
	size_t n = put_str(b, key), len;

	n += put_str(b + n, value);
	return call(fd, DT_STORE_SET, b, n, out, &len);
}

/* GET: the value, as text, or "" and the kind in *KIND. */
static const char *get(int fd, const char *key, uint32_t ms, int *kind)
{
	static char text[256];
	uint8_t b[256], out[1024];
	size_t n = put_u32(b, ms), len;

	n += put_str(b + n, key);
	text[0] = '\0';
	*kind = call(fd, DT_STORE_GET, b, n, out, &len);
	if (*kind == DT_STORE_VALUE && len >= 4 && len - 4 < sizeof(text)) {
		memcpy(text, out + 4, len - 4);
		text[len - 4] = '\0';
	}
	return text;
}

static int64_t add(int fd, const char *key, int64_t amount)
{
	uint8_t b[256], out[1024];
	size_t n, len;
	int64_t v = INT64_MIN;

	memcpy(b, &amount, 8);
	n = 8 + put_str(b + 8, key);
	if (call(fd, DT_STORE_ADD, b, n, out, &len) == DT_STORE_INT)
		memcpy(&v, out, 8);
	return v;
}

struct waited {
	int fd, kind;
};

static void *wait_for_b(void *arg)
{
	struct waited *w = arg;
	uint8_t b[64], out[64];
	size_t n = put_u32(b, 5000), len;

	n += put_u32(b + n, 2);
	n += put_str(b + n, "wa");
	n += put_str(b + n, "wb");
	w->kind = call(w->fd, DT_STORE_WAIT, b, n, out, &len);
	return NULL;
}

static void test_tree(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	struct dt_store_loop *loop = dt_store_loop_new();
	int lfd = socket(AF_INET, SOCK_STREAM, 0), up1, up2, r1, r2, r3, kind;
	char name1[64], name2[64];
	uint8_t b[256], out[1024], f[64] = { 0 };
	size_t n, len;
	pthread_t thread, waiter;
	struct waited w;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(loop);
	CU_ASSERT_EQUAL_FATAL(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	CU_ASSERT_EQUAL_FATAL(getsockname(lfd, (struct sockaddr *)&a, &alen),
			      0);
	CU_ASSERT_EQUAL_FATAL(dt_store_loop_serve(loop, lfd), 0);
	snprintf(name1, sizeof(name1), "test-store-tree-%d-1", (int)getpid());
	snprintf(name2, sizeof(name2), "test-store-tree-%d-2", (int)getpid());
	up1 = socket(AF_INET, SOCK_STREAM, 0);
	up2 = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_EQUAL_FATAL(connect(up1, (struct sockaddr *)&a, alen), 0);
	CU_ASSERT_EQUAL_FATAL(connect(up2, (struct sockaddr *)&a, alen), 0);
	CU_ASSERT_EQUAL_FATAL(dt_store_loop_relay(loop, relay_socket(name1),
						  up1), 0);
	CU_ASSERT_EQUAL_FATAL(dt_store_loop_relay(loop, relay_socket(name2),
						  up2), 0);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&thread, NULL, run, loop), 0);
	/* Two ranks on node 1, one on node 2. */
	r1 = rank_socket(name1);
	r2 = rank_socket(name1);
	r3 = rank_socket(name2);
	CU_ASSERT_FATAL(r1 >= 0 && r2 >= 0 && r3 >= 0);

	/* A read waits for the key; node 1's copy is kept, then dropped
	 * when node 2 changes the key. */
	CU_ASSERT_STRING_EQUAL(get(r1, "k", 100, &kind), "");
	CU_ASSERT_EQUAL(kind, DT_STORE_TIMEOUT);
	CU_ASSERT_EQUAL(set(r3, "k", "one"), DT_STORE_OK);
	CU_ASSERT_STRING_EQUAL(get(r1, "k", 1000, &kind), "one");
	CU_ASSERT_STRING_EQUAL(get(r2, "k", 1000, &kind), "one");
	/* The write is answered only once node 1 dropped its copy: a rank
	 * of node 1 that reads after it, with no pause, reads the new value
	 * (the fence, common/store_tree.h). */
	CU_ASSERT_EQUAL(set(r3, "k", "two"), DT_STORE_OK);
	CU_ASSERT_STRING_EQUAL(get(r2, "k", 1000, &kind), "two");
	CU_ASSERT_STRING_EQUAL(get(r1, "k", 1000, &kind), "two");

	/* add, on every node; an integer's text is what get reads; a node
	 * with a copy sees each new count at once. */
	CU_ASSERT_EQUAL(add(r1, "n", 2), 2);
	CU_ASSERT_EQUAL(add(r3, "n", 5), 7);
	CU_ASSERT_STRING_EQUAL(get(r2, "n", 1000, &kind), "7");
	CU_ASSERT_STRING_EQUAL(get(r3, "n", 1000, &kind), "7");
	for (int i = 0; i < 50; i++) {
		char want[16];

		snprintf(want, sizeof(want), "%d", 8 + i);
		CU_ASSERT_EQUAL(add(i % 2 ? r1 : r3, "n", 1), 8 + i);
		CU_ASSERT_STRING_EQUAL(get(i % 2 ? r3 : r2, "n", 1000, &kind),
				       want);
	}
	CU_ASSERT_EQUAL(add(r1, "k", 1), INT64_MIN);	/* not an integer */

	/* A wait for two keys, answered when the second comes. */
	w.fd = r2;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&waiter, NULL, wait_for_b, &w),
			      0);
	CU_ASSERT_EQUAL(set(r3, "wa", "x"), DT_STORE_OK);
	usleep(20000);
	CU_ASSERT_EQUAL(set(r1, "wb", "y"), DT_STORE_OK);
	pthread_join(waiter, NULL);
	CU_ASSERT_EQUAL(w.kind, DT_STORE_OK);

	/* check, compare_set, delete, the number of keys, append. */
	n = put_u32(b, 2);
	n += put_str(b + n, "wa");
	n += put_str(b + n, "none");
	CU_ASSERT_EQUAL(call(r1, DT_STORE_CHECK, b, n, out, &len),
			DT_STORE_INT);
	CU_ASSERT_EQUAL(out[0], 0);
	n = put_str(b, "c");
	n += put_str(b + n, "");
	n += put_str(b + n, "first");
	CU_ASSERT_EQUAL(call(r1, DT_STORE_CAS, b, n, out, &len),
			DT_STORE_VALUE);
	CU_ASSERT_EQUAL(memcmp(out + 4, "first", 5), 0);
	CU_ASSERT_EQUAL(call(r1, DT_STORE_NUM_KEYS, b, 0, out, &len),
			DT_STORE_INT);
	CU_ASSERT_EQUAL(out[0], 5);	/* k n wa wb c */
	n = put_str(b, "c");
	CU_ASSERT_EQUAL(call(r3, DT_STORE_DELETE, b, n, out, &len),
			DT_STORE_INT);
	CU_ASSERT_EQUAL(out[0], 1);
	n = put_str(b, "wa");
	n += put_str(b + n, "z");
	CU_ASSERT_EQUAL(call(r3, DT_STORE_APPEND, b, n, out, &len),
			DT_STORE_OK);
	CU_ASSERT_STRING_EQUAL(get(r1, "wa", 1000, &kind), "xz");

	/* A rank may not speak for its relay: DROPPED ends its connection. */
	n = put_str(b, "k");
	CU_ASSERT_EQUAL(call(r3, DT_STORE_DROPPED, b, n, out, &len), -1);
	close(r3);
	r3 = rank_socket(name2);
	CU_ASSERT_EQUAL(set(r3, "k", "three"), DT_STORE_OK);
	CU_ASSERT_STRING_EQUAL(get(r1, "k", 1000, &kind), "three");

	/* A frame out of bounds ends that rank's connection, not others'. */
	put_u32(f, DT_STORE_FRAME_MAX + 1);
	CU_ASSERT_EQUAL(write(r2, f, 9), 9);
	CU_ASSERT_EQUAL(read(r2, f, 1), 0);
	CU_ASSERT_STRING_EQUAL(get(r1, "wa", 1000, &kind), "xz");

	/* A node that holds a copy goes (its relay's connection up ends):
	 * a write on another node is not held for it. */
	CU_ASSERT_STRING_EQUAL(get(r1, "gone", 100, &kind), "");
	CU_ASSERT_EQUAL(set(r3, "gone", "1"), DT_STORE_OK);
	CU_ASSERT_STRING_EQUAL(get(r1, "gone", 1000, &kind), "1");
	CU_ASSERT_STRING_EQUAL(get(r3, "gone", 1000, &kind), "1");
	shutdown(up1, SHUT_RDWR);
	CU_ASSERT_EQUAL(set(r3, "gone", "2"), DT_STORE_OK);
	CU_ASSERT_STRING_EQUAL(get(r3, "gone", 1000, &kind), "2");

	close(r1);
	close(r2);
	close(r3);
	stop_loop = 1;
	pthread_join(thread, NULL);
	dt_store_loop_free(loop);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_parse),
	UNIT_TEST(test_compare_set),
	UNIT_TEST(test_tree),
};

UNIT_MAIN("store_tree", tests)
