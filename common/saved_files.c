/*
 * The files a step leaves beside its record (common/saved_files.h).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "saved_files.h"

static const struct {
	const char *infix;
	enum dt_saved_kind kind;
} kinds[] = {
	{ ".stacks-rank-", DT_SAVED_STACKS },
	{ ".nccl-rank-", DT_SAVED_NCCL },
};

int dt_saved_file_of(const char *step, const char *name,
		     enum dt_saved_kind *kind, uint32_t *rank)
{
	static const char prefix[] = "dist-train-";
	size_t plen = sizeof(prefix) - 1, slen = strlen(step);

	if (strncmp(name, prefix, plen) || strncmp(name + plen, step, slen))
		return -1;
	name += plen + slen;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t ilen = strlen(kinds[i].infix);
		unsigned long long r = 0;
		const char *p = name + ilen;

		if (strncmp(name, kinds[i].infix, ilen))
			continue;
		/* A rank as Slurm numbers tasks: digits, no leading zero. */
		if (!*p || (*p == '0' && p[1]) || strlen(p) > 10)
			return -1;
		for (; *p; p++) {
			if (*p < '0' || *p > '9')
				return -1;
			r = r * 10 + (unsigned)(*p - '0');
		}
		if (r > UINT32_MAX)
			return -1;
		*kind = kinds[i].kind;
		*rank = (uint32_t)r;
		return 0;
	}
	return -1;
}

static int by_kind_then_rank(const void *a, const void *b)
{
	const struct dt_saved_file *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

void dt_saved_files_free(struct dt_saved_file *files, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(files[i].name);
	free(files);
}

int dt_saved_files(const char *dir, const char *step,
		   struct dt_saved_file **files, size_t *n)
{
	struct dt_saved_file *list = NULL, f;
	size_t count = 0, cap = 0;
	struct dirent *d;
	DIR *folder = opendir(dir);
	int rc = -1;

	*files = NULL;
	*n = 0;
	if (!folder)
		return -1;
	while ((d = readdir(folder)) && count < DT_SAVED_MAX) {
		if (dt_saved_file_of(step, d->d_name, &f.kind, &f.rank) < 0)
			continue;
		if (count == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			struct dt_saved_file *grown =
				realloc(list, ncap * sizeof(*list));

			if (!grown)
				goto out;
			list = grown;
			cap = ncap;
		}
		f.name = strdup(d->d_name);
		if (!f.name)
			goto out;
		list[count++] = f;
	}
	qsort(list, count, sizeof(*list), by_kind_then_rank);
	*files = list;
	*n = count;
	list = NULL;
	count = 0;
	rc = 0;
out:
	if (rc < 0)
		errno = ENOMEM;
	dt_saved_files_free(list, count);
	closedir(folder);
	return rc;
}
