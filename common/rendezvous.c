#include "config.h"

#include "rendezvous.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "DTB1"

static bool valid_word(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

int dt_rdv_format_hello(char *buf, size_t len,
			const struct dt_rdv_hello *hello)
{
	int n;

	if (!valid_word(hello->host))
		return -1;
	n = snprintf(buf, len, MAGIC " %u %u %s %d\n", hello->rank,
		     hello->world, hello->host, hello->nccl_ok ? 1 : 0);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

int dt_rdv_format_reply(char *buf, size_t len,
			const struct dt_rdv_reply *reply)
{
	int n;

	if (reply->ok) {
		if (!valid_word(reply->address))
			return -1;
		n = snprintf(buf, len, "OK %s %u %d\n", reply->address,
			     reply->nccl_port, reply->nccl_check ? 1 : 0);
	} else {
		if (strchr(reply->message, '\n'))
			return -1;
		n = snprintf(buf, len, "FAIL %s\n", reply->message);
	}
	return n < 0 || (size_t)n >= len ? -1 : n;
}

/* A decimal number in [0, MAX] followed by END ("" or " "). */
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

int dt_rdv_parse_hello(const char *line, struct dt_rdv_hello *out)
{
	const char *p = line;
	unsigned long rank, world, nccl;
	const char *host, *sp;
	size_t hlen;

	memset(out, 0, sizeof(*out));
	if (strncmp(p, MAGIC " ", 5))
		return -1;
	p += 5;
	if (parse_num(&p, UINT32_MAX, &rank) || *p++ != ' ' ||
	    parse_num(&p, UINT32_MAX, &world) || *p++ != ' ')
		return -1;
	host = p;
	sp = strchr(host, ' ');
	if (!sp)
		return -1;
	hlen = (size_t)(sp - host);
	if (hlen == 0 || hlen >= sizeof(out->host))
		return -1;
	memcpy(out->host, host, hlen);
	if (!valid_word(out->host))
		return -1;
	p = sp + 1;
	if (parse_num(&p, 1, &nccl) || *p)
		return -1;
	if (rank >= world)
		return -1;
	out->rank = (uint32_t)rank;
	out->world = (uint32_t)world;
	out->nccl_ok = nccl == 1;
	return 0;
}

int dt_rdv_parse_reply(const char *line, struct dt_rdv_reply *out)
{
	const char *p, *sp;
	unsigned long port, check;
	size_t alen;

	memset(out, 0, sizeof(*out));
	if (!strncmp(line, "FAIL ", 5)) {
		snprintf(out->message, sizeof(out->message), "%s", line + 5);
		return 0;
	}
	if (strncmp(line, "OK ", 3))
		return -1;
	p = line + 3;
	sp = strchr(p, ' ');
	if (!sp)
		return -1;
	alen = (size_t)(sp - p);
	if (alen == 0 || alen >= sizeof(out->address))
		return -1;
	memcpy(out->address, p, alen);
	if (!valid_word(out->address))
		return -1;
	p = sp + 1;
	if (parse_num(&p, 65535, &port) || *p++ != ' ' ||
	    parse_num(&p, 1, &check) || *p)
		return -1;
	out->ok = true;
	out->nccl_port = (uint16_t)port;
	out->nccl_check = check == 1;
	return 0;
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
