/*
 * A task's exit record (see exit_record.h): HMAC-SHA256 from nettle,
 * compared in constant time; parsed strictly, field by field.
 */
#include "config.h"

#include "exit_record.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>

#define MAGIC "DTX1 "
#define DOMAIN "dist-train exit "
#define MAC_HEX (2 * SHA256_DIGEST_SIZE)

static void mac_hex(const uint8_t key[DT_SECRET_LEN], const char *body,
		    size_t body_len, char out[MAC_HEX + 1])
{
	struct hmac_sha256_ctx ctx;
	uint8_t digest[SHA256_DIGEST_SIZE];

	hmac_sha256_set_key(&ctx, DT_SECRET_LEN, key);
	hmac_sha256_update(&ctx, strlen(DOMAIN), (const uint8_t *)DOMAIN);
	hmac_sha256_update(&ctx, body_len, (const uint8_t *)body);
	hmac_sha256_digest(&ctx, sizeof(digest), digest);
	dt_hex_encode(digest, sizeof(digest), out);
}

static bool plain_word(const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	if (n == 0 || n >= max)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

int dt_exit_record_format(const uint8_t key[DT_SECRET_LEN],
			  const char *step_id, const struct dt_task_exit *e,
			  char *buf, size_t len)
{
	char mac[MAC_HEX + 1];
	int n, m;

	if (len < DT_EXIT_RECORD_MAX || !plain_word(step_id, 64) ||
	    !plain_word(e->node, sizeof(e->node)))
		return -1;
	n = snprintf(buf, len, MAGIC "%s %" PRIu32 " %" PRIu32 " %" PRIu32
		     " %s %d %d %" PRIu64 " %" PRIu64, step_id, e->rank,
		     e->local_rank, e->node_rank, e->node, e->status,
		     e->oom ? 1 : 0, e->after_ms, e->at_ms);
	if (n < 0 || (size_t)n + 1 + MAC_HEX + 2 > len)
		return -1;
	mac_hex(key, buf, (size_t)n, mac);
	m = snprintf(buf + n, len - (size_t)n, " %s\n", mac);
	if (m < 0 || (size_t)(n + m) >= len)
		return -1;
	return n + m;
}

/* A decimal number at *P up to MAX, then the separator SEP (' ' or
 * '\0'); *P moves past both. */
static int take_u64(const char **p, uint64_t max, char sep, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' &&
				     s[1] <= '9'))
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (max - (uint64_t)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (*s != sep)
		return -1;
	*out = v;
	*p = sep ? s + 1 : s;
	return 0;
}

int dt_exit_record_parse(const uint8_t key[DT_SECRET_LEN],
			 const char *step_id, const char *text, size_t len,
			 struct dt_task_exit *e)
{
	char line[DT_EXIT_RECORD_MAX + 1], mac[MAC_HEX + 1];
	const char *p, *node, *space;
	size_t body, step_len = strlen(step_id);
	uint64_t v[8];

	if (len > 0 && text[len - 1] == '\n')
		len--;
	if (len >= sizeof(line) || len < sizeof(MAGIC) + MAC_HEX ||
	    memchr(text, '\0', len))
		return -1;
	memcpy(line, text, len);
	line[len] = '\0';
	body = len - MAC_HEX - 1;
	if (line[body] != ' ')
		return -1;
	mac_hex(key, line, body, mac);
	if (!memeql_sec(mac, line + body + 1, MAC_HEX))
		return -1;
	line[body] = '\0';

	/* Signed by the step: now its words are read, all of them. */
	p = line;
	if (strncmp(p, MAGIC, strlen(MAGIC)))
		return -1;
	p += strlen(MAGIC);
	if (strncmp(p, step_id, step_len) || p[step_len] != ' ')
		return -1;
	p += step_len + 1;
	memset(e, 0, sizeof(*e));
	if (take_u64(&p, UINT32_MAX, ' ', &v[0]) < 0 ||
	    take_u64(&p, UINT32_MAX, ' ', &v[1]) < 0 ||
	    take_u64(&p, UINT32_MAX, ' ', &v[2]) < 0)
		return -1;
	node = p;
	space = strchr(node, ' ');
	if (!space || (size_t)(space - node) >= sizeof(e->node) ||
	    space == node)
		return -1;
	memcpy(e->node, node, (size_t)(space - node));
	e->node[space - node] = '\0';
	if (!plain_word(e->node, sizeof(e->node)))
		return -1;
	p = space + 1;
	if (take_u64(&p, INT32_MAX, ' ', &v[3]) < 0 ||
	    take_u64(&p, 1, ' ', &v[4]) < 0 ||
	    take_u64(&p, UINT64_MAX, ' ', &v[5]) < 0 ||
	    take_u64(&p, UINT64_MAX, '\0', &v[6]) < 0)
		return -1;
	e->rank = (uint32_t)v[0];
	e->local_rank = (uint32_t)v[1];
	e->node_rank = (uint32_t)v[2];
	e->status = (int)v[3];
	e->oom = v[4] == 1;
	e->after_ms = v[5];
	e->at_ms = v[6];
	return 0;
}
