/*
 * Where each rank is, from Python's faulthandler output, and the ranks
 * grouped by it (common/stack_report.h).
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stack_report.h"

static const char header_end[] = "(most recent call first):";
static const char frame_start[] = "  File \"";

/* The line at P (LEN bytes left) ends where; its length. */
static size_t line_len(const char *p, size_t left)
{
	const char *nl = memchr(p, '\n', left);

	return nl ? (size_t)(nl - p) : left;
}

static int ends_with(const char *p, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len >= n && !memcmp(p + len - n, suffix, n);
}

static const char *find_in(const char *p, size_t len, const char *what)
{
	size_t n = strlen(what);

	for (size_t i = 0; i + n <= len; i++)
		if (!memcmp(p + i, what, n))
			return p + i;
	return NULL;
}

/* '  File "PATH", line N in FUNC' as "PATH:N in FUNC"; -1 if not one. */
static int frame_where(const char *p, size_t len, char *where, size_t wlen)
{
	const char *path, *mid, *in;
	size_t flen = sizeof(frame_start) - 1;

	if (len < flen || memcmp(p, frame_start, flen))
		return -1;
	path = p + flen;
	mid = find_in(path, len - flen, "\", line ");
	if (!mid)
		return -1;
	in = find_in(mid, (size_t)(p + len - mid), " in ");
	if (!in)
		return -1;
	snprintf(where, wlen, "%.*s:%.*s in %.*s", (int)(mid - path), path,
		 (int)(in - mid - 8), mid + 8,
		 (int)(p + len - in - 4), in + 4);
	return 0;
}

int dt_stack_where(const char *dump, size_t len, char *where,
		   size_t where_len)
{
	const char *last_header = NULL, *p = dump, *end = dump + len;
	size_t n;

	/* The last thread listed is the main thread (Python lists the
	 * newest first), and the last dump the newest. */
	while (p < end) {
		n = line_len(p, (size_t)(end - p));
		if (n > 0 && p[0] != ' ' && ends_with(p, n, header_end))
			last_header = p;
		p += n + 1;
	}
	if (!last_header)
		return -1;
	p = last_header + line_len(last_header, (size_t)(end - last_header));
	if (p < end)
		p++;
	n = p < end ? line_len(p, (size_t)(end - p)) : 0;
	if (frame_where(p, n, where, where_len) < 0)
		snprintf(where, where_len, "<no Python frame>");
	return 0;
}

size_t dt_stack_first_dump(const char *dump, size_t len)
{
	const char *p = dump, *end = dump + len;
	bool seen_header = false, after_frame = false;

	while (p < end) {
		size_t n = line_len(p, (size_t)(end - p));

		if (n > 0 && p[0] != ' ' && ends_with(p, n, header_end)) {
			if (seen_header && after_frame)
				return (size_t)(p - dump);
			seen_header = true;
		}
		after_frame = n > 0 && p[0] == ' ';
		p += n + 1;
	}
	return len;
}

bool dt_collective_name_ok(const char *name)
{
	size_t n = 0;

	for (; name[n]; n++)
		if (!isalnum((unsigned char)name[n]) && name[n] != '_')
			return false;
	return n > 0 && n < DT_COLLECTIVE_NAME_MAX;
}

int dt_stack_timed_out(const char *dump, size_t len, char *name_out,
		       size_t name_len)
{
	static const char prefix[] = "dist-train: its ";
	static const char suffix[] = " timed out";
	const size_t fixed = sizeof(prefix) - 1 + sizeof(suffix) - 1;
	const char *p = dump, *end = dump + len;
	char name[DT_COLLECTIVE_NAME_MAX];

	/* Only the hook's own line, before the first traceback. */
	for (; p < end; p += line_len(p, (size_t)(end - p)) + 1) {
		size_t n = line_len(p, (size_t)(end - p));

		if (n > 0 && p[0] != ' ' && ends_with(p, n, header_end))
			return -1;
		if (n <= fixed || n - fixed >= sizeof(name) ||
		    memcmp(p, prefix, sizeof(prefix) - 1) ||
		    !ends_with(p, n, suffix))
			continue;
		memcpy(name, p + sizeof(prefix) - 1, n - fixed);
		name[n - fixed] = '\0';
		if (!dt_collective_name_ok(name) || n - fixed >= name_len)
			return -1;
		memcpy(name_out, name, n - fixed + 1);
		return 0;
	}
	return -1;
}

bool dt_stack_in_collective(const char *where)
{
	const char *in = NULL, *p;

	/* The file's path only, before the last " in " (a function's name
	 * has no space; a path may). */
	for (p = where; (p = strstr(p, " in ")); p++)
		in = p;
	p = strstr(where, "/torch/distributed/");
	return p && (!in || p < in);
}

struct ranked {
	size_t rank;
	const char *where;
};

/* A run of RANKED with one WHERE: a group before it is placed. */
struct run {
	size_t start, count, lowest;
};

static int by_where_then_rank(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	int c = strcmp(x->where, y->where);

	if (c)
		return c;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int by_size_then_rank(const void *a, const void *b)
{
	const struct run *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? -1 : 1;
	return x->lowest < y->lowest ? -1 : x->lowest > y->lowest;
}

size_t dt_stack_group(const char *const *where, size_t n, size_t *order,
		      struct dt_stack_group *groups)
{
	struct ranked *r = calloc(n ? n : 1, sizeof(*r));
	struct run *runs = calloc(n ? n : 1, sizeof(*runs));
	size_t m = 0, nruns = 0, at = 0;

	if (!r || !runs)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (where[i]) {
			r[m].rank = i;
			r[m].where = where[i];
			m++;
		}
	qsort(r, m, sizeof(*r), by_where_then_rank);
	for (size_t i = 0; i < m; i++) {
		if (i == 0 || strcmp(r[i].where, r[i - 1].where)) {
			runs[nruns].start = i;
			runs[nruns].lowest = r[i].rank;
			nruns++;
		}
		runs[nruns - 1].count++;
	}
	qsort(runs, nruns, sizeof(*runs), by_size_then_rank);
	for (size_t g = 0; g < nruns; g++) {
		groups[g].where = r[runs[g].start].where;
		groups[g].first = at;
		groups[g].count = runs[g].count;
		for (size_t i = 0; i < runs[g].count; i++)
			order[at++] = r[runs[g].start + i].rank;
	}
out:
	free(r);
	free(runs);
	return at == m ? nruns : 0;
}

size_t dt_rank_ranges(const size_t *ranks, size_t n, char *buf, size_t len)
{
	size_t used = 0;
	char item[48];

	if (len == 0)
		return 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n;) {
		size_t j = i;
		int k;

		while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
			j++;
		if (j == i)
			k = snprintf(item, sizeof(item), "%s%zu",
				     used ? "," : "", ranks[i]);
		else
			k = snprintf(item, sizeof(item), "%s%zu-%zu",
				     used ? "," : "", ranks[i], ranks[j]);
		/* What follows an item needs room for ",..." at least. */
		if (used + (size_t)k + (j + 1 < n ? 5 : 1) > len) {
			if (used + 5 <= len)
				used += (size_t)snprintf(buf + used, len - used,
							 used ? ",..." : "...");
			break;
		}
		memcpy(buf + used, item, (size_t)k + 1);
		used += (size_t)k;
		i = j + 1;
	}
	return used;
}
