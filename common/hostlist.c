/*
 * Host list expansion, compatible with `scontrol show hostnames` of Slurm
 * 22.05 on every list it accepts.
 *
 * A list is made of tokens separated by ',', ' ' or '\t'. A token is text
 * with zero or more bracket groups ("rack[1-2]-node[01-04]"); a group is a
 * comma-separated list of N or LO-HI ranges, zero padded to the width of
 * LO. Slurm expands the last group fastest, then the first, the second,
 * ... and the one before the last slowest; that order is kept here.
 *
 * Deliberately stricter than Slurm on garbage that Slurm turns into odd
 * host names: an unbalanced bracket ("n[1-" gives "n]" in scontrol),
 * blanks or signs inside brackets, numbers that overflow and control
 * characters are errors here.
 *
 * Nothing is expanded up front: a list of a million hosts costs a few
 * small arrays, and host N is computed directly.
 */
#include "config.h"

#include "hostlist.h"
#include "error.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dt_range {
	uint64_t lo;
	uint64_t hi;
	int width;		/* digits of LO as written: the zero padding */
};

struct dt_group {
	struct dt_range *ranges;
	uint64_t *before;	/* values in ranges[0..i-1], for bisection */
	size_t nranges;
	uint64_t count;		/* values in the whole group */
};

struct dt_token {
	size_t *text_off;	/* ngroups + 1 literal pieces around groups */
	size_t *text_len;
	struct dt_group *groups;
	size_t ngroups;
	uint64_t count;		/* hosts this token expands to */
	uint64_t first;		/* index of its first host in the list */
	size_t max_len;		/* longest name it produces */
};

struct dt_hostlist {
	char *text;		/* private copy; literal pieces point in it */
	struct dt_token *tokens;
	size_t ntokens;
	size_t cap_tokens;
	uint64_t count;
	uint64_t max_hosts;	/* more is refused as soon as it is seen */
	size_t max_len;
};

static bool is_separator(char c)
{
	return c == ',' || c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int digits_of(uint64_t v)
{
	int n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

static void group_free(struct dt_group *g)
{
	free(g->ranges);
	free(g->before);
}

static void token_free(struct dt_token *t)
{
	for (size_t i = 0; i < t->ngroups; i++)
		group_free(&t->groups[i]);
	free(t->groups);
	free(t->text_off);
	free(t->text_len);
}

void dt_hostlist_free(struct dt_hostlist *hl)
{
	if (!hl)
		return;
	for (size_t i = 0; i < hl->ntokens; i++)
		token_free(&hl->tokens[i]);
	free(hl->tokens);
	free(hl->text);
	free(hl);
}

/* Parse one decimal number of at least one digit; no sign, no blanks. */
static int parse_number(const char *s, size_t *pos, size_t end,
			uint64_t *value, int *width)
{
	uint64_t v = 0;
	size_t start = *pos;

	while (*pos < end && is_digit(s[*pos])) {
		unsigned d = (unsigned)(s[*pos] - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
		(*pos)++;
	}
	if (*pos == start)
		return -1;
	*value = v;
	*width = (int)(*pos - start);
	return 0;
}

/* The list names more than MAX hosts: -2, the caller's to explain. */
static int over_cap(uint64_t max, char *err, size_t errlen)
{
	/* message: the caller names the fix (common/layout.c) */
	dt_errf(err, errlen, "the list names more than %llu hosts",
		(unsigned long long)max);
	return -2;
}

/*
 * Parse the ranges between '[' at S[OPEN] and the matching ']' at S[CLOSE].
 * FINAL says whether this is the token's last group (Slurm limits the
 * others to 64K values in total). More than ROOM values: -2, before more
 * memory is taken.
 */
static int parse_group(const char *s, size_t open, size_t close, bool final,
		       uint64_t room, struct dt_group *g, char *err,
		       size_t errlen)
{
	size_t pos = open + 1;
	size_t cap = 0;
	const char *what = NULL;

	memset(g, 0, sizeof(*g));
	for (;;) {
		struct dt_range r;
		size_t item = pos;

		if (parse_number(s, &pos, close, &r.lo, &r.width) < 0) {
			what = "expected a number";
			goto bad_item;
		}
		r.hi = r.lo;
		if (pos < close && s[pos] == '-') {
			int hi_width;

			pos++;
			if (parse_number(s, &pos, close, &r.hi, &hi_width)) {
				what = "expected a number after '-'";
				goto bad_item;
			}
		}
		if (pos < close && s[pos] != ',') {
			what = "only digits, '-' and ',' may appear "
			       "between brackets";
			goto bad_item;
		}
		if (r.lo > r.hi) {
			what = "the range runs backwards";
			goto bad_item;
		}
		if (r.hi - r.lo >= DT_HOSTLIST_MAX_RANGE_HOSTS) {
			what = "one range may hold at most 65536 hosts, as "
			       "in Slurm";
			goto bad_item;
		}
		if (g->nranges == DT_HOSTLIST_MAX_RANGES) {
			dt_errf(err, errlen, "more than %u ranges between "
				  "one pair of brackets: split them into "
				  "several bracket groups",
				  DT_HOSTLIST_MAX_RANGES);
			return -1;
		}
		if (g->nranges == cap) {
			size_t ncap = cap ? cap * 2 : 4;
			struct dt_range *nr;
			uint64_t *nb;

			nr = realloc(g->ranges, ncap * sizeof(*nr));
			if (!nr)
				goto nomem;
			g->ranges = nr;
			nb = realloc(g->before, ncap * sizeof(*nb));
			if (!nb)
				goto nomem;
			g->before = nb;
			cap = ncap;
		}
		g->before[g->nranges] = g->count;
		g->ranges[g->nranges++] = r;
		g->count += r.hi - r.lo + 1;
		if (g->count > room)
			return -2;	/* the caller says so */
		if (!final && g->count > DT_HOSTLIST_MAX_PREFIX_HOSTS) {
			dt_errf(err, errlen, "a bracket group followed by "
				  "another may hold at most %u hosts, as in "
				  "Slurm: write the names as several lists",
				  DT_HOSTLIST_MAX_PREFIX_HOSTS);
			return -1;
		}
		if (pos == close)
			return 0;
		pos++;		/* the ',' */
		continue;
bad_item:
		{
			size_t e = item;

			while (e < close && s[e] != ',')
				e++;
			dt_errf(err, errlen, "bad range '%.*s' in '%.*s' "
				  "(%s): write each range as N or LOW-HIGH, "
				  "such as n[1-4,7]", (int)(e - item),
				  s + item, (int)(close - open + 1), s + open,
				  what);
			return -1;
		}
	}
nomem:
	dt_errf(err, errlen, "out of memory");
	return -1;
}

/* Append one token starting at S[START] and ending before S[END]. */
static int add_token(struct dt_hostlist *hl, size_t start, size_t end,
		     char *err, size_t errlen)
{
	const char *s = hl->text;
	struct dt_token t;
	size_t ngroups = 0, pos, text_start;
	uint64_t count = 1;
	size_t max_len = 0;
	int rc = -1;

	memset(&t, 0, sizeof(t));
	/* First pass: validate brackets and count groups. */
	for (pos = start; pos < end; pos++) {
		if (s[pos] == '[') {
			size_t close = pos + 1;

			while (close < end && s[close] != ']' &&
			       s[close] != '[')
				close++;
			if (close == end || s[close] == '[') {
				dt_errf(err, errlen, "'[' without a "
					  "matching ']' in '%.*s': close the "
					  "bracket", (int)(end - start),
					  s + start);
				return -1;
			}
			ngroups++;
			pos = close;
		} else if (s[pos] == ']') {
			dt_errf(err, errlen, "']' without a matching '[' "
				  "in '%.*s': remove it, or open the bracket",
				  (int)(end - start), s + start);
			return -1;
		} else if ((unsigned char)s[pos] < 0x20 || s[pos] == 0x7f) {
			dt_errf(err, errlen, "control character in host "
				  "name '%.*s': remove it", (int)(end - start),
				  s + start);
			return -1;
		}
	}
	/*
	 * Text after the last ']' is a suffix of every host ("n[1-3].ib"):
	 * Slurm 24.11 and later expand such lists and write them for nodes
	 * named so; 22.05 refuses them, and never writes one.
	 */

	t.ngroups = ngroups;
	t.text_off = calloc(ngroups + 1, sizeof(*t.text_off));
	t.text_len = calloc(ngroups + 1, sizeof(*t.text_len));
	t.groups = ngroups ? calloc(ngroups, sizeof(*t.groups)) : NULL;
	if (!t.text_off || !t.text_len || (ngroups && !t.groups)) {
		dt_errf(err, errlen, "out of memory");
		goto fail;
	}

	/* Second pass: literal pieces and groups. */
	text_start = start;
	ngroups = 0;
	for (pos = start; pos < end; pos++) {
		size_t close;
		struct dt_group *g;
		uint64_t widest = 0;
		int got;

		if (s[pos] != '[')
			continue;
		close = pos + 1;
		while (s[close] != ']')
			close++;
		t.text_off[ngroups] = text_start;
		t.text_len[ngroups] = pos - text_start;
		max_len += pos - text_start;
		g = &t.groups[ngroups];
		got = parse_group(s, pos, close, ngroups + 1 == t.ngroups,
				  hl->max_hosts - hl->count, g, err, errlen);
		if (got < 0) {
			ngroups++;	/* so that token_free frees it */
			if (got == -2)
				rc = over_cap(hl->max_hosts, err, errlen);
			goto fail_groups;
		}
		ngroups++;
		for (size_t i = 0; i < g->nranges; i++) {
			uint64_t w = (uint64_t)digits_of(g->ranges[i].hi);

			if ((uint64_t)g->ranges[i].width > w)
				w = (uint64_t)g->ranges[i].width;
			if (w > widest)
				widest = w;
		}
		max_len += widest;
		if (count > DT_HOSTLIST_MAX_HOSTS / g->count) {
			dt_errf(err, errlen, "'%.*s' expands to more than "
				  "%u hosts: give a shorter list",
				  (int)(end - start), s + start,
				  DT_HOSTLIST_MAX_HOSTS);
			goto fail_groups;
		}
		count *= g->count;
		pos = close;
		text_start = close + 1;
	}
	t.text_off[ngroups] = text_start;
	t.text_len[ngroups] = end - text_start;
	max_len += end - text_start;

	if (hl->count + count > DT_HOSTLIST_MAX_HOSTS) {
		dt_errf(err, errlen, "the list expands to more than %u hosts: "
			  "give a shorter list", DT_HOSTLIST_MAX_HOSTS);
		goto fail_groups;
	}
	if (hl->count + count > hl->max_hosts) {
		rc = over_cap(hl->max_hosts, err, errlen);
		goto fail_groups;
	}
	if (hl->ntokens == hl->cap_tokens) {
		size_t ncap = hl->cap_tokens ? hl->cap_tokens * 2 : 8;
		struct dt_token *nt = realloc(hl->tokens, ncap * sizeof(*nt));

		if (!nt) {
			dt_errf(err, errlen, "out of memory");
			goto fail_groups;
		}
		hl->tokens = nt;
		hl->cap_tokens = ncap;
	}
	t.count = count;
	t.first = hl->count;
	t.max_len = max_len;
	hl->tokens[hl->ntokens++] = t;
	hl->count += count;
	if (max_len > hl->max_len)
		hl->max_len = max_len;
	return 0;

fail_groups:
	t.ngroups = ngroups;
fail:
	token_free(&t);
	return rc;
}

int dt_hostlist_parse(const char *text, struct dt_hostlist **out,
		      char *err, size_t errlen)
{
	return dt_hostlist_parse_capped(text, DT_HOSTLIST_MAX_HOSTS, out, err,
					errlen);
}

int dt_hostlist_parse_capped(const char *text, size_t max_hosts,
			     struct dt_hostlist **out, char *err,
			     size_t errlen)
{
	struct dt_hostlist *hl;
	size_t pos = 0, n;
	int rc = -1;

	*out = NULL;
	if (!text) {
		dt_errf(err, errlen, "no host list: give one");
		return -1;
	}
	hl = calloc(1, sizeof(*hl));
	if (!hl || !(hl->text = strdup(text))) {
		free(hl);
		dt_errf(err, errlen, "out of memory");
		return -1;
	}
	hl->max_hosts = max_hosts;
	n = strlen(text);
	for (;;) {
		size_t start;
		int depth = 0;

		while (pos < n && is_separator(text[pos]))
			pos++;
		if (pos == n)
			break;
		/* A token ends at a separator outside brackets. */
		start = pos;
		while (pos < n && (depth || !is_separator(text[pos]))) {
			if (text[pos] == '[')
				depth = 1;
			else if (text[pos] == ']')
				depth = 0;
			else if (depth && (text[pos] == ' ' ||
					   text[pos] == '\t')) {
				dt_errf(err, errlen, "blank inside brackets "
					  "in '%s': remove it", text);
				goto fail;
			}
			pos++;
		}
		rc = add_token(hl, start, pos, err, errlen);
		if (rc < 0)
			goto fail;
	}
	*out = hl;
	return 0;
fail:
	dt_hostlist_free(hl);
	return rc < 0 ? rc : -1;
}

size_t dt_hostlist_count(const struct dt_hostlist *hl)
{
	return hl ? (size_t)hl->count : 0;
}

size_t dt_hostlist_max_name_len(const struct dt_hostlist *hl)
{
	return hl ? hl->max_len : 0;
}

/* The INDEX-th value of group G (0 <= INDEX < G->count). */
static void group_value(const struct dt_group *g, uint64_t index,
			uint64_t *value, int *width)
{
	size_t lo = 0, hi = g->nranges;

	/* Last range whose first value is at or before INDEX. */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (g->before[mid] <= index)
			lo = mid;
		else
			hi = mid;
	}
	*value = g->ranges[lo].lo + (index - g->before[lo]);
	*width = g->ranges[lo].width;
}

/* Bounded writer: counts everything, stores what fits. */
struct out_buf {
	char *buf;
	size_t len;
	size_t used;
};

static void out_bytes(struct out_buf *o, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++, o->used++)
		if (o->used + 1 < o->len)
			o->buf[o->used] = p[i];
}

static void out_number(struct out_buf *o, uint64_t v, int width)
{
	char digits[24];
	int n = 0;

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (; width > n; width--)
		out_bytes(o, "0", 1);
	while (n)
		out_bytes(o, &digits[--n], 1);
}

static const struct dt_token *find_token(const struct dt_hostlist *hl,
					 uint64_t n)
{
	size_t lo = 0, hi = hl->ntokens;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (hl->tokens[mid].first <= n)
			lo = mid;
		else
			hi = mid;
	}
	return &hl->tokens[lo];
}

static size_t format_host(const struct dt_hostlist *hl,
			  const struct dt_token *t, uint64_t local,
			  char *buf, size_t len)
{
	struct out_buf o = { buf, len, 0 };
	uint64_t index[64];
	uint64_t *idx = index;
	size_t k = t->ngroups;

	if (k > sizeof(index) / sizeof(index[0])) {
		idx = malloc(k * sizeof(*idx));
		if (!idx) {
			if (len)
				buf[0] = '\0';
			return 0;
		}
	}
	/* Last group fastest, then the first, second, ... */
	if (k) {
		idx[k - 1] = local % t->groups[k - 1].count;
		local /= t->groups[k - 1].count;
		for (size_t g = 0; g + 1 < k; g++) {
			idx[g] = local % t->groups[g].count;
			local /= t->groups[g].count;
		}
	}
	for (size_t g = 0; g < k; g++) {
		uint64_t value;
		int width;

		out_bytes(&o, hl->text + t->text_off[g], t->text_len[g]);
		group_value(&t->groups[g], idx[g], &value, &width);
		out_number(&o, value, width);
	}
	out_bytes(&o, hl->text + t->text_off[k], t->text_len[k]);
	if (len)
		buf[o.used < len ? o.used : len - 1] = '\0';
	if (idx != index)
		free(idx);
	return o.used;
}

int dt_hostlist_nth(const struct dt_hostlist *hl, size_t n,
		    char *buf, size_t len)
{
	const struct dt_token *t;
	size_t used;

	if (!hl || n >= hl->count)
		return -1;
	t = find_token(hl, n);
	used = format_host(hl, t, n - t->first, buf, len);
	return used > (size_t)INT32_MAX ? -1 : (int)used;
}

int dt_hostlist_foreach(const struct dt_hostlist *hl, dt_hostlist_fn fn,
			void *arg)
{
	char *name;
	int rc = 0;

	if (!hl || !hl->count)
		return 0;
	name = malloc(hl->max_len + 1);
	if (!name)
		return -1;
	for (size_t i = 0; i < hl->ntokens && !rc; i++) {
		const struct dt_token *t = &hl->tokens[i];

		for (uint64_t j = 0; j < t->count && !rc; j++) {
			size_t n = format_host(hl, t, j, name,
					       hl->max_len + 1);

			rc = fn(name, n, arg);
		}
	}
	free(name);
	return rc;
}

int dt_hostfile_first_host(const char *text, size_t len, char *host,
			   size_t hostlen)
{
	struct dt_hostlist *hl = NULL;
	char word[DT_HOSTFILE_WORD_MAX + 1];
	size_t i = 0, n;
	int got, rc = -1;

	for (;;) {
		/* A line's start: skip blanks, then blank and comment lines. */
		while (i < len && (text[i] == ' ' || text[i] == '\t' ||
				   text[i] == '\r'))
			i++;
		if (i >= len || text[i] == '\0')
			return -1;
		if (text[i] == '\n' || text[i] == '#') {
			while (i < len && text[i] != '\n' && text[i] != '\0')
				i++;
			if (i < len && text[i] == '\n')
				i++;
			continue;
		}
		break;
	}
	/* The first word; a range keeps its commas inside brackets. */
	for (n = 0; i + n < len; n++) {
		char c = text[i + n];

		if (c == '[') {
			while (i + n < len && text[i + n] != ']' &&
			       text[i + n] != '\n' && text[i + n] != '\0')
				n++;
			if (i + n >= len || text[i + n] != ']')
				return -1;
			continue;
		}
		if (c == ',' || c == ' ' || c == '\t' || c == '\r' ||
		    c == '\n' || c == '*' || c == '\0')
			break;
	}
	if (n == 0 || n > DT_HOSTFILE_WORD_MAX)
		return -1;
	memcpy(word, text + i, n);
	word[n] = '\0';
	if (dt_hostlist_parse(word, &hl, NULL, 0) < 0)
		return -1;
	got = dt_hostlist_nth(hl, 0, host, hostlen);
	if (got > 0 && (size_t)got < hostlen)
		rc = 0;
	dt_hostlist_free(hl);
	return rc;
}
