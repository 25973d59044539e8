#include "config.h"

#include "tasks_per_node.h"
#include "error.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A positive decimal that fits in 32 bits; no sign, no blanks. */
static int parse_u32(const char **p, uint32_t *value)
{
	uint64_t v = 0;
	const char *s = *p;

	if (*s < '0' || *s > '9')
		return -1;
	while (*s >= '0' && *s <= '9') {
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > UINT32_MAX)
			return -1;
		s++;
	}
	*p = s;
	*value = (uint32_t)v;
	return 0;
}

void dt_tpn_free(struct dt_tasks_per_node *tpn)
{
	if (!tpn)
		return;
	free(tpn->runs);
	memset(tpn, 0, sizeof(*tpn));
}

int dt_tpn_parse(const char *text, struct dt_tasks_per_node *out,
		 char *err, size_t errlen)
{
	const char *p = text;
	size_t cap = 0;

	memset(out, 0, sizeof(*out));
	if (!text || !*text) {
		/* message: the caller names the fix (common/layout.c) */
		dt_errf(err, errlen, "empty tasks-per-node list");
		return -1;
	}
	for (;;) {
		struct dt_tpn_run run = { 0, 1 };
		const char *item = p;

		if (parse_u32(&p, &run.count) < 0 || run.count == 0)
			goto bad;
		if (*p == '(') {
			if (p[1] != 'x')
				goto bad;
			p += 2;
			if (parse_u32(&p, &run.reps) < 0 || run.reps == 0 ||
			    *p != ')')
				goto bad;
			p++;
		}
		if (*p != ',' && *p != '\0')
			goto bad;
		if ((uint64_t)out->nodes + run.reps > UINT32_MAX) {
			/* message: the caller names the fix (common/layout.c) */
			dt_errf(err, errlen, "tasks-per-node list '%s' "
				  "names too many nodes", text);
			goto fail;
		}
		if (out->nruns == cap) {
			size_t ncap = cap ? cap * 2 : 4;
			struct dt_tpn_run *nr;

			nr = realloc(out->runs, ncap * sizeof(*nr));
			if (!nr) {
				dt_errf(err, errlen, "out of memory");
				goto fail;
			}
			out->runs = nr;
			cap = ncap;
		}
		out->runs[out->nruns++] = run;
		out->nodes += run.reps;
		out->tasks += (uint64_t)run.count * run.reps;
		if (run.count > out->max_count)
			out->max_count = run.count;
		if (*p == '\0')
			return 0;
		p++;
		continue;
bad:
		{
			const char *end = strchr(item, ',');
			int n = end ? (int)(end - item) : (int)strlen(item);

			dt_errf(err, errlen, "bad item '%.*s' in "
				  "tasks-per-node list '%s': expected COUNT "
				  "or COUNT(xREPEAT) with positive numbers",
				  n, item, text);
			goto fail;
		}
	}
fail:
	dt_tpn_free(out);
	return -1;
}

uint32_t dt_tpn_at(const struct dt_tasks_per_node *tpn, uint32_t node)
{
	for (size_t i = 0; i < tpn->nruns; i++) {
		if (node < tpn->runs[i].reps)
			return tpn->runs[i].count;
		node -= tpn->runs[i].reps;
	}
	return 0;
}

uint64_t dt_tpn_tasks_before(const struct dt_tasks_per_node *tpn,
			     uint32_t node)
{
	uint64_t before = 0;

	for (size_t i = 0; i < tpn->nruns && node; i++) {
		uint32_t n = node < tpn->runs[i].reps ? node
						       : tpn->runs[i].reps;

		before += (uint64_t)n * tpn->runs[i].count;
		node -= n;
	}
	return before;
}
