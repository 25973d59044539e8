/*
 * dist-train why [--json] [JOBID[.STEP] | RECORD]: after the job is gone,
 * what ended a --dist-train step, from its record folder alone: the
 * record srun wrote (doc/record.md), each rank's stacks of its end
 * (plugin/exit_stacks.c) and NCCL flight recorder dumps. The ranks are
 * grouped by where they stood, the odd ones out first, as `dist-train
 * stacks` groups them while a job runs; a rank that is not inside
 * torch.distributed while the others wait there is named as behind.
 * Run by root, it becomes the record's owner first, and reads only that
 * user's files.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "../common/fr_dump.h"
#include "../common/json_read.h"
#include "../common/rank_evidence.h"
#include "../common/saved_files.h"
#include "../common/stack_report.h"

/* A record of 131,072 tasks is about 35 MB. */
#define RECORD_MAX (256u << 20)
/* Ranks a record may name (2,097,152: 80 MB of state here); more is no
 * record of ours. */
#define TASKS_MAX (1u << 21)
/* Group lines shown; the rest are counted. */
#define GROUPS_SHOWN 8

struct why {
	const char *record_path;
	char dir[4096];
	struct dt_json *record;
	const char *step;
	size_t tasks;
	struct dt_evidence ev;
	bool as_root;
	uid_t owner;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " DT_NAME " why [--json] [JOBID[.STEP] | RECORD]\n\n"
		"What ended a --dist-train step, after the job is gone, from "
		"its record\n(dist-train-JOBID.STEP.json, in srun's working "
		"directory or record=DIR)\nand the ranks' stacks and NCCL "
		"dumps beside it: the ranks grouped by\nwhere they stood, the "
		"odd ones out first. Without an argument: the newest\nrecord "
		"in this directory. --json prints the same as JSON.\n");
}

/* Run as root, only the record's owner's files. */
static char *read_file(const struct why *w, const char *path, size_t max,
		       size_t *len)
{
	return dt_read_file_bounded(path, max, w->as_root ? w->owner :
				    (uid_t)-1, len);
}

/* The newest dist-train-*.json in ".", or of JOB ("JOB." prefix) where
 * given, into PATH. */
static int newest_record(const char *job, char *path, size_t len)
{
	DIR *d = opendir(".");
	struct dirent *e;
	time_t best = 0;
	size_t jlen = job ? strlen(job) : 0;

	path[0] = '\0';
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		const char *name = e->d_name, *id = name + strlen("dist-train-");
		size_t n = strlen(name);
		struct stat sb;

		if (strncmp(name, "dist-train-", 11) || n < 16 ||
		    strcmp(name + n - 5, ".json") ||
		    (job && (strncmp(id, job, jlen) || id[jlen] != '.')) ||
		    lstat(name, &sb) < 0 || !S_ISREG(sb.st_mode) ||
		    (path[0] && sb.st_mtime < best))
			continue;
		best = sb.st_mtime;
		snprintf(path, len, "%s", name);
	}
	closedir(d);
	return path[0] ? 0 : -1;
}

static bool is_step_id(const char *s, bool step_optional)
{
	const char *dot = strchr(s, '.');
	size_t n = strspn(s, "0123456789");

	if (n == 0 || n > 10)
		return false;
	if (!dot)
		return step_optional && s[n] == '\0';
	return s + n == dot && dot[1] && strspn(dot + 1, "0123456789") ==
	       strlen(dot + 1) && strlen(dot + 1) <= 10;
}

/* ARG (or none) as the record's path into PATH; -1 after saying why. */
static int find_record(const char *arg, char *path, size_t len)
{
	if (arg && is_step_id(arg, true) && strchr(arg, '.')) {
		snprintf(path, len, "dist-train-%s.json", arg);
		if (access(path, F_OK) == 0)
			return 0;
	} else if (arg && is_step_id(arg, true)) {
		if (newest_record(arg, path, len) == 0)
			return 0;
	} else if (arg) {
		snprintf(path, len, "%s", arg);
		return 0;
	} else if (newest_record(NULL, path, len) == 0) {
		return 0;
	}
	helper_error("no record %s%s in %s: run '" DT_NAME " why' where srun "
		     "ran (or in the folder record=DIR named), or give the "
		     "record's path", arg ? "of " : "", arg ? arg : "here",
		     "this directory");
	return -1;
}

/* Root reads as the record's owner, and only that user's files. */
static int become_owner(struct why *w)
{
	struct stat sb;
	gid_t gid;

	if (geteuid() != 0)
		return 0;
	if (lstat(w->record_path, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		helper_error("%s: %s", w->record_path,
			     errno ? strerror(errno) : "not a file");
		return -1;
	}
	w->as_root = true;
	w->owner = sb.st_uid;
	if (sb.st_uid == 0)
		return 0;
	gid = sb.st_gid;
	if (setgroups(1, &gid) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(sb.st_uid, sb.st_uid, sb.st_uid) < 0) {
		helper_error("cannot become user %u, the record's owner (%s): "
			     "run it as that user", (unsigned)sb.st_uid,
			     strerror(errno));
		return -1;
	}
	return 0;
}

static int load_record(struct why *w)
{
	char err[200], *text;
	size_t len = 0;
	double tasks;
	const char *slash = strrchr(w->record_path, '/');

	text = read_file(w, w->record_path, RECORD_MAX, &len);
	if (!text) {
		helper_error("cannot read %s (%s): give a record srun wrote "
			     "(dist-train-JOBID.STEP.json)", w->record_path,
			     strerror(errno));
		return -1;
	}
	w->record = dt_json_parse(text, len, err, sizeof(err));
	free(text);
	w->step = dt_json_string(w->record, "step");
	tasks = dt_json_number(w->record, "tasks", -1);
	if (!w->record || !w->step || !is_step_id(w->step, false) ||
	    tasks < 0 || tasks > TASKS_MAX) {
		helper_error("%s is not a dist-train record (%s): see "
			     "doc/record.md", w->record_path,
			     w->record ? "no step or tasks" : err);
		return -1;
	}
	w->tasks = (size_t)tasks;
	if (slash)
		snprintf(w->dir, sizeof(w->dir), "%.*s",
			 (int)(slash - w->record_path), w->record_path);
	if (!w->dir[0])
		snprintf(w->dir, sizeof(w->dir), "%s", slash ? "/" : ".");
	return 0;
}

/* What Slurm ended the step by, for the record's "ended". */
static const char *ended_words(const char *ended)
{
	static const struct { const char *word, *says; } words[] = {
		{ "timeout", "its time limit" },
		{ "cancelled", "scancel" },
		{ "preempted", "preemption" },
		{ "deadline", "its deadline (--deadline)" },
		{ "node_fail", "a node failure" },
		{ "requeued", "a requeue" },
		{ "completed", "the end of every task, none failed" },
	};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (ended && !strcmp(ended, words[i].word))
			return words[i].says;
	return ended ? ended : "?";
}

/* JSON's string escapes, for --json. */
static void print_json_string(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

struct ranks_of {
	size_t *order;
	size_t n;
	char list[256];
};

/* The ranks in STATE into OUT. */
static void ranks_in(const struct why *w, enum dt_rank_state state,
		     struct ranks_of *out)
{
	out->n = 0;
	for (size_t r = 0; r < w->tasks; r++)
		if (w->ev.ranks[r].state == state)
			out->order[out->n++] = r;
	dt_rank_ranges(out->order, out->n, out->list, sizeof(out->list));
}

/* "rank 3" or "ranks 1-3,5" for RANKS (N of them). */
static void rank_words(const size_t *ranks, size_t n, char *buf, size_t len)
{
	char list[256];

	dt_rank_ranges(ranks, n, list, sizeof(list));
	snprintf(buf, len, "%s %s", n == 1 ? "rank" : "ranks", list);
}

static int report(struct why *w, bool json)
{
	const char **where = calloc(w->tasks + 1, sizeof(*where));
	size_t *order = calloc(w->tasks + 1, sizeof(*order));
	struct dt_stack_group *groups = calloc(w->tasks + 1, sizeof(*groups));
	struct ranks_of behind = { calloc(w->tasks + 1, sizeof(size_t)), 0,
				   "" };
	struct ranks_of other = { calloc(w->tasks + 1, sizeof(size_t)), 0,
				  "" };
	const char *ended = dt_json_string(w->record, "ended");
	const char *cause = dt_json_string(w->record, "cause");
	const char *lost = dt_json_string(w->record, "lost_nodes");
	const char *never = dt_json_string(w->record, "never_heard");
	size_t ngroups;
	char words[300];
	int rc = 1;

	if (!where || !order || !groups || !behind.order || !other.order) {
		helper_error("out of memory");
		goto out;
	}
	for (size_t r = 0; r < w->tasks; r++)
		if (w->ev.ranks[r].state == DT_RANK_HAS_STACKS)
			where[r] = w->ev.ranks[r].where;
	ngroups = dt_stack_group(where, w->tasks, order, groups);
	behind.n = dt_evidence_behind(&w->ev, behind.order);
	dt_rank_ranges(behind.order, behind.n, behind.list,
		       sizeof(behind.list));

	if (json) {
		printf("{\"record\": ");
		print_json_string(w->record_path);
		printf(", \"step\": \"%s\", \"ended\": ", w->step);
		print_json_string(ended);
		printf(", \"cause\": ");
		if (cause)
			print_json_string(cause);
		else
			printf("null");
		printf(", \"groups\": [");
		for (size_t g = 0; g < ngroups; g++) {
			dt_rank_ranges(order + groups[g].first,
				       groups[g].count, words, sizeof(words));
			printf("%s{\"ranks\": \"%s\", \"count\": %zu, "
			       "\"where\": ", g ? ", " : "", words,
			       groups[g].count);
			print_json_string(groups[g].where);
			printf(", \"in_collective\": %s}",
			       dt_stack_in_collective(groups[g].where) ?
			       "true" : "false");
		}
		ranks_in(w, DT_RANK_UNANSWERED, &other);
		printf("], \"unanswered\": \"%s\"", other.list);
		ranks_in(w, DT_RANK_NOTHING_SAVED, &other);
		printf(", \"nothing_saved\": \"%s\", \"behind\": \"%s\", "
		       "\"lost_nodes\": ", other.list, behind.list);
		if (lost)
			print_json_string(lost);
		else
			printf("null");
		printf(", \"never_heard\": ");
		if (never)
			print_json_string(never);
		else
			printf("null");
		printf(", \"stacks_files\": %zu, \"flight_recorder_dumps\": "
		       "%zu}\n", w->ev.nstacks, w->ev.ndumps);
		rc = 0;
		goto out;
	}

	if (cause)
		printf(DT_NAME ": step %s: %s\n", w->step, cause);
	else
		printf(DT_NAME ": step %s was ended by %s; no rank failed "
		       "first\n", w->step, ended_words(ended));
	if (ngroups)
		printf("Where each rank stood as it ended, the odd ones out "
		       "first:\n");
	for (size_t g = 0; g < ngroups && g < GROUPS_SHOWN; g++) {
		rank_words(order + groups[g].first, groups[g].count, words,
			   sizeof(words));
		printf("  %s: %s%s\n", words, groups[g].where,
		       dt_stack_in_collective(groups[g].where) ?
		       " (waiting in a collective)" : "");
	}
	if (ngroups > GROUPS_SHOWN)
		printf("  ... %zu more places\n", ngroups - GROUPS_SHOWN);
	ranks_in(w, DT_RANK_UNANSWERED, &other);
	if (other.n)
		printf("  %s %s: no stacks, ended by %s before %s could "
		       "write them\n", other.n == 1 ? "rank" : "ranks",
		       other.list, w->ev.ranks[other.order[0]].how ?
		       w->ev.ranks[other.order[0]].how : "a signal",
		       other.n == 1 ? "it" : "they");
	ranks_in(w, DT_RANK_NOTHING_SAVED, &other);
	if (other.n && other.n < w->tasks)
		printf("  %s %s: nothing saved (they ended by themselves, or "
		       "ran no Python with the dist-train hook)\n",
		       other.n == 1 ? "rank" : "ranks", other.list);
	if (w->ev.ndumps) {
		printf("NCCL flight recorder, each rank's newest "
		       "collective:\n");
		for (size_t r = 0; r < w->tasks; r++)
			where[r] = w->ev.ranks[r].collective;
		ngroups = dt_stack_group(where, w->tasks, order, groups);
		for (size_t g = 0; g < ngroups && g < GROUPS_SHOWN; g++) {
			rank_words(order + groups[g].first, groups[g].count,
				   words, sizeof(words));
			printf("  %s: %s\n", words, groups[g].where);
		}
	}
	if (behind.n)
		printf("Behind: %s %s, not in the collective the others "
		       "waited in: look there first\n",
		       behind.n == 1 ? "rank" : "ranks", behind.list);
	if (lost)
		printf("Lost nodes: %s; never heard from: %s\n", lost,
		       never ? never : "?");
	if (!ngroups && !w->ev.ndumps && !w->ev.nstacks)
		printf("No stacks were saved beside the record (see "
		       "doc/record.md for when they are)\n");
	printf("Files: %s (%zu stacks, %zu flight recorder dumps)\n", w->dir,
	       w->ev.nstacks, w->ev.ndumps);
	rc = 0;
out:
	free(where);
	free(order);
	free(groups);
	free(behind.order);
	free(other.order);
	return rc;
}

int cmd_why(int argc, char **argv)
{
	struct why w = { 0 };
	const char *arg = NULL;
	char path[4096];
	bool json = false;
	int rc = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (argv[i][0] == '-' || arg) {
			helper_error("unexpected '%s': give one JOBID, "
				     "JOBID.STEP or record, as in '" DT_NAME
				     " why [--json] [JOBID[.STEP] | RECORD]'",
				     argv[i]);
			return 2;
		} else {
			arg = argv[i];
		}
	}
	if (find_record(arg, path, sizeof(path)) < 0)
		return 1;
	w.record_path = path;
	if (become_owner(&w) < 0 || load_record(&w) < 0)
		goto out;
	if (dt_evidence_read(&w.ev, w.dir, w.step, w.tasks, w.as_root ?
			     w.owner : (uid_t)-1, 0) < 0) {
		helper_error("out of memory");
		goto out;
	}
	rc = report(&w, json);
out:
	dt_evidence_free(&w.ev);
	dt_json_free(w.record);
	return rc;
}
