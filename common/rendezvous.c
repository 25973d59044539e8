/*
 * The start barrier's protocol (see rendezvous.h). The MACs are
 * HMAC-SHA256 from nettle, compared in constant time.
 */
#include "config.h"

#include "rendezvous.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>

#define MAGIC "DTB2"
#define MAC_HEX (2 * SHA256_DIGEST_SIZE)
#define NONCE_HEX (2 * DT_RDV_NONCE_LEN)

/*
 * HMAC(KEY, DOMAIN NONCE_HEX " " BODY) in hex. KEY is a keyed context,
 * copied so that the caller's stays ready for the next message.
 */
static void mac_hex(const struct hmac_sha256_ctx *key, const char *domain,
		    const char *nonce_hex, const char *body, size_t body_len,
		    char out[MAC_HEX + 1])
{
	struct hmac_sha256_ctx ctx = *key;
	uint8_t digest[SHA256_DIGEST_SIZE];

	hmac_sha256_update(&ctx, strlen(domain), (const uint8_t *)domain);
	hmac_sha256_update(&ctx, NONCE_HEX, (const uint8_t *)nonce_hex);
	hmac_sha256_update(&ctx, 1, (const uint8_t *)" ");
	hmac_sha256_update(&ctx, body_len, (const uint8_t *)body);
	hmac_sha256_digest(&ctx, sizeof(digest), digest);
	dt_hex_encode(digest, sizeof(digest), out);
}

static bool mac_equal(const char *a, const char *b)
{
	return memeql_sec(a, b, MAC_HEX) != 0;
}

#define CHALLENGE_DOMAIN "dist-train challenge "
#define HELLO_DOMAIN "dist-train hello "
#define ANSWER_DOMAIN "dist-train answer "
/* The fix where the ranks of one step disagree on what it is. */
#define ONE_RELEASE \
	"ask your administrator to install one dist-train release on " \
	"every node"

static bool valid_word(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

/* A decimal number in [0, MAX] at *P, which moves past it. */
static int parse_num(const char **p, unsigned long max, unsigned long *out)
{
	char *end;

	if (**p < '0' || **p > '9')
		return -1;
	*out = strtoul(*p, &end, 10);
	if (*out > max)
		return -1;
	*p = end;
	return 0;
}

/* The next word of *P into BUF (a string shorter than LEN); moves *P to
 * what follows it (a space, or the end). */
static int take_word(const char **p, char *buf, size_t len)
{
	size_t n = strcspn(*p, " ");

	if (n == 0 || n >= len)
		return -1;
	memcpy(buf, *p, n);
	buf[n] = '\0';
	*p += n;
	return valid_word(buf) ? 0 : -1;
}

/* RANKS (N, ascending) as "3" or "8-15,17" into BUF; length or -1. */
static int format_ranks(const uint32_t *ranks, uint32_t n, char *buf,
			size_t len)
{
	size_t used = 0;

	if (n == 0)
		return -1;
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i;
		int w;

		while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
			j++;
		if (i > 0 && ranks[i] <= ranks[i - 1])
			return -1;
		if (j == i)
			w = snprintf(buf + used, len - used, "%s%u",
				     used ? "," : "", ranks[i]);
		else
			w = snprintf(buf + used, len - used, "%s%u-%u",
				     used ? "," : "", ranks[i], ranks[j]);
		if (w < 0 || (size_t)w >= len - used)
			return -1;
		used += (size_t)w;
		i = j + 1;
	}
	return (int)used;
}

/* The nonce of CHALLENGE ("DTB2 NONCE ..."); 0, or -1 if it has none. */
static int challenge_nonce(const char *challenge,
			   uint8_t nonce[DT_RDV_NONCE_LEN])
{
	if (strncmp(challenge, MAGIC " ", 5) ||
	    strnlen(challenge + 5, NONCE_HEX + 1) < NONCE_HEX + 1 ||
	    challenge[5 + NONCE_HEX] != ' ')
		return -1;
	return dt_hex_decode(challenge + 5, NONCE_HEX, nonce,
			     DT_RDV_NONCE_LEN) < 0 ? -1 : 0;
}

/* The words of a challenge after its nonce, "PORT MAC", made by KEY. */
static int challenge_proof(const struct hmac_sha256_ctx *key,
			   const char *nonce_hex, uint16_t port, char *buf,
			   size_t len)
{
	char port_text[8], mac[MAC_HEX + 1];
	int n = snprintf(port_text, sizeof(port_text), "%u", port);

	mac_hex(key, CHALLENGE_DOMAIN, nonce_hex, port_text, (size_t)n, mac);
	n = snprintf(buf, len, "%s %s", port_text, mac);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

int dt_rdv_challenge_ok(const uint8_t secret[DT_SECRET_LEN],
			const char *challenge, uint16_t port)
{
	struct hmac_sha256_ctx key;
	char proof[8 + MAC_HEX + 1];
	const char *words;
	uint8_t nonce[DT_RDV_NONCE_LEN];

	if (challenge_nonce(challenge, nonce) < 0)
		return -1;
	words = challenge + 5 + NONCE_HEX + 1;
	hmac_sha256_set_key(&key, DT_SECRET_LEN, secret);
	if (challenge_proof(&key, challenge + 5, port, proof,
			    sizeof(proof)) < 0 ||
	    strnlen(words, sizeof(proof)) != strlen(proof))
		return -1;
	return memeql_sec(words, proof, strlen(proof)) ? 0 : -1;
}

int dt_rdv_hello_line(const uint8_t secret[DT_SECRET_LEN],
		      const uint8_t cnonce[DT_RDV_NONCE_LEN],
		      const char *challenge, const struct dt_rdv_hello *hello,
		      char *buf, size_t len)
{
	struct hmac_sha256_ctx key;
	uint8_t nonce[DT_RDV_NONCE_LEN];
	char cnonce_hex[NONCE_HEX + 1], mac[MAC_HEX + 1];
	int body, n, r;

	if (challenge_nonce(challenge, nonce) < 0 ||
	    !valid_word(hello->host) || len < 6)
		return -1;
	memcpy(buf, MAGIC " ", 5);
	r = format_ranks(hello->ranks, hello->nranks, buf + 5, len - 5);
	if (r < 0)
		return -1;
	dt_hex_encode(cnonce, DT_RDV_NONCE_LEN, cnonce_hex);
	body = snprintf(buf + 5 + r, len - 5 - (size_t)r, " %u %s %d %s",
			hello->world, hello->host, hello->nccl_ok ? 1 : 0,
			cnonce_hex);
	if (body < 0)
		return -1;
	body += 5 + r;
	if ((size_t)body + 1 + MAC_HEX + 1 >= len ||
	    (size_t)body + 1 + MAC_HEX + 1 >= DT_RDV_LINE_MAX)
		return -1;
	hmac_sha256_set_key(&key, DT_SECRET_LEN, secret);
	mac_hex(&key, HELLO_DOMAIN, challenge + 5, buf, (size_t)body, mac);
	n = snprintf(buf + body, len - (size_t)body, " %s\n", mac);
	return body + n;
}

int dt_rdv_member_line(uint32_t rank, bool nccl_ok,
		       const uint8_t cnonce[DT_RDV_NONCE_LEN], char *buf,
		       size_t len)
{
	char cnonce_hex[NONCE_HEX + 1];
	int n;

	dt_hex_encode(cnonce, DT_RDV_NONCE_LEN, cnonce_hex);
	n = snprintf(buf, len, "DTL1 %u %d %s\n", rank, nccl_ok ? 1 : 0,
		     cnonce_hex);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

int dt_rdv_parse_member(const char *line, uint32_t *rank, bool *nccl_ok,
			uint8_t cnonce[DT_RDV_NONCE_LEN])
{
	const char *p = line;
	unsigned long r, nccl;

	if (strncmp(p, "DTL1 ", 5))
		return -1;
	p += 5;
	if (parse_num(&p, UINT32_MAX, &r) || *p++ != ' ' ||
	    parse_num(&p, 1, &nccl) || *p++ != ' ' ||
	    dt_hex_decode(p, strlen(p), cnonce, DT_RDV_NONCE_LEN) < 0)
		return -1;
	*rank = (uint32_t)r;
	*nccl_ok = nccl == 1;
	return 0;
}

void dt_rdv_node_socket(const uint8_t secret[DT_SECRET_LEN],
			const char *step_id, const char *host,
			char name[DT_RDV_NODE_SOCKET_LEN + 1])
{
	static const char prefix[] = "dist-train-";
	struct hmac_sha256_ctx ctx;
	uint8_t digest[SHA256_DIGEST_SIZE];
	static const char domain[] = "dist-train node socket ";

	hmac_sha256_set_key(&ctx, DT_SECRET_LEN, secret);
	hmac_sha256_update(&ctx, sizeof(domain) - 1, (const uint8_t *)domain);
	hmac_sha256_update(&ctx, strlen(step_id) + 1,
			   (const uint8_t *)step_id);
	hmac_sha256_update(&ctx, strlen(host), (const uint8_t *)host);
	hmac_sha256_digest(&ctx, sizeof(digest), digest);
	memcpy(name, prefix, sizeof(prefix) - 1);
	dt_hex_encode(digest,
		      (DT_RDV_NODE_SOCKET_LEN - (sizeof(prefix) - 1)) / 2,
		      name + sizeof(prefix) - 1);
}

/*
 * VERB " " MAC " " REST for the connection whose client nonce is
 * CNONCE_HEX; its length, or -1.
 */
static int answer_line(const struct hmac_sha256_ctx *key,
		       const char *cnonce_hex, const char *verb,
		       const char *rest, char *buf, size_t len)
{
	char mac[MAC_HEX + 1], *signed_text;
	size_t vlen = strlen(verb), rlen = strlen(rest);
	int n;

	if (vlen + 1 + rlen + 1 > DT_RDV_LINE_MAX)
		return -1;
	signed_text = malloc(vlen + 1 + rlen + 1);
	if (!signed_text)
		return -1;
	memcpy(signed_text, verb, vlen);
	signed_text[vlen] = ' ';
	memcpy(signed_text + vlen + 1, rest, rlen + 1);
	mac_hex(key, ANSWER_DOMAIN, cnonce_hex, signed_text, vlen + 1 + rlen,
		mac);
	free(signed_text);
	n = snprintf(buf, len, "%s %s %s\n", verb, mac, rest);
	return n < 0 || (size_t)n >= len || (size_t)n >= DT_RDV_LINE_MAX ?
	       -1 : n;
}

static int format_answer(const struct hmac_sha256_ctx *key,
			 const char *cnonce_hex,
			 const struct dt_rdv_reply *reply, char *buf,
			 size_t len)
{
	char rest[DT_RDV_LINE_MAX];

	if (reply->ok) {
		const struct dt_rdv_view *v = &reply->view;
		int n;

		if (!valid_word(reply->address) || !reply->port ||
		    (v->present && !valid_word(v->rank0_host)))
			return -1;
		n = snprintf(rest, sizeof(rest), "%s %u %u %d", reply->address,
			     reply->port, reply->nccl_port,
			     reply->nccl_check ? 1 : 0);
		if (v->present)
			snprintf(rest + n, sizeof(rest) - (size_t)n,
				 " %u %u %u %u %u %s", v->local_rank,
				 v->local_size, v->world, v->node_id,
				 v->num_nodes, v->rank0_host);
		return answer_line(key, cnonce_hex, "OK", rest, buf, len);
	}
	if (strchr(reply->message, '\n'))
		return -1;
	/* A long message is cut to fit the line, not lost. */
	snprintf(rest, sizeof(rest), "%.*s",
		 DT_RDV_LINE_MAX - (int)sizeof("FAIL  \n") - MAC_HEX,
		 reply->message);
	return answer_line(key, cnonce_hex, "FAIL", rest, buf, len);
}

int dt_rdv_read_answer(const uint8_t secret[DT_SECRET_LEN],
		       const uint8_t cnonce[DT_RDV_NONCE_LEN],
		       const char *line, struct dt_rdv_reply *out)
{
	struct hmac_sha256_ctx key;
	char cnonce_hex[NONCE_HEX + 1], mac[MAC_HEX + 1], *signed_text;
	const char *verb_end, *rest;
	size_t vlen;
	bool good;

	memset(out, 0, sizeof(*out));
	if (strnlen(line, DT_RDV_LINE_MAX) >= DT_RDV_LINE_MAX)
		return -1;
	verb_end = strchr(line, ' ');
	if (!verb_end || strlen(verb_end + 1) < MAC_HEX + 1 ||
	    verb_end[1 + MAC_HEX] != ' ')
		return -1;
	vlen = (size_t)(verb_end - line);
	rest = verb_end + 1 + MAC_HEX + 1;

	/* Proof first: nothing of it is read unless rank 0 made it. */
	signed_text = malloc(vlen + 1 + strlen(rest) + 1);
	if (!signed_text)
		return -1;
	memcpy(signed_text, line, vlen + 1);
	strcpy(signed_text + vlen + 1, rest);
	dt_hex_encode(cnonce, DT_RDV_NONCE_LEN, cnonce_hex);
	hmac_sha256_set_key(&key, DT_SECRET_LEN, secret);
	mac_hex(&key, ANSWER_DOMAIN, cnonce_hex, signed_text,
		strlen(signed_text), mac);
	free(signed_text);
	good = mac_equal(mac, verb_end + 1);
	if (!good)
		return -1;

	if (vlen == 4 && !strncmp(line, "FAIL", 4)) {
		snprintf(out->message, sizeof(out->message), "%s", rest);
		return 0;
	}
	if (vlen != 2 || strncmp(line, "OK", 2))
		return -1;
	return dt_rdv_parse_ok(rest, out);
}

/* The view at *P, after a space; 0, or -1. */
static int parse_view(const char *p, struct dt_rdv_view *v)
{
	unsigned long n[5];

	for (unsigned i = 0; i < 5; i++)
		if (*p++ != ' ' || parse_num(&p, UINT32_MAX, &n[i]))
			return -1;
	if (*p++ != ' ' || take_word(&p, v->rank0_host,
				     sizeof(v->rank0_host)) < 0 || *p)
		return -1;
	/* Sizes that hold together, or none of it counts. */
	if (n[0] >= n[1] || n[1] > n[2] || n[3] >= n[4] || n[4] > n[2])
		return -1;
	v->local_rank = (uint32_t)n[0];
	v->local_size = (uint32_t)n[1];
	v->world = (uint32_t)n[2];
	v->node_id = (uint32_t)n[3];
	v->num_nodes = (uint32_t)n[4];
	v->present = true;
	return 0;
}

int dt_rdv_parse_ok(const char *words, struct dt_rdv_reply *out)
{
	const char *p = words;
	unsigned long port, nccl_port, check;

	memset(out, 0, sizeof(*out));
	if (take_word(&p, out->address, sizeof(out->address)) < 0 ||
	    *p++ != ' ' || parse_num(&p, 65535, &port) || port == 0 ||
	    *p++ != ' ' || parse_num(&p, 65535, &nccl_port) || *p++ != ' ' ||
	    parse_num(&p, 1, &check) || (*p && parse_view(p, &out->view) < 0)) {
		memset(out, 0, sizeof(*out));
		return -1;
	}
	out->ok = true;
	out->port = (uint16_t)port;
	out->nccl_port = (uint16_t)nccl_port;
	out->nccl_check = check == 1;
	return 0;
}

int dt_rdv_answer_for(const uint8_t secret[DT_SECRET_LEN],
		      const uint8_t cnonce[DT_RDV_NONCE_LEN],
		      const struct dt_rdv_reply *reply, char *buf, size_t len)
{
	struct hmac_sha256_ctx key;
	char cnonce_hex[NONCE_HEX + 1];

	hmac_sha256_set_key(&key, DT_SECRET_LEN, secret);
	dt_hex_encode(cnonce, DT_RDV_NONCE_LEN, cnonce_hex);
	return format_answer(&key, cnonce_hex, reply, buf, len);
}

/* Rank 0's side. */

enum conn_state { CONN_FREE, CONN_PENDING, CONN_JOINED };

struct conn {
	uint32_t prev, next;	/* the unproven, oldest first; free list */
	char *partial;		/* unproven: what came of its hello, if
				 * it came in pieces */
	uint32_t rank;		/* joined: its first rank */
	uint32_t *ranges;	/* joined: its ranks, as lo-hi pairs */
	uint32_t nranges;
	uint16_t len;		/* bytes in its line buffer */
	uint8_t state;
	uint8_t nccl_ok;
	uint64_t serial;	/* makes its nonce */
	uint64_t since;		/* accepted */
	uint8_t cnonce[DT_RDV_NONCE_LEN];
};

struct dt_rdv_server {
	struct dt_rdv_server_config cfg;
	struct hmac_sha256_ctx key;
	uint8_t seed[DT_RDV_NONCE_LEN];
	char host[256];
	uint32_t slots;
	struct conn *conns;
	uint32_t free_head;
	uint32_t oldest, newest;	/* unproven, in order of arrival */
	uint32_t pending;
	char *line;			/* the hello being read */
	size_t buffered;		/* bytes of partial hellos held */
	uint64_t serial;
	bool *arrived;
	uint32_t *scratch;		/* a hello's ranges, being checked */
	uint32_t joined;
	uint32_t without_nccl;		/* joined ranks that cannot */
};

struct dt_rdv_server *dt_rdv_server_new(const struct dt_rdv_server_config *c)
{
	struct dt_rdv_server *s;
	uint64_t slots;

	if (c->world == 0 || c->max_pending == 0)
		return NULL;
	slots = (uint64_t)c->world - 1 + c->max_pending;
	if (slots >= DT_RDV_NONE)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->cfg = *c;
	snprintf(s->host, sizeof(s->host), "%s", c->host ? c->host : "?");
	s->cfg.host = s->host;
	memcpy(s->seed, c->seed, sizeof(s->seed));
	s->cfg.seed = s->seed;
	s->cfg.secret = NULL;	/* only the keyed context is kept */
	hmac_sha256_set_key(&s->key, DT_SECRET_LEN, c->secret);
	s->slots = (uint32_t)slots;
	s->conns = calloc(slots, sizeof(*s->conns));
	s->line = malloc(DT_RDV_LINE_MAX);
	s->arrived = calloc(c->world, sizeof(bool));
	s->scratch = malloc(DT_RDV_LINE_MAX * sizeof(uint32_t));
	if (!s->conns || !s->line || !s->arrived ||
	    !s->scratch) {
		dt_rdv_server_free(s);
		return NULL;
	}
	for (uint32_t i = 0; i < s->slots; i++)
		s->conns[i].next = i + 1 < s->slots ? i + 1 : DT_RDV_NONE;
	s->free_head = 0;
	s->oldest = s->newest = DT_RDV_NONE;
	s->arrived[0] = true;
	s->joined = 1;
	return s;
}

void dt_rdv_server_free(struct dt_rdv_server *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; s->conns && i < s->slots; i++) {
		free(s->conns[i].ranges);
		free(s->conns[i].partial);
	}
	free(s->scratch);
	free(s->conns);
	free(s->line);
	free(s->arrived);
	free(s);
}

uint32_t dt_rdv_server_slots(const struct dt_rdv_server *s)
{
	return s->slots;
}

static void nonce_hex(const struct dt_rdv_server *s, uint64_t serial,
		      char out[NONCE_HEX + 1])
{
	uint8_t nonce[DT_RDV_NONCE_LEN];

	memcpy(nonce, s->seed, sizeof(nonce));
	for (int i = 0; i < 8; i++)
		nonce[i] ^= (uint8_t)(serial >> (8 * i));
	dt_hex_encode(nonce, sizeof(nonce), out);
}

static void free_partial(struct dt_rdv_server *s, struct conn *c)
{
	if (c->partial) {
		free(c->partial);
		c->partial = NULL;
		s->buffered -= DT_RDV_LINE_MAX;
	}
}

/* Take ID off the list of the unproven and give back its line. */
static void unlink_pending(struct dt_rdv_server *s, uint32_t id)
{
	struct conn *c = &s->conns[id];

	if (c->prev != DT_RDV_NONE)
		s->conns[c->prev].next = c->next;
	else
		s->oldest = c->next;
	if (c->next != DT_RDV_NONE)
		s->conns[c->next].prev = c->prev;
	else
		s->newest = c->prev;
	free_partial(s, c);
	s->pending--;
}

static void release_slot(struct dt_rdv_server *s, uint32_t id)
{
	struct conn *c = &s->conns[id];

	memset(c, 0, sizeof(*c));
	c->state = CONN_FREE;
	c->next = s->free_head;
	s->free_head = id;
}

void dt_rdv_closed(struct dt_rdv_server *s, uint32_t id)
{
	struct conn *c;

	if (id >= s->slots)
		return;
	c = &s->conns[id];
	if (c->state == CONN_PENDING) {
		unlink_pending(s, id);
	} else if (c->state == CONN_JOINED) {
		for (uint32_t i = 0; i < c->nranges; i++)
			for (uint32_t r = c->ranges[2 * i];
			     r <= c->ranges[2 * i + 1]; r++) {
				s->arrived[r] = false;
				s->joined--;
				if (!c->nccl_ok)
					s->without_nccl--;
			}
		free(c->ranges);
	} else {
		return;
	}
	release_slot(s, id);
}

int dt_rdv_accept(struct dt_rdv_server *s, uint64_t now, uint32_t *id,
		  uint32_t *evicted, char *buf, size_t len)
{
	char nonce[NONCE_HEX + 1], proof[8 + MAC_HEX + 1];
	struct conn *c;
	int n;

	*evicted = DT_RDV_NONE;
	if (s->pending == s->cfg.max_pending) {
		*evicted = s->oldest;
		dt_rdv_closed(s, s->oldest);
	}
	*id = s->free_head;
	c = &s->conns[*id];
	s->free_head = c->next;
	memset(c, 0, sizeof(*c));
	c->state = CONN_PENDING;
	c->serial = s->serial++;
	c->since = now;
	c->prev = s->newest;
	c->next = DT_RDV_NONE;
	if (s->newest != DT_RDV_NONE)
		s->conns[s->newest].next = *id;
	else
		s->oldest = *id;
	s->newest = *id;
	s->pending++;
	nonce_hex(s, c->serial, nonce);
	if (challenge_proof(&s->key, nonce, s->cfg.port, proof,
			    sizeof(proof)) < 0)
		return -1;
	n = snprintf(buf, len, MAGIC " %s %s\n", nonce, proof);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

/* Forget ID and answer it REPLY: the verdict is DT_RDV_REFUSE. */
static enum dt_rdv_verdict refuse(struct dt_rdv_server *s, uint32_t id,
				  const char *cnonce_hex, char *buf,
				  size_t len, size_t *out_len,
				  const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));

static enum dt_rdv_verdict refuse(struct dt_rdv_server *s, uint32_t id,
				  const char *cnonce_hex, char *buf,
				  size_t len, size_t *out_len,
				  const char *fmt, ...)
{
	struct dt_rdv_reply reply;
	va_list ap;
	int n;

	memset(&reply, 0, sizeof(reply));
	va_start(ap, fmt);
	vsnprintf(reply.message, sizeof(reply.message) - 128, fmt, ap);
	va_end(ap);
	dt_rdv_closed(s, id);
	n = format_answer(&s->key, cnonce_hex, &reply, buf, len);
	if (n < 0)
		return DT_RDV_DROP;
	*out_len = (size_t)n;
	return DT_RDV_REFUSE;
}

/*
 * A list of ranks at *P ("3", "8-15,17"), ascending, into S's scratch as
 * lo-hi pairs; moves *P past it. Returns the number of pairs, or -1.
 */
static int parse_ranks(struct dt_rdv_server *s, const char **p,
		       uint64_t *count)
{
	unsigned long lo, hi;
	int n = 0;

	*count = 0;
	for (;;) {
		if (parse_num(p, UINT32_MAX, &lo))
			return -1;
		hi = lo;
		if (**p == '-') {
			(*p)++;
			if (parse_num(p, UINT32_MAX, &hi) || hi < lo)
				return -1;
		}
		if (n > 0 && lo <= s->scratch[2 * n - 1])
			return -1;	/* ascending, each once */
		if (2 * (n + 1) > DT_RDV_LINE_MAX)
			return -1;
		s->scratch[2 * n] = (uint32_t)lo;
		s->scratch[2 * n + 1] = (uint32_t)hi;
		*count += hi - lo + 1;
		n++;
		if (**p != ',')
			return n;
		(*p)++;
	}
}

/* LINE is whole and its own; is it a node of this step proving itself? */
static enum dt_rdv_verdict hello(struct dt_rdv_server *s, uint32_t id,
				 char *line, char *buf, size_t len,
				 size_t *out_len)
{
	struct conn *c = &s->conns[id];
	char nonce[NONCE_HEX + 1], mac[MAC_HEX + 1];
	char host[256], cnonce_hex[NONCE_HEX + 1];
	unsigned long world, nccl;
	uint64_t count;
	const char *p;
	char *last;
	int nranges;

	/* Proof first: not a word of it is read before the MAC holds. */
	last = strrchr(line, ' ');
	if (!last || strlen(last + 1) != MAC_HEX)
		return DT_RDV_DROP;
	nonce_hex(s, c->serial, nonce);
	mac_hex(&s->key, HELLO_DOMAIN, nonce, line, (size_t)(last - line),
		mac);
	if (!mac_equal(mac, last + 1))
		return DT_RDV_DROP;
	*last = '\0';

	/* It knows the secret: it is one of the step's tasks. */
	p = line;
	if (strncmp(p, MAGIC " ", 5))
		return DT_RDV_DROP;
	p += 5;
	nranges = parse_ranks(s, &p, &count);
	if (nranges < 0 || *p++ != ' ' ||
	    parse_num(&p, UINT32_MAX, &world) || *p++ != ' ' ||
	    take_word(&p, host, sizeof(host)) < 0 || *p++ != ' ' ||
	    parse_num(&p, 1, &nccl) || *p++ != ' ' ||
	    take_word(&p, cnonce_hex, sizeof(cnonce_hex)) < 0 || *p ||
	    dt_hex_decode(cnonce_hex, strlen(cnonce_hex), c->cnonce,
			  sizeof(c->cnonce)) < 0)
		return DT_RDV_DROP;
	if (world != s->cfg.world)
		return refuse(s, id, cnonce_hex, buf, len, out_len,
			      "rank %u on %s says the step has %lu tasks, "
			      "rank 0 on %s says %u: " ONE_RELEASE,
			      s->scratch[0], host, world, s->host,
			      s->cfg.world);
	for (int i = 0; i < nranges; i++) {
		uint32_t lo = s->scratch[2 * i], hi = s->scratch[2 * i + 1];

		if (lo == 0 || hi >= world)
			return refuse(s, id, cnonce_hex, buf, len, out_len,
				      "%s says it runs rank %u, which is not "
				      "one rank 0 on %s waits for (1-%u): "
				      ONE_RELEASE, host, lo == 0 ? 0 : hi,
				      s->host,
				      s->cfg.world - 1);
		for (uint32_t r = lo; r <= hi; r++)
			if (s->arrived[r])
				return refuse(s, id, cnonce_hex, buf, len,
					      out_len, "rank %u arrived twice "
					      "(again from %s): " ONE_RELEASE,
					      r, host);
	}
	c->ranges = malloc((size_t)nranges * 2 * sizeof(uint32_t));
	if (!c->ranges)
		return DT_RDV_DROP;
	memcpy(c->ranges, s->scratch, (size_t)nranges * 2 * sizeof(uint32_t));
	c->nranges = (uint32_t)nranges;
	unlink_pending(s, id);
	c->state = CONN_JOINED;
	c->rank = s->scratch[0];
	c->nccl_ok = nccl == 1;
	c->len = 0;
	for (int i = 0; i < nranges; i++)
		for (uint32_t r = c->ranges[2 * i]; r <= c->ranges[2 * i + 1];
		     r++)
			s->arrived[r] = true;
	s->joined += (uint32_t)count;
	if (!c->nccl_ok)
		s->without_nccl += (uint32_t)count;
	return DT_RDV_JOINED;
}

int dt_rdv_join_member(struct dt_rdv_server *s, uint32_t rank, bool nccl_ok,
		       const char *host, char *err, size_t errlen)
{
	if (rank == 0 || rank >= s->cfg.world) {
		snprintf(err, errlen, "%s says it runs rank %u, which is not "
			 "one rank 0 on %s waits for (1-%u): " ONE_RELEASE,
			 host, rank, s->host, s->cfg.world - 1);
		return -1;
	}
	if (s->arrived[rank]) {
		snprintf(err, errlen, "rank %u arrived twice (again from %s): "
			 ONE_RELEASE, rank, host);
		return -1;
	}
	s->arrived[rank] = true;
	s->joined++;
	if (!nccl_ok)
		s->without_nccl++;
	return 0;
}

void dt_rdv_leave_member(struct dt_rdv_server *s, uint32_t rank,
			 bool nccl_ok)
{
	if (rank == 0 || rank >= s->cfg.world || !s->arrived[rank])
		return;
	s->arrived[rank] = false;
	s->joined--;
	if (!nccl_ok)
		s->without_nccl--;
}

enum dt_rdv_verdict dt_rdv_input(struct dt_rdv_server *s, uint32_t id,
				 const char *data, size_t size, char *buf,
				 size_t len, size_t *out_len)
{
	struct conn *c;
	const char *nl;
	char *line;

	*out_len = 0;
	if (id >= s->slots)
		return DT_RDV_DROP;
	c = &s->conns[id];
	if (c->state == CONN_JOINED)
		return DT_RDV_WAIT;	/* nothing more is expected */
	if (c->state != CONN_PENDING)
		return DT_RDV_DROP;
	/*
	 * A hello comes whole, as a rule: it is read where it lies. Only one
	 * in pieces is kept, and all those kept together are bounded.
	 */
	if ((size_t)c->len + size > DT_RDV_LINE_MAX - 1)
		goto drop;	/* longer than any hello */
	nl = memchr(data, '\n', size);
	if (!nl && !c->partial) {
		if (s->buffered + DT_RDV_LINE_MAX > DT_RDV_BUFFERED_MAX)
			goto drop;
		c->partial = malloc(DT_RDV_LINE_MAX);
		if (!c->partial)
			goto drop;
		s->buffered += DT_RDV_LINE_MAX;
	}
	line = c->partial ? c->partial : s->line;
	memcpy(line + c->len, data, size);
	c->len = (uint16_t)(c->len + size);
	line[c->len] = '\0';
	nl = memchr(line, '\n', c->len);
	if (!nl)
		return DT_RDV_WAIT;
	/* One line, then it waits: anything else is not ours. */
	if (nl != line + c->len - 1 || memchr(line, '\0', c->len))
		goto drop;
	if (line != s->line) {
		memcpy(s->line, line, (size_t)c->len + 1);
		line = s->line;
		nl = line + c->len - 1;
	}
	line[c->len - 1] = '\0';
	{
		enum dt_rdv_verdict v = hello(s, id, line, buf, len, out_len);

		if (v == DT_RDV_DROP && c->state == CONN_PENDING)
			goto drop;
		return v;
	}
drop:
	dt_rdv_closed(s, id);
	return DT_RDV_DROP;
}

uint32_t dt_rdv_expired(struct dt_rdv_server *s, uint64_t now)
{
	uint32_t id = s->oldest;

	if (id == DT_RDV_NONE ||
	    now < s->conns[id].since + s->cfg.hello_ms)
		return DT_RDV_NONE;
	dt_rdv_closed(s, id);
	return id;
}

uint64_t dt_rdv_next_expiry(const struct dt_rdv_server *s)
{
	if (s->oldest == DT_RDV_NONE)
		return UINT64_MAX;
	return s->conns[s->oldest].since + s->cfg.hello_ms;
}

bool dt_rdv_complete(const struct dt_rdv_server *s)
{
	return s->joined == s->cfg.world;
}

uint32_t dt_rdv_joined(const struct dt_rdv_server *s)
{
	return s->joined;
}

bool dt_rdv_all_nccl(const struct dt_rdv_server *s)
{
	return s->cfg.nccl_ok && s->without_nccl == 0;
}

int64_t dt_rdv_rank_of(const struct dt_rdv_server *s, uint32_t id)
{
	if (id >= s->slots || s->conns[id].state != CONN_JOINED)
		return -1;
	return s->conns[id].rank;
}

int dt_rdv_answer(const struct dt_rdv_server *s, uint32_t id,
		  const struct dt_rdv_reply *reply, char *buf, size_t len)
{
	char cnonce_hex[NONCE_HEX + 1];

	if (dt_rdv_rank_of(s, id) < 0)
		return -1;
	dt_hex_encode(s->conns[id].cnonce, DT_RDV_NONCE_LEN, cnonce_hex);
	return format_answer(&s->key, cnonce_hex, reply, buf, len);
}

uint32_t dt_rdv_server_missing(const struct dt_rdv_server *s,
			       dt_rank_host_fn host_of, void *arg, char *buf,
			       size_t len)
{
	return dt_rdv_describe_missing(s->arrived, s->cfg.world, host_of, arg,
				       buf, len);
}

/* Append "SEP rank[s] A[-B] (HOST)"; false, appending nothing, if full. */
static bool append(char *buf, size_t len, size_t *used, const char *sep,
		   uint32_t a, uint32_t b, const char *host)
{
	char piece[320];
	int n;

	if (a == b)
		n = snprintf(piece, sizeof(piece), "%srank %u", sep, a);
	else
		n = snprintf(piece, sizeof(piece), "%sranks %u-%u", sep, a, b);
	if (n > 0 && host)
		snprintf(piece + n, sizeof(piece) - (size_t)n, " (%s)", host);
	n = snprintf(buf + *used, len - *used, "%s", piece);
	if (n < 0 || (size_t)n >= len - *used) {
		buf[*used] = '\0';
		return false;
	}
	*used += (size_t)n;
	return true;
}

uint32_t dt_rdv_describe_missing(const bool *arrived, uint32_t world,
				 dt_rank_host_fn host_of, void *arg,
				 char *buf, size_t len)
{
	static const char more[] = ", ...";
	uint32_t missing = 0, r = 0;
	size_t used = 0;
	bool room = len > sizeof(more);

	if (len)
		buf[0] = '\0';
	while (r < world) {
		uint32_t first;
		const char *host;

		if (arrived[r]) {
			r++;
			continue;
		}
		first = r;
		host = host_of ? host_of(r, arg) : NULL;
		while (r + 1 < world && !arrived[r + 1]) {
			const char *next = host_of ? host_of(r + 1, arg) : NULL;

			if ((host == NULL) != (next == NULL) ||
			    (host && strcmp(host, next)))
				break;
			r++;
		}
		missing += r - first + 1;
		/* Keep room for ", ..." so that a cut list says so. */
		if (room && !append(buf, len - (sizeof(more) - 1), &used,
				    used ? ", " : "", first, r, host)) {
			room = false;
			memcpy(buf + used, more, sizeof(more));
		}
		r++;
	}
	return missing;
}
