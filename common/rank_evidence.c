#include "config.h"

#include "rank_evidence.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd_io.h"
#include "fr_dump.h"
#include "saved_files.h"
#include "stack_report.h"

char *dt_read_file_bounded(const char *path, size_t max, uid_t owner,
			   size_t *len)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	char *buf = NULL;
	struct stat sb;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
	    (owner != (uid_t)-1 && sb.st_uid != owner)) {
		errno = EPERM;
		goto out;
	}
	if ((size_t)sb.st_size > max) {
		errno = EFBIG;
		goto out;
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf)
		goto out;
	*len = dt_read_up_to(fd, buf, (size_t)sb.st_size);
	buf[*len] = '\0';
out:
	close(fd);
	return buf;
}

/* Its last "dist-train: rank R on NODE ended by HOW" line's HOW, a
 * malloc'd copy, or NULL. */
static char *ended_how(const char *text)
{
	const char *p = text, *found = NULL, *by;

	while ((p = strstr(p, "dist-train: rank "))) {
		found = p;
		p++;
	}
	if (!found || !(by = strstr(found, " ended by ")))
		return NULL;
	return strndup(by + 10, strcspn(by + 10, "\n"));
}

static void take_stacks(struct dt_evidence *ev, struct dt_rank_evidence *r,
			const char *text, size_t len)
{
	char where[DT_STACK_WHERE_MAX];

	ev->nstacks++;
	free(r->how);
	r->how = ended_how(text);
	/* The first dump: where SIGTERM found it. */
	r->state = dt_stack_where(text, dt_stack_first_dump(text, len), where,
				  sizeof(where)) == 0 ?
		   DT_RANK_HAS_STACKS : DT_RANK_UNANSWERED;
	free(r->where);
	r->where = r->state == DT_RANK_HAS_STACKS ? strdup(where) : NULL;
	if (r->state == DT_RANK_HAS_STACKS && !r->where)
		r->state = DT_RANK_NOTHING_SAVED;
}

static void take_dump(struct dt_evidence *ev, struct dt_rank_evidence *r,
		      const char *text, size_t len)
{
	char newest[DT_FR_NEWEST_MAX];

	if (dt_fr_newest((const unsigned char *)text, len, newest,
			 sizeof(newest)) < 0)
		return;
	ev->ndumps++;
	free(r->collective);
	r->collective = strdup(newest);
	r->seq = newest[0] == '#' ? strtoll(newest + 1, NULL, 10) : -1;
}

int dt_evidence_read(struct dt_evidence *ev, const char *dir,
		     const char *step, size_t tasks, uid_t owner,
		     size_t budget)
{
	struct dt_saved_file *files = NULL;
	char path[4096 + 256];
	size_t n = 0, spent = 0;

	memset(ev, 0, sizeof(*ev));
	ev->ranks = calloc(tasks + 1, sizeof(*ev->ranks));
	if (!ev->ranks)
		return -1;
	ev->tasks = tasks;
	for (size_t r = 0; r < tasks; r++)
		ev->ranks[r].seq = -1;
	if (dt_saved_files(dir, step, &files, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		bool stacks = files[i].kind == DT_SAVED_STACKS;
		size_t max = stacks ? DT_STACKS_FILE_MAX : DT_FR_DUMP_MAX;
		bool cut = false;
		char *text;
		size_t len = 0;

		if (files[i].rank >= tasks)
			continue;
		/* What is left of the budget bounds this file too, before
		 * it is read. */
		if (budget && budget - spent < max) {
			max = budget - spent;
			cut = true;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
		text = dt_read_file_bounded(path, max, owner, &len);
		if (!text && cut && errno == EFBIG) {
			ev->partial = true;
			break;
		}
		if (!text)
			continue;
		spent += len;
		if (stacks)
			take_stacks(ev, &ev->ranks[files[i].rank], text, len);
		else
			take_dump(ev, &ev->ranks[files[i].rank], text, len);
		free(text);
	}
	dt_saved_files_free(files, n);
	return 0;
}

void dt_evidence_free(struct dt_evidence *ev)
{
	for (size_t r = 0; ev->ranks && r < ev->tasks; r++) {
		free(ev->ranks[r].where);
		free(ev->ranks[r].how);
		free(ev->ranks[r].collective);
	}
	free(ev->ranks);
	memset(ev, 0, sizeof(*ev));
}

size_t dt_evidence_behind(const struct dt_evidence *ev, size_t *order)
{
	long long newest = -1;
	size_t waiting = 0, n = 0;

	for (size_t r = 0; r < ev->tasks; r++) {
		const struct dt_rank_evidence *i = &ev->ranks[r];

		if (i->state == DT_RANK_HAS_STACKS)
			waiting += dt_stack_in_collective(i->where);
		if (i->seq > newest)
			newest = i->seq;
	}
	for (size_t r = 0; r < ev->tasks; r++) {
		const struct dt_rank_evidence *i = &ev->ranks[r];

		if (newest >= 0 ? i->seq >= 0 && i->seq < newest :
		    waiting && i->state == DT_RANK_HAS_STACKS &&
		    !dt_stack_in_collective(i->where))
			order[n++] = r;
	}
	return n;
}
