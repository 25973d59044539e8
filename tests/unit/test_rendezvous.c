/*
 * The start barrier's protocol: proof before belief, strangers bounded,
 * and the "who is missing" summary.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "../../common/rendezvous.h"

/* The fix the refusals end with. */
#define ONE_RELEASE \
	"ask your administrator to install one dist-train release on every " \
	"node"

static const uint8_t secret[DT_SECRET_LEN] = { 1, 2, 3, 4, 5, 6, 7, 8 };
static const uint8_t other_secret[DT_SECRET_LEN] = { 9 };
static const uint8_t seed[DT_RDV_NONCE_LEN] = { 0xaa, 0xbb };

static struct dt_rdv_server *server(uint32_t world, uint32_t max_pending)
{
	struct dt_rdv_server_config c = {
		.world = world, .secret = secret, .seed = seed,
		.host = "n1", .port = 20001, .nccl_ok = true,
		.max_pending = max_pending, .hello_ms = 1000,
	};

	return dt_rdv_server_new(&c);
}

/* A connection of rank RANK accepted at NOW: its id and its hello,
 * made with KEY for that connection's challenge. */
static uint32_t connect_rank(struct dt_rdv_server *s, uint64_t now,
			     const uint8_t *key, uint32_t rank,
			     uint32_t world, const char *host,
			     uint8_t cnonce[DT_RDV_NONCE_LEN], char *hello,
			     size_t len)
{
	struct dt_rdv_hello h = { &rank, 1, world, "", true };
	char challenge[DT_RDV_LINE_MAX];
	uint32_t id, evicted;
	int n;

	snprintf(h.host, sizeof(h.host), "%s", host);
	memset(cnonce, (int)rank, DT_RDV_NONCE_LEN);
	n = dt_rdv_accept(s, now, &id, &evicted, challenge,
			  sizeof(challenge));
	CU_ASSERT(n > 0 && challenge[n - 1] == '\n');
	challenge[n - 1] = '\0';
	CU_ASSERT(dt_rdv_hello_line(key, cnonce, challenge, &h, hello,
				    len) > 0);
	return id;
}

static enum dt_rdv_verdict say(struct dt_rdv_server *s, uint32_t id,
			       const char *text, char *out, size_t *out_len)
{
	return dt_rdv_input(s, id, text, strlen(text), out, DT_RDV_LINE_MAX,
			    out_len);
}

static void test_round_trip(void)
{
	struct dt_rdv_server *s = server(3, 8);
	struct dt_rdv_reply ok = { .ok = true, .address = "10.1.2.3",
				   .port = 20256, .nccl_port = 20257,
				   .nccl_check = true };
	struct dt_rdv_reply back;
	uint8_t c1[DT_RDV_NONCE_LEN], c2[DT_RDV_NONCE_LEN];
	char h1[DT_RDV_LINE_MAX], h2[DT_RDV_LINE_MAX], out[DT_RDV_LINE_MAX];
	uint32_t id1, id2;
	size_t out_len;
	int n;

	id1 = connect_rank(s, 0, secret, 1, 3, "n2", c1, h1, sizeof(h1));
	id2 = connect_rank(s, 0, secret, 2, 3, "n3", c2, h2, sizeof(h2));
	CU_ASSERT_EQUAL(strncmp(h1, "DTB2 1 3 n2 1 ", 14), 0);
	/* Split anywhere: a line is a line. */
	CU_ASSERT_EQUAL(dt_rdv_input(s, id1, h1, 10, out, sizeof(out),
				     &out_len), DT_RDV_WAIT);
	CU_ASSERT_EQUAL(say(s, id1, h1 + 10, out, &out_len), DT_RDV_JOINED);
	CU_ASSERT_FALSE(dt_rdv_complete(s));
	CU_ASSERT_EQUAL(say(s, id2, h2, out, &out_len), DT_RDV_JOINED);
	CU_ASSERT_TRUE(dt_rdv_complete(s));
	CU_ASSERT_TRUE(dt_rdv_all_nccl(s));
	CU_ASSERT_EQUAL(dt_rdv_rank_of(s, id2), 2);

	n = dt_rdv_answer(s, id1, &ok, out, sizeof(out));
	CU_ASSERT(n > 0 && out[n - 1] == '\n');
	out[n - 1] = '\0';
	CU_ASSERT_EQUAL(strncmp(out, "OK ", 3), 0);
	CU_ASSERT_EQUAL(dt_rdv_read_answer(secret, c1, out, &back), 0);
	CU_ASSERT_TRUE(back.ok && back.nccl_check);
	CU_ASSERT_STRING_EQUAL(back.address, "10.1.2.3");
	CU_ASSERT_EQUAL(back.port, 20256);
	CU_ASSERT_EQUAL(back.nccl_port, 20257);
	/* Made for rank 1's connection: worthless on rank 2's, or to
	 * anyone without the secret. */
	CU_ASSERT_EQUAL(dt_rdv_read_answer(secret, c2, out, &back), -1);
	CU_ASSERT_EQUAL(dt_rdv_read_answer(other_secret, c1, out, &back), -1);
	/* Any change breaks it. */
	out[strlen(out) - 1] = out[strlen(out) - 1] == '1' ? '0' : '1';
	CU_ASSERT_EQUAL(dt_rdv_read_answer(secret, c1, out, &back), -1);
	dt_rdv_server_free(s);
}

/* Rank 0 proves itself too, and names its port: a program that holds
 * the port a leader tried, or relays rank 0 from another, is told apart. */
static void test_challenge_proven(void)
{
	struct dt_rdv_server *s = server(3, 8);
	char challenge[DT_RDV_LINE_MAX], bad[DT_RDV_LINE_MAX + 2];
	uint32_t id, evicted;
	int n;

	n = dt_rdv_accept(s, 0, &id, &evicted, challenge, sizeof(challenge));
	CU_ASSERT(n > 0);
	challenge[n - 1] = '\0';
	CU_ASSERT_EQUAL(strncmp(challenge, "DTB2 ", 5), 0);
	CU_ASSERT_EQUAL(dt_rdv_challenge_ok(secret, challenge, 20001), 0);
	CU_ASSERT_EQUAL(dt_rdv_challenge_ok(other_secret, challenge, 20001),
			-1);
	CU_ASSERT_EQUAL(dt_rdv_challenge_ok(secret, challenge, 20002), -1);
	snprintf(bad, sizeof(bad), "%s", challenge);
	bad[5] ^= 1;		/* another nonce */
	CU_ASSERT_EQUAL(dt_rdv_challenge_ok(secret, bad, 20001), -1);
	snprintf(bad, sizeof(bad), "%s0", challenge);
	CU_ASSERT_EQUAL(dt_rdv_challenge_ok(secret, bad, 20001), -1);
	snprintf(bad, sizeof(bad), "%.37s", challenge);	/* "DTB2 NONCE" */
	CU_ASSERT_EQUAL(dt_rdv_challenge_ok(secret, bad, 20001), -1);
	CU_ASSERT_EQUAL(dt_rdv_challenge_ok(secret, "DTB2 ", 20001), -1);
	CU_ASSERT_EQUAL(dt_rdv_challenge_ok(secret, "", 20001), -1);
	dt_rdv_server_free(s);
}

static void test_strangers_dropped(void)
{
	struct dt_rdv_server *s = server(4, 8);
	uint8_t c[DT_RDV_NONCE_LEN];
	char h[DT_RDV_LINE_MAX], h2[DT_RDV_LINE_MAX], out[DT_RDV_LINE_MAX];
	char *p;
	uint32_t id, id2;
	size_t out_len;

	/* The wrong secret. */
	id = connect_rank(s, 0, other_secret, 1, 4, "n2", c, h, sizeof(h));
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_DROP);
	CU_ASSERT_EQUAL(out_len, 0);
	/* A forged word: rank 1 claimed as rank 3 under rank 1's MAC. */
	id = connect_rank(s, 0, secret, 1, 4, "n2", c, h, sizeof(h));
	p = strchr(h, ' ') + 1;
	*p = '3';
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_DROP);
	/* A real hello replayed on another connection. */
	id = connect_rank(s, 0, secret, 2, 4, "n2", c, h, sizeof(h));
	id2 = connect_rank(s, 0, secret, 2, 4, "n2", c, h2, sizeof(h2));
	CU_ASSERT_EQUAL(say(s, id2, h, out, &out_len), DT_RDV_DROP);
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_JOINED);
	/* Garbage, the old protocol, two lines, a NUL, a line too long. */
	id = connect_rank(s, 0, secret, 3, 4, "n2", c, h, sizeof(h));
	CU_ASSERT_EQUAL(say(s, id, "DTB1 3 4 n2 1\n", out, &out_len),
			DT_RDV_DROP);
	id = connect_rank(s, 0, secret, 3, 4, "n2", c, h, sizeof(h));
	strcat(h, "x\n");
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_DROP);
	id = connect_rank(s, 0, secret, 3, 4, "n2", c, h, sizeof(h));
	CU_ASSERT_EQUAL(dt_rdv_input(s, id, "a\0b\n", 4, out, sizeof(out),
				     &out_len), DT_RDV_DROP);
	id = connect_rank(s, 0, secret, 3, 4, "n2", c, h, sizeof(h));
	memset(h, 'x', DT_RDV_LINE_MAX - 2);
	CU_ASSERT_EQUAL(dt_rdv_input(s, id, h, DT_RDV_LINE_MAX - 2, out,
				     sizeof(out), &out_len), DT_RDV_WAIT);
	CU_ASSERT_EQUAL(say(s, id, "xx", out, &out_len), DT_RDV_DROP);
	CU_ASSERT_EQUAL(dt_rdv_joined(s), 2);
	/* The real rank 3 still gets in. */
	id = connect_rank(s, 0, secret, 3, 4, "n4", c, h, sizeof(h));
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_JOINED);
	CU_ASSERT_FALSE(dt_rdv_complete(s));
	dt_rdv_server_free(s);
}

/* Read the FAIL in OUT as the rank that sent the hello with CNONCE. */
static const char *refusal(char *out, size_t out_len, const uint8_t *cnonce)
{
	static struct dt_rdv_reply r;

	CU_ASSERT(out_len > 0 && out[out_len - 1] == '\n');
	out[out_len - 1] = '\0';
	CU_ASSERT_EQUAL(dt_rdv_read_answer(secret, cnonce, out, &r), 0);
	CU_ASSERT_FALSE(r.ok);
	return r.message;
}

static void test_real_ranks_refused(void)
{
	struct dt_rdv_server *s = server(4, 8);
	uint8_t c[DT_RDV_NONCE_LEN];
	char h[DT_RDV_LINE_MAX], out[DT_RDV_LINE_MAX];
	uint32_t id;
	size_t out_len;

	id = connect_rank(s, 0, secret, 2, 4, "n2", c, h, sizeof(h));
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_JOINED);
	id = connect_rank(s, 0, secret, 2, 4, "n5", c, h, sizeof(h));
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_REFUSE);
	CU_ASSERT_STRING_EQUAL(refusal(out, out_len, c),
			       "rank 2 arrived twice (again from n5): "
			       ONE_RELEASE);
	id = connect_rank(s, 0, secret, 7, 8, "n6", c, h, sizeof(h));
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_REFUSE);
	CU_ASSERT_STRING_EQUAL(refusal(out, out_len, c),
			       "rank 7 on n6 says the step has 8 tasks, rank 0 "
			       "on n1 says 4: " ONE_RELEASE);
	id = connect_rank(s, 0, secret, 0, 4, "n6", c, h, sizeof(h));
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_REFUSE);
	CU_ASSERT_STRING_EQUAL(refusal(out, out_len, c),
			       "n6 says it runs rank 0, which is not one rank 0 "
			       "on n1 waits for (1-3): " ONE_RELEASE);
	CU_ASSERT_EQUAL(dt_rdv_joined(s), 2);
	dt_rdv_server_free(s);
}

static void test_bounded_strangers(void)
{
	struct dt_rdv_server *s = server(3, 2);
	uint8_t c[DT_RDV_NONCE_LEN];
	char h[DT_RDV_LINE_MAX], out[DT_RDV_LINE_MAX];
	uint32_t idle1, idle2, id, evicted, gone;
	size_t out_len;

	CU_ASSERT_EQUAL(dt_rdv_server_slots(s), 4);
	dt_rdv_accept(s, 0, &idle1, &evicted, out, sizeof(out));
	CU_ASSERT_EQUAL(evicted, DT_RDV_NONE);
	dt_rdv_accept(s, 10, &idle2, &evicted, out, sizeof(out));
	CU_ASSERT_EQUAL(evicted, DT_RDV_NONE);
	/* Full: the real rank, arriving last, evicts the oldest stranger. */
	id = connect_rank(s, 20, secret, 1, 3, "n2", c, h, sizeof(h));
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_JOINED);
	/* Strangers keep coming: only strangers go. */
	dt_rdv_accept(s, 30, &id, &evicted, out, sizeof(out));
	CU_ASSERT_EQUAL(evicted, DT_RDV_NONE);
	for (int i = 0; i < 100; i++) {
		dt_rdv_accept(s, 30, &id, &evicted, out, sizeof(out));
		CU_ASSERT(evicted != DT_RDV_NONE);
		CU_ASSERT_EQUAL(dt_rdv_rank_of(s, evicted), -1);
	}
	CU_ASSERT_EQUAL(dt_rdv_joined(s), 2);
	/* Time is up for the unproven, oldest first, not for the rank. */
	CU_ASSERT_EQUAL(dt_rdv_next_expiry(s), 1030);
	CU_ASSERT_EQUAL(dt_rdv_expired(s, 1029), DT_RDV_NONE);
	gone = dt_rdv_expired(s, 1030);
	CU_ASSERT(gone != DT_RDV_NONE);
	CU_ASSERT(dt_rdv_expired(s, 1030) != DT_RDV_NONE);
	CU_ASSERT_EQUAL(dt_rdv_expired(s, 1030), DT_RDV_NONE);
	CU_ASSERT_EQUAL(dt_rdv_next_expiry(s), UINT64_MAX);
	CU_ASSERT_EQUAL(dt_rdv_joined(s), 2);
	dt_rdv_server_free(s);
}

static void test_rank_leaves(void)
{
	struct dt_rdv_server *s = server(3, 4);
	uint8_t c[DT_RDV_NONCE_LEN];
	char h[DT_RDV_LINE_MAX], out[DT_RDV_LINE_MAX], who[64];
	uint32_t id;
	size_t out_len;

	id = connect_rank(s, 0, secret, 2, 3, "n3", c, h, sizeof(h));
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_JOINED);
	CU_ASSERT_EQUAL(dt_rdv_server_missing(s, NULL, NULL, who,
					      sizeof(who)), 1);
	CU_ASSERT_STRING_EQUAL(who, "rank 1");
	/* Hung up before the answer: missing again, and may come back. */
	dt_rdv_closed(s, id);
	CU_ASSERT_EQUAL(dt_rdv_server_missing(s, NULL, NULL, who,
					      sizeof(who)), 2);
	CU_ASSERT_STRING_EQUAL(who, "ranks 1-2");
	id = connect_rank(s, 0, secret, 2, 3, "n3", c, h, sizeof(h));
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_JOINED);
	dt_rdv_server_free(s);
}

static void test_long_refusal_cut(void)
{
	struct dt_rdv_server *s = server(2, 4);
	struct dt_rdv_reply fail = { .ok = false }, back;
	uint8_t c[DT_RDV_NONCE_LEN];
	char h[DT_RDV_LINE_MAX], out[DT_RDV_LINE_MAX];
	uint32_t id;
	size_t out_len;
	int n;

	id = connect_rank(s, 0, secret, 1, 2, "n2", c, h, sizeof(h));
	CU_ASSERT_EQUAL(say(s, id, h, out, &out_len), DT_RDV_JOINED);
	memset(fail.message, 'm', sizeof(fail.message) - 1);
	n = dt_rdv_answer(s, id, &fail, out, sizeof(out));
	CU_ASSERT(n > 0 && n < DT_RDV_LINE_MAX);
	out[n - 1] = '\0';
	CU_ASSERT_EQUAL(dt_rdv_read_answer(secret, c, out, &back), 0);
	CU_ASSERT(strlen(back.message) > 400);
	dt_rdv_server_free(s);
}

/* A node's leader speaks for all its ranks in one hello. */
static void test_node_hellos(void)
{
	struct dt_rdv_server *s = server(12, 8);
	static const uint32_t node2[] = { 1, 2, 3, 7 }, node3[] = { 4, 5, 6 };
	static const uint32_t overlap[] = { 6, 8 }, unsorted[] = { 9, 8 };
	struct dt_rdv_hello h = { node2, 4, 12, "n2", true };
	struct dt_rdv_reply r;
	uint8_t c[DT_RDV_NONCE_LEN] = { 3 };
	char challenge[DT_RDV_LINE_MAX], line[DT_RDV_LINE_MAX];
	char out[DT_RDV_LINE_MAX], who[64];
	uint32_t id, ev;
	size_t out_len;
	int n;

	n = dt_rdv_accept(s, 0, &id, &ev, challenge, sizeof(challenge));
	challenge[n - 1] = '\0';
	CU_ASSERT(dt_rdv_hello_line(secret, c, challenge, &h, line,
				    sizeof(line)) > 0);
	CU_ASSERT_EQUAL(strncmp(line, "DTB2 1-3,7 12 n2 1 ", 19), 0);
	CU_ASSERT_EQUAL(say(s, id, line, out, &out_len), DT_RDV_JOINED);
	CU_ASSERT_EQUAL(dt_rdv_joined(s), 5);

	h.ranks = node3;
	h.nranks = 3;
	snprintf(h.host, sizeof(h.host), "n3");
	n = dt_rdv_accept(s, 0, &id, &ev, challenge, sizeof(challenge));
	challenge[n - 1] = '\0';
	dt_rdv_hello_line(secret, c, challenge, &h, line, sizeof(line));
	CU_ASSERT_EQUAL(say(s, id, line, out, &out_len), DT_RDV_JOINED);
	CU_ASSERT_EQUAL(dt_rdv_joined(s), 8);

	/* One rank already there refuses the whole hello. */
	h.ranks = overlap;
	h.nranks = 2;
	n = dt_rdv_accept(s, 0, &id, &ev, challenge, sizeof(challenge));
	challenge[n - 1] = '\0';
	dt_rdv_hello_line(secret, c, challenge, &h, line, sizeof(line));
	CU_ASSERT_EQUAL(say(s, id, line, out, &out_len), DT_RDV_REFUSE);
	out[out_len - 1] = '\0';
	CU_ASSERT_EQUAL(dt_rdv_read_answer(secret, c, out, &r), 0);
	CU_ASSERT_STRING_EQUAL(r.message, "rank 6 arrived twice (again from "
			       "n3): " ONE_RELEASE);
	CU_ASSERT_EQUAL(dt_rdv_joined(s), 8);
	/* A list out of order is not made, nor read. */
	h.ranks = unsorted;
	CU_ASSERT_EQUAL(dt_rdv_hello_line(secret, c, challenge, &h, line,
					  sizeof(line)), -1);

	/* Rank 0's own node: its members, through rank 0. */
	CU_ASSERT_EQUAL(dt_rdv_join_member(s, 8, true, "n1", out,
					   sizeof(out)), 0);
	CU_ASSERT_EQUAL(dt_rdv_join_member(s, 8, true, "n1", out,
					   sizeof(out)), -1);
	CU_ASSERT_STRING_EQUAL(out, "rank 8 arrived twice (again from n1): "
			       ONE_RELEASE);
	CU_ASSERT_EQUAL(dt_rdv_join_member(s, 12, true, "n1", out,
					   sizeof(out)), -1);
	CU_ASSERT_EQUAL(dt_rdv_server_missing(s, NULL, NULL, who,
					      sizeof(who)), 3);
	CU_ASSERT_STRING_EQUAL(who, "ranks 9-11");
	dt_rdv_leave_member(s, 8, true);
	CU_ASSERT_EQUAL(dt_rdv_joined(s), 8);
	/* The node that leaves takes all its ranks with it. */
	dt_rdv_closed(s, id - 1);
	CU_ASSERT_EQUAL(dt_rdv_joined(s), 5);
	dt_rdv_server_free(s);
}

static void test_members(void)
{
	struct dt_rdv_reply ok = { .ok = true, .address = "10.0.0.1",
				   .port = 29500, .nccl_port = 1234 }, back;
	uint8_t c[DT_RDV_NONCE_LEN] = { 5 }, c2[DT_RDV_NONCE_LEN];
	char line[DT_RDV_LINE_MAX], name[DT_RDV_NODE_SOCKET_LEN + 1];
	char name2[DT_RDV_NODE_SOCKET_LEN + 1];
	uint32_t rank;
	bool nccl;
	int n;

	n = dt_rdv_member_line(17, true, c, line, sizeof(line));
	CU_ASSERT(n > 0 && line[n - 1] == '\n');
	line[n - 1] = '\0';
	CU_ASSERT_EQUAL(dt_rdv_parse_member(line, &rank, &nccl, c2), 0);
	CU_ASSERT_TRUE(rank == 17 && nccl && !memcmp(c, c2, sizeof(c)));
	CU_ASSERT_EQUAL(dt_rdv_parse_member("DTL1 17 1 00", &rank, &nccl, c2),
			-1);
	CU_ASSERT_EQUAL(dt_rdv_parse_member("DTB2 17 1", &rank, &nccl, c2),
			-1);

	/* The leader's answer, as rank 0's: for this member only. */
	n = dt_rdv_answer_for(secret, c, &ok, line, sizeof(line));
	CU_ASSERT(n > 0);
	line[n - 1] = '\0';
	CU_ASSERT_EQUAL(dt_rdv_read_answer(secret, c, line, &back), 0);
	CU_ASSERT_EQUAL(back.nccl_port, 1234);
	CU_ASSERT_EQUAL(back.port, 29500);
	c2[0] ^= 1;
	CU_ASSERT_EQUAL(dt_rdv_read_answer(secret, c2, line, &back), -1);
	CU_ASSERT_FALSE(back.view.present);

	/* From a leader with PMIx, the member's view, proven with the rest. */
	ok.view = (struct dt_rdv_view){ .present = true, .local_rank = 3,
		.local_size = 5, .world = 8, .node_id = 0, .num_nodes = 4,
		.rank0_host = "n1" };
	n = dt_rdv_answer_for(secret, c, &ok, line, sizeof(line));
	CU_ASSERT(n > 0);
	line[n - 1] = '\0';
	CU_ASSERT_PTR_NOT_NULL(strstr(line, " 29500 1234 0 3 5 8 0 4 n1"));
	CU_ASSERT_EQUAL(dt_rdv_read_answer(secret, c, line, &back), 0);
	CU_ASSERT_TRUE(back.ok && back.view.present &&
		       back.view.local_rank == 3 && back.view.local_size == 5 &&
		       back.view.world == 8 && back.view.node_id == 0 &&
		       back.view.num_nodes == 4 && back.port == 29500);
	CU_ASSERT_STRING_EQUAL(back.view.rank0_host, "n1");
	line[n - 2] = '2';	/* "n2": the MAC no longer holds */
	CU_ASSERT_EQUAL(dt_rdv_read_answer(secret, c, line, &back), -1);
	/* A view that contradicts itself is refused by its reader; one
	 * without rank 0's host is not even made. */
	ok.view.local_rank = 5;
	CU_ASSERT_EQUAL(dt_rdv_answer_for(secret, c, &ok, line, sizeof(line)) > 0,
			true);
	line[strlen(line) - 1] = '\0';
	CU_ASSERT_EQUAL(dt_rdv_read_answer(secret, c, line, &back), -1);
	ok.view.rank0_host[0] = '\0';
	CU_ASSERT_EQUAL(dt_rdv_answer_for(secret, c, &ok, line, sizeof(line)),
			-1);

	/* The proven words alone. */
	CU_ASSERT_EQUAL(dt_rdv_parse_ok("10.0.0.1 9 1234 1", &back), 0);
	CU_ASSERT_TRUE(back.port == 9 && back.nccl_check &&
		       !back.view.present);
	CU_ASSERT_EQUAL(dt_rdv_parse_ok("10.0.0.1 9 1234 1 0 1 1 0 1 h",
					&back), 0);
	CU_ASSERT_TRUE(back.view.present && back.view.world == 1);
	CU_ASSERT_EQUAL(dt_rdv_parse_ok("10.0.0.1 0 1234 1 0 1 1 0 1 h",
					&back), -1);	/* port 0 */
	CU_ASSERT_EQUAL(dt_rdv_parse_ok("10.0.0.1 1234 1", &back),
			-1);	/* no port */
	CU_ASSERT_EQUAL(dt_rdv_parse_ok("10.0.0.1 9 1234 1 0 2 1 0 1 h",
					&back), -1);	/* 2 local of 1 */
	CU_ASSERT_EQUAL(dt_rdv_parse_ok("10.0.0.1 9 1234 1 0 1 4 4 4 h",
					&back), -1);	/* node 4 of 4 */
	CU_ASSERT_EQUAL(dt_rdv_parse_ok("10.0.0.1 9 1234 1 0 1 1 0 1 h x",
					&back), -1);
	CU_ASSERT_EQUAL(dt_rdv_parse_ok("10.0.0.1 9 1234 1 0 1 1 0 1",
					&back), -1);
	CU_ASSERT_EQUAL(dt_rdv_parse_ok("10.0.0.1 9 1234 1 ", &back), -1);
	CU_ASSERT_FALSE(back.ok);

	/* The node socket: from the secret, per step and host. */
	dt_rdv_node_socket(secret, "7.0", "n1", name);
	CU_ASSERT_EQUAL(strlen(name), DT_RDV_NODE_SOCKET_LEN);
	CU_ASSERT_EQUAL(strncmp(name, "dist-train-", 11), 0);
	dt_rdv_node_socket(secret, "7.0", "n2", name2);
	CU_ASSERT_STRING_NOT_EQUAL(name, name2);
	dt_rdv_node_socket(other_secret, "7.0", "n1", name2);
	CU_ASSERT_STRING_NOT_EQUAL(name, name2);
}

static void test_secret_text(void)
{
	uint8_t back[DT_SECRET_LEN];
	char hex[DT_SECRET_HEX + 2];	/* room for one digit too many */

	dt_secret_format(secret, hex);
	CU_ASSERT_EQUAL(strlen(hex), 64);
	CU_ASSERT_EQUAL(strncmp(hex, "0102030405060708", 16), 0);
	CU_ASSERT_EQUAL(dt_secret_parse(hex, back), 0);
	CU_ASSERT_EQUAL(memcmp(back, secret, sizeof(back)), 0);
	hex[63] = 'g';
	CU_ASSERT_EQUAL(dt_secret_parse(hex, back), -1);
	CU_ASSERT_EQUAL(dt_secret_parse("abcd", back), -1);
	CU_ASSERT_EQUAL(dt_secret_parse(NULL, back), -1);
	hex[63] = '0';
	strcat(hex, "0");
	CU_ASSERT_EQUAL(dt_secret_parse(hex, back), -1);
}

static const char *const hosts[] = {
	"n1", "n1", "n1", "n1", "n1", "n2", "n3", "n3", "n4", NULL,
};

static const char *host_of(uint32_t rank, void *arg)
{
	(void)arg;
	return rank < 10 ? hosts[rank] : NULL;
}

static void test_missing_summary(void)
{
	bool arrived[10] = { true, true, false, false, true, true, false,
			     false, false, false };
	char buf[256];

	CU_ASSERT_EQUAL(dt_rdv_describe_missing(arrived, 10, host_of, NULL,
						buf, sizeof(buf)), 6);
	CU_ASSERT_STRING_EQUAL(buf, "ranks 2-3 (n1), ranks 6-7 (n3), "
			       "rank 8 (n4), rank 9");
	CU_ASSERT_EQUAL(dt_rdv_describe_missing(arrived, 10, NULL, NULL, buf,
						sizeof(buf)), 6);
	CU_ASSERT_STRING_EQUAL(buf, "ranks 2-3, ranks 6-9");
	/* Too long: cut, and says so. */
	CU_ASSERT_EQUAL(dt_rdv_describe_missing(arrived, 10, host_of, NULL,
						buf, 24), 6);
	CU_ASSERT_STRING_EQUAL(buf, "ranks 2-3 (n1), ...");
}

static void test_missing_many(void)
{
	static bool arrived[100000];
	char buf[1024];

	memset(arrived, 1, sizeof(arrived));
	for (int i = 0; i < 100000; i += 2)
		arrived[i] = false;
	CU_ASSERT_EQUAL(dt_rdv_describe_missing(arrived, 100000, NULL, NULL,
						buf, sizeof(buf)), 50000);
	CU_ASSERT(strlen(buf) < sizeof(buf));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, ", ..."));
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_round_trip),
	UNIT_TEST(test_challenge_proven),
	UNIT_TEST(test_strangers_dropped),
	UNIT_TEST(test_real_ranks_refused),
	UNIT_TEST(test_bounded_strangers),
	UNIT_TEST(test_rank_leaves),
	UNIT_TEST(test_long_refusal_cut),
	UNIT_TEST(test_node_hellos),
	UNIT_TEST(test_members),
	UNIT_TEST(test_secret_text),
	UNIT_TEST(test_missing_summary),
	UNIT_TEST(test_missing_many),
};

UNIT_MAIN("rendezvous", tests)
