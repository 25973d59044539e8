/*
 * dist-train stacks JOB[.STEP]: every rank's Python stack (all threads),
 * collected on the step's nodes by an overlapping srun step
 * (helper/stacks_collect.c), written into one folder, and summed up: the
 * ranks grouped by where their main thread is, the odd ones out first.
 * Run by the job's owner, from a login node or inside the allocation; run
 * by root, it becomes the job's owner first.
 */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "stacks.h"
#include "../common/fr_dump.h"
#include "../common/hostlist.h"
#include "../common/net.h"
#include "../common/stack_report.h"

/* How long each process has to answer, and the whole collection. */
#define ANSWER_MS 5000
#define COLLECT_S 60
/* Bounds on what the nodes can make this command hold. */
#define OUTPUT_MAX (256u << 20)
#define RANKS_MAX (1u << 20)
#define STEP_ID_MAX 64

extern char **environ;

struct captured {
	char *out;
	size_t out_len;
	char err[4096];		/* the end of stderr */
	size_t err_len;
	int status;		/* as waitpid gives it; -1: not run */
	bool timed_out;
};

struct proc {
	size_t node;
	long pid, rank, world;
	bool python;
	char comm[32];
	char collective[DT_FR_NEWEST_MAX];	/* its newest; "": none */
	char *text;
	size_t len, cap;
};

struct collection {
	char (*hosts)[256];	/* by srun's task: its node */
	size_t nhosts;
	struct proc *procs;
	size_t nprocs, cap;
	size_t *last;		/* by node: its last process, for S lines */
	char **dumps;		/* flight recorder dumps */
	size_t ndumps;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: " DT_NAME " stacks [-o DIR] JOBID[.STEP]\n\n"
		"Every rank's Python stack (all threads) in a --dist-train "
		"step, into DIR\n(default: dist-train-JOBID.STEP.stacks), and "
		"the ranks grouped by where\nthey are, the odd ones out first. "
		"Run it as the job's owner, from a login\nnode or inside the "
		"allocation; STEP may be left out when the job runs one.\n");
}

/* The child's environment: the caller's, less the Slurm variables of a
 * job or step it may run in, which would shape srun's step. */
static void leave_job_environment(void)
{
	for (size_t i = 0; environ[i];) {
		char name[256];
		size_t n = strcspn(environ[i], "=");

		if (!strncmp(environ[i], "SLURM_", 6) && n < sizeof(name) &&
		    strncmp(environ[i], "SLURM_CONF=", 11)) {
			memcpy(name, environ[i], n);
			name[n] = '\0';
			unsetenv(name);
			continue;
		}
		i++;
	}
}

/* Run ARGV, its stdout into C->out, the end of its stderr into C->err,
 * killed after TIMEOUT_S. 0 once it ran; -1 when it could not start. */
static int run_captured(const char *const argv[], int timeout_s,
			struct captured *c)
{
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, rc = -1;
	long long deadline = (long long)now_ms() + timeout_s * 1000LL;
	size_t cap = 0;
	bool open_out = true, open_err = true;
	pid_t pid;

	memset(c, 0, sizeof(*c));
	c->status = -1;
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		goto out;
	pid = fork();
	if (pid < 0)
		goto out;
	if (pid == 0) {
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		leave_job_environment();
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	out[1] = err[1] = -1;
	while (open_out || open_err) {
		struct pollfd fds[2] = { { out[0], POLLIN, 0 },
					 { err[0], POLLIN, 0 } };
		long long left = deadline - (long long)now_ms();
		char buf[65536];
		ssize_t n;

		fds[0].fd = open_out ? out[0] : -1;
		fds[1].fd = open_err ? err[0] : -1;
		if (left <= 0) {
			c->timed_out = true;
			kill(pid, SIGTERM);
			break;
		}
		if (poll(fds, 2, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (fds[0].revents) {
			n = read(out[0], buf, sizeof(buf));
			if (n <= 0) {
				open_out = false;
			} else if (c->out_len + (size_t)n > OUTPUT_MAX) {
				/* More than any step's stacks: not read on. */
				open_out = false;
			} else {
				if (c->out_len + (size_t)n + 1 > cap) {
					size_t want = (c->out_len + (size_t)n +
						       1) * 2;
					char *grown = realloc(c->out, want);

					if (!grown) {
						open_out = false;
						continue;
					}
					c->out = grown;
					cap = want;
				}
				memcpy(c->out + c->out_len, buf, (size_t)n);
				c->out_len += (size_t)n;
				c->out[c->out_len] = '\0';
			}
		}
		if (fds[1].revents) {
			n = read(err[0], buf, sizeof(buf));
			if (n <= 0) {
				open_err = false;
			} else {
				/* Keep the end: the last message counts. */
				size_t keep = sizeof(c->err) - 1;
				size_t take = (size_t)n > keep ? keep : (size_t)n;
				size_t old = c->err_len + take > keep ?
					     keep - take : c->err_len;

				memmove(c->err, c->err + c->err_len - old, old);
				memcpy(c->err + old, buf + n - take, take);
				c->err_len = old + take;
				c->err[c->err_len] = '\0';
			}
		}
	}
	/* Past the deadline or with output unread: it is stopped. */
	if (open_out || open_err)
		kill(pid, SIGTERM);
	for (int i = 0; waitpid(pid, &c->status, WNOHANG) == 0; i++) {
		struct timespec tick = { 0, 50 * 1000000L };

		if (i == 100)
			kill(pid, SIGKILL);
		nanosleep(&tick, NULL);
	}
	rc = 0;
out:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	return rc;
}

/* The last line of what a command wrote on stderr, for a message. */
static const char *last_line(struct captured *c)
{
	char *end = c->err + c->err_len, *start;

	while (end > c->err && (end[-1] == '\n' || end[-1] == ' '))
		*--end = '\0';
	start = end;
	while (start > c->err && start[-1] != '\n')
		start--;
	return *start ? start : "it printed nothing";
}

static bool is_number(const char *s, size_t n)
{
	if (n == 0 || n > 10)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

/*
 * The step to look at, its nodes and its user's id, from squeue: STEP_ARG
 * is "JOB" or "JOB.STEP". Returns 0, or 1 after saying what is wrong.
 */
static int find_step(const char *step_arg, char *step, char **nodes,
		     char *uid, size_t uid_len)
{
	size_t job_len = strcspn(step_arg, ".");
	char job[16], format[] = "%i %U %N", *line, *save = NULL;
	const char *argv[] = { "squeue", "-h", "-s", "-j", job, "-o", format,
			       NULL };
	char steps[512] = "";
	struct captured c;
	int found = 0, rc = 1;

	if (!is_number(step_arg, job_len) ||
	    (step_arg[job_len] &&
	     !is_number(step_arg + job_len + 1, strlen(step_arg + job_len + 1)))) {
		helper_error("'%s' is not a job or step id: give JOBID or "
			     "JOBID.STEP, as squeue --steps shows them",
			     step_arg);
		return 1;
	}
	snprintf(job, sizeof(job), "%.*s", (int)job_len, step_arg);
	if (run_captured(argv, COLLECT_S, &c) < 0 || c.status != 0) {
		helper_error("cannot list the steps of job %s (squeue: %s): "
			     "run this where Slurm's commands reach the "
			     "cluster, while the job runs", job,
			     c.timed_out ? "no answer" : last_line(&c));
		goto out;
	}
	for (line = c.out ? strtok_r(c.out, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *id = line, *user = strchr(line, ' ');
		char *list = user ? strchr(user + 1, ' ') : NULL;
		size_t id_len = user ? (size_t)(user - line) : 0;

		/* JOB.batch, JOB.extern and JOB.interactive run no ranks. */
		if (!list || id_len <= job_len + 1 ||
		    !is_number(id + job_len + 1, id_len - job_len - 1) ||
		    !is_number(user + 1, (size_t)(list - user - 1)) ||
		    (size_t)(list - user) > uid_len)
			continue;
		id[id_len] = '\0';
		*list = '\0';
		snprintf(steps + strlen(steps), sizeof(steps) - strlen(steps),
			 "%s%s", steps[0] ? ", " : "", id);
		if ((step_arg[job_len] && strcmp(id, step_arg)) || found++)
			continue;
		snprintf(step, STEP_ID_MAX, "%s", id);
		snprintf(uid, uid_len, "%s", user + 1);
		free(*nodes);
		*nodes = strdup(list + 1);
	}
	if (found == 1 && *nodes) {
		rc = 0;
	} else if (found > 1) {
		helper_error("job %s runs the steps %s: name one, as in '"
			     DT_NAME " stacks %s'", job, steps, step);
	} else if (step_arg[job_len]) {
		helper_error("job %s runs no step %s%s%s: give a running "
			     "step (squeue --steps -j %s lists them)", job,
			     step_arg, steps[0] ? "; it runs " : "", steps,
			     job);
	} else {
		helper_error("job %s runs no step besides its batch script: "
			     "start the training with srun, then run this "
			     "again", job);
	}
out:
	free(c.out);
	return rc;
}

static struct proc *proc_of(struct collection *col, size_t node, long pid)
{
	if (node < col->nhosts && col->last[node] < col->nprocs &&
	    col->procs[col->last[node]].pid == pid &&
	    col->procs[col->last[node]].node == node)
		return &col->procs[col->last[node]];
	for (size_t i = 0; i < col->nprocs; i++)
		if (col->procs[i].node == node && col->procs[i].pid == pid) {
			if (node < col->nhosts)
				col->last[node] = i;
			return &col->procs[i];
		}
	return NULL;
}

static int append_text(struct proc *p, const char *text, size_t n)
{
	if (p->len + n + 2 > p->cap) {
		size_t want = (p->len + n + 2) * 2;
		char *grown = realloc(p->text, want);

		if (!grown)
			return -1;
		p->text = grown;
		p->cap = want;
	}
	memcpy(p->text + p->len, text, n);
	p->len += n;
	p->text[p->len++] = '\n';
	p->text[p->len] = '\0';
	return 0;
}

/* "P PID RANK WORLD PY COMM": a process of the step on NODE. */
static int add_proc(struct collection *col, size_t node, const char *rec)
{
	struct proc *p;
	int python = 0, used = 0;

	if (col->nprocs == col->cap) {
		size_t want = col->cap ? col->cap * 2 : 64;
		struct proc *grown = realloc(col->procs, want * sizeof(*grown));

		if (!grown)
			return -1;
		col->procs = grown;
		col->cap = want;
	}
	p = &col->procs[col->nprocs];
	memset(p, 0, sizeof(*p));
	p->node = node;
	if (sscanf(rec, "%ld %ld %ld %d %n", &p->pid, &p->rank, &p->world,
		   &python, &used) < 4)
		return 0;
	p->python = python == 1;
	snprintf(p->comm, sizeof(p->comm), "%s", rec + used);
	if (p->rank >= (long)RANKS_MAX || p->world > (long)RANKS_MAX)
		p->rank = p->world = -1;
	col->last[node] = col->nprocs++;
	return 0;
}

/* "S PID TEXT": a line of what PID on NODE wrote. */
static int add_line(struct collection *col, size_t node, const char *rec)
{
	char *text;
	long pid = strtol(rec, &text, 10);
	struct proc *p = proc_of(col, node, pid);

	if (!p)
		return 0;
	text = *text == ' ' ? text + 1 : text;
	return append_text(p, text, strlen(text));
}

/* "C PID TEXT": PID's newest NCCL collective, from its dump. */
static void add_collective(struct collection *col, size_t node,
			   const char *rec)
{
	char *text;
	long pid = strtol(rec, &text, 10);
	struct proc *p = proc_of(col, node, pid);

	if (p)
		snprintf(p->collective, sizeof(p->collective), "%s",
			 *text == ' ' ? text + 1 : text);
}

/* "F PATH": a flight recorder dump. */
static int add_dump(struct collection *col, const char *rec)
{
	char **grown, *path = strdup(rec);

	if (!path)
		return -1;
	grown = realloc(col->dumps, (col->ndumps + 1) * sizeof(*grown));
	if (!grown) {
		free(path);
		return -1;
	}
	col->dumps = grown;
	col->dumps[col->ndumps++] = path;
	return 0;
}

/* One record of node NODE (helper/stacks_collect.c); -1 without memory. */
static int take_record(struct collection *col, size_t node, char *rec)
{
	const char *rest = rec[0] && rec[1] == ' ' ? rec + 2 : NULL;

	if (!rest)
		return 0;
	stacks_printable(rec);
	switch (rec[0]) {
	case 'H':
		snprintf(col->hosts[node], sizeof(col->hosts[node]), "%s",
			 rest);
		return 0;
	case 'P':
		return add_proc(col, node, rest);
	case 'S':
		return add_line(col, node, rest);
	case 'C':
		add_collective(col, node, rest);
		return 0;
	case 'F':
		return add_dump(col, rest);
	}
	return 0;
}

/* srun --label's output: "  N: RECORD" per line. */
static int take_output(struct collection *col, char *out)
{
	char *save = NULL;

	for (char *line = out ? strtok_r(out, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *colon;
		unsigned long node;

		while (*line == ' ')
			line++;
		node = strtoul(line, &colon, 10);
		if (colon == line || colon[0] != ':' || colon[1] != ' ' ||
		    node >= col->nhosts)
			continue;
		if (take_record(col, node, colon + 2) < 0)
			return -1;
	}
	return 0;
}

static void free_collection(struct collection *col)
{
	for (size_t i = 0; i < col->nprocs; i++)
		free(col->procs[i].text);
	for (size_t i = 0; i < col->ndumps; i++)
		free(col->dumps[i]);
	free(col->procs);
	free(col->dumps);
	free(col->hosts);
	free(col->last);
}

/* The process that stands for each rank: the first Python one that
 * answered, else one that did not, else any; by rank, -1 for none. */
static long *pick_rank_procs(const struct collection *col, size_t world)
{
	long *pick = malloc((world ? world : 1) * sizeof(*pick));

	if (!pick)
		return NULL;
	for (size_t r = 0; r < world; r++)
		pick[r] = -1;
	for (int pass = 0; pass < 3; pass++)
		for (size_t i = 0; i < col->nprocs; i++) {
			const struct proc *p = &col->procs[i];

			if (p->rank < 0 || (size_t)p->rank >= world ||
			    pick[p->rank] >= 0)
				continue;
			if ((pass == 0 && p->python && p->text) ||
			    (pass == 1 && p->python) || pass == 2)
				pick[p->rank] = (long)i;
		}
	return pick;
}

/* Each process's stacks into DIR: rank-N.txt (all of the rank's
 * processes), or other-HOST-PID.txt for one without a rank (torchrun's
 * agents). */
static int write_stacks(const struct collection *col, size_t world,
			const char *dir)
{
	bool *started = calloc(world ? world : 1, sizeof(*started));
	int rc = started ? 0 : -1;

	for (size_t i = 0; started && i < col->nprocs; i++) {
		const struct proc *p = &col->procs[i];
		bool ranked = p->rank >= 0 && (size_t)p->rank < world;
		char path[4096];
		FILE *f = NULL;
		int k;

		if (!p->text)
			continue;
		if (ranked)
			k = snprintf(path, sizeof(path), "%s/rank-%ld.txt",
				     dir, p->rank);
		else
			k = snprintf(path, sizeof(path), "%s/other-%s-%ld.txt",
				     dir, col->hosts[p->node], p->pid);
		if (k > 0 && (size_t)k < sizeof(path))
			f = fopen(path, ranked && started[p->rank] ? "a" : "w");
		if (!f) {
			rc = -1;
			continue;
		}
		if (ranked)
			started[p->rank] = true;
		if (ranked)
			fprintf(f, "# rank %ld, pid %ld (%s) on %s\n", p->rank,
				p->pid, p->comm, col->hosts[p->node]);
		else
			fprintf(f, "# pid %ld (%s) on %s, of no rank (a "
				"torchrun agent)\n", p->pid, p->comm,
				col->hosts[p->node]);
		fwrite(p->text, 1, p->len, f);
		fputc('\n', f);
		if (fclose(f) == EOF)
			rc = -1;
	}
	free(started);
	return rc;
}

/* Copy the flight recorder's dumps where they can be read from here
 * (a shared file system), with their own permissions; NAMES those that
 * could: regular files of this user's, not links. */
static size_t copy_dumps(const struct collection *col, const char *dir)
{
	size_t copied = 0;

	for (size_t i = 0; i < col->ndumps; i++) {
		const char *base = strrchr(col->dumps[i], '/');
		char path[4096], buf[65536];
		struct stat st;
		int from, to, k;
		ssize_t n = 0;

		k = snprintf(path, sizeof(path), "%s/%s", dir,
			     base ? base + 1 : col->dumps[i]);
		if (k < 0 || (size_t)k >= sizeof(path))
			continue;
		from = open(col->dumps[i], O_RDONLY | O_NONBLOCK | O_NOFOLLOW |
			    O_CLOEXEC);
		if (from < 0)
			continue;
		if (fstat(from, &st) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != getuid()) {
			close(from);
			continue;
		}
		to = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
			  O_CLOEXEC, st.st_mode & 0644);
		while (to >= 0 && (n = read(from, buf, sizeof(buf))) > 0)
			if (write(to, buf, (size_t)n) != n) {
				n = -1;
				break;
			}
		if (to >= 0 && close(to) == 0 && n == 0)
			copied++;
		close(from);
	}
	return copied;
}

/* One line of the summary, on stdout and in summary.txt. */
static void say(FILE *summary, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void say(FILE *summary, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (summary) {
		va_start(ap, fmt);
		vfprintf(summary, fmt, ap);
		va_end(ap);
	}
}

/* "rank 5 (n3, pid 4242)" or "7 ranks (0-4,6-7)". */
static void describe_ranks(const struct collection *col, const long *pick,
			   const size_t *ranks, size_t n, char *buf,
			   size_t len)
{
	char list[256];

	if (n == 1) {
		const struct proc *p = &col->procs[pick[ranks[0]]];

		snprintf(buf, len, "rank %zu (%s, pid %ld)", ranks[0],
			 col->hosts[p->node], p->pid);
		return;
	}
	dt_rank_ranges(ranks, n, list, sizeof(list));
	snprintf(buf, len, "%zu ranks (%s)", n, list);
}

/* The ranks in the state that KIND names, after LABEL; 0 when none. */
enum rank_state { HAS_STACK, NO_ANSWER, NOT_PYTHON, NO_PROCESS };

static enum rank_state state_of(const struct collection *col,
				const long *pick, size_t r)
{
	const struct proc *p;

	if (pick[r] < 0)
		return NO_PROCESS;
	p = &col->procs[pick[r]];
	if (!p->python)
		return NOT_PYTHON;
	return p->text ? HAS_STACK : NO_ANSWER;
}

static void say_state(FILE *summary, const struct collection *col,
		      const long *pick, size_t world, size_t *scratch,
		      enum rank_state state, const char *label)
{
	char ranks[300];
	size_t n = 0;

	for (size_t r = 0; r < world; r++)
		if (state_of(col, pick, r) == state)
			scratch[n++] = r;
	if (n == 0)
		return;
	if (state == NO_PROCESS) {
		char list[256];

		dt_rank_ranges(scratch, n, list, sizeof(list));
		snprintf(ranks, sizeof(ranks), "%s %s", n == 1 ? "rank" :
			 "ranks", list);
	} else {
		describe_ranks(col, pick, scratch, n, ranks, sizeof(ranks));
	}
	if (state == NOT_PYTHON)
		say(summary, "  %s: not Python with the dist-train hook "
		    "(%s): no stack to show\n", ranks,
		    col->procs[pick[scratch[0]]].comm);
	else
		say(summary, "  %s: %s\n", ranks, label);
}

/* The WORLD ranks grouped by WHERE[rank] (NULL: left out), a line each,
 * the smallest group first. ORDER, GROUPS: room for WORLD. */
static void say_groups(FILE *summary, const struct collection *col,
		       const long *pick, const char *const *where,
		       size_t world, size_t *order,
		       struct dt_stack_group *groups)
{
	size_t ngroups = dt_stack_group(where, world, order, groups);

	for (size_t g = 0; g < ngroups; g++) {
		char ranks[300];

		describe_ranks(col, pick, order + groups[g].first,
			       groups[g].count, ranks, sizeof(ranks));
		say(summary, "  %s: %s\n", ranks, groups[g].where);
	}
}

/* The ranks grouped by their newest NCCL collective, where the flight
 * recorder gave any: a rank that never entered the collective the others
 * wait in shows an older one. ORDER, SCRATCH, GROUPS: room for WORLD. */
static void say_collectives(FILE *summary, const struct collection *col,
			    const long *pick, size_t world, size_t *order,
			    size_t *scratch, struct dt_stack_group *groups)
{
	const char **newest = calloc(world ? world : 1, sizeof(*newest));
	size_t without = 0, with = 0;

	if (!newest)
		return;
	for (size_t r = 0; r < world; r++) {
		if (pick[r] >= 0 && col->procs[pick[r]].collective[0]) {
			newest[r] = col->procs[pick[r]].collective;
			with++;
		} else {
			scratch[without++] = r;
		}
	}
	if (with == 0)
		goto out;
	say(summary, "NCCL flight recorder, each rank's newest collective "
	    "(the odd ones out first):\n");
	say_groups(summary, col, pick, newest, world, order, groups);
	if (without) {
		char list[256];

		dt_rank_ranges(scratch, without, list, sizeof(list));
		say(summary, "  %s %s: no dump (not using NCCL, or a torch "
		    "without the flight recorder's dump pipe)\n",
		    without == 1 ? "rank" : "ranks", list);
	}
out:
	free(newest);
}

static int summarize(const struct collection *col, const char *step,
		     const char *dir, size_t copied)
{
	size_t world = 0, *order = NULL, *scratch = NULL;
	const char **where = NULL;
	char (*places)[DT_STACK_WHERE_MAX] = NULL;
	struct dt_stack_group *groups = NULL;
	long *pick = NULL;
	FILE *summary = NULL;
	char path[4096];
	int rc = 1;

	for (size_t i = 0; i < col->nprocs; i++) {
		const struct proc *p = &col->procs[i];

		if (p->world > 0 && (size_t)p->world > world)
			world = (size_t)p->world;
		if (p->rank >= 0 && (size_t)p->rank >= world)
			world = (size_t)p->rank + 1;
	}
	pick = pick_rank_procs(col, world);
	order = calloc(world + 1, sizeof(*order));
	scratch = calloc(world + 1, sizeof(*scratch));
	where = calloc(world + 1, sizeof(*where));
	places = calloc(world + 1, sizeof(*places));
	groups = calloc(world + 1, sizeof(*groups));
	if (!pick || !order || !scratch || !where || !places || !groups) {
		helper_error("out of memory");
		goto out;
	}
	for (size_t r = 0; r < world; r++) {
		const struct proc *p;

		if (state_of(col, pick, r) != HAS_STACK)
			continue;
		p = &col->procs[pick[r]];
		if (dt_stack_where(p->text, p->len, places[r],
				   sizeof(places[r])) < 0)
			snprintf(places[r], sizeof(places[r]),
				 "<not a stack>");
		where[r] = places[r];
	}
	if (write_stacks(col, world, dir) < 0)
		helper_error("could not write every stack into %s/: check "
			     "that its file system has room", dir);
	if ((size_t)snprintf(path, sizeof(path), "%s/summary.txt", dir) <
	    sizeof(path))
		summary = fopen(path, "w");
	say(summary, DT_NAME ": step %s, %zu ranks, where each one's main "
	    "thread is (the odd ones out first):\n", step, world);
	say_groups(summary, col, pick, where, world, order, groups);
	say_state(summary, col, pick, world, scratch, NO_ANSWER,
		  "no answer within 5 s (stopped, or the program took "
		  "SIGURG for itself)");
	say_state(summary, col, pick, world, scratch, NOT_PYTHON, "");
	say_state(summary, col, pick, world, scratch, NO_PROCESS,
		  "no process found (ended, or its node did not answer)");
	say_collectives(summary, col, pick, world, order, scratch, groups);
	if (col->ndumps)
		say(summary, "  NCCL flight recorder dumps: %zu, %zu of them "
		    "copied here (the others are on their nodes, such as %s)\n",
		    col->ndumps, copied, col->dumps[0]);
	say(summary, "Each rank's threads: %s/rank-N.txt\n", dir);
	rc = 0;
out:
	if (summary)
		fclose(summary);
	free(pick);
	free(order);
	free(scratch);
	free(where);
	free(places);
	free(groups);
	return rc;
}

/* The folder the user named (made if need be), or WANT, or the first of
 * WANT.2, WANT.3, ... that does not exist yet, into DIR. */
static int make_folder(const char *named, const char *want, char *dir,
		       size_t len)
{
	if (named) {
		snprintf(dir, len, "%s", named);
		if (mkdir(dir, 0755) == 0 || errno == EEXIST)
			return 0;
	}
	for (int i = 1; !named && i < 100; i++) {
		if (i == 1)
			snprintf(dir, len, "%s", want);
		else
			snprintf(dir, len, "%s.%d", want, i);
		if (mkdir(dir, 0755) == 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	helper_error("cannot make the folder %s: %s; give another with -o",
		     dir, strerror(errno));
	return -1;
}

int cmd_stacks(int argc, char **argv)
{
	char step[STEP_ID_MAX] = "", dir[4096], self[4096], count[16];
	char uid[16] = "";
	char jobid[32], nodelist[4096], want[128];
	const char *out_dir = NULL, *step_arg = NULL;
	struct collection col;
	struct dt_hostlist *hl = NULL;
	struct captured c = { 0 };
	char *nodes = NULL, err[256];
	ssize_t self_len;
	int rc = 1;

	memset(&col, 0, sizeof(col));
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "--collect"))
		return stacks_collect(argv[2], argc == 4 ? argv[3] : NULL,
				      ANSWER_MS);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			out_dir = argv[++i];
		} else if (argv[i][0] != '-' && !step_arg) {
			step_arg = argv[i];
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!step_arg) {
		usage(stderr);
		return 2;
	}
	if (find_step(step_arg, step, &nodes, uid, sizeof(uid)) != 0)
		goto out;
	/* An administrator's look: Slurm lets only the job's user start a
	 * step in it, and nothing here needs more than that user's rights. */
	if (stacks_become_user(uid) < 0)
		goto out;
	if (dt_hostlist_parse(nodes, &hl, err, sizeof(err)) < 0 ||
	    dt_hostlist_count(hl) == 0) {
		helper_error("squeue gave step %s the node list '%s', which "
			     "this command cannot read: report it, with your "
			     "Slurm's version", step, nodes);
		goto out;
	}
	self_len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (self_len <= 0) {
		helper_error("cannot find this command's own path: run it "
			     "by its full path");
		goto out;
	}
	self[self_len] = '\0';
	col.nhosts = dt_hostlist_count(hl);
	col.hosts = calloc(col.nhosts, sizeof(*col.hosts));
	col.last = calloc(col.nhosts, sizeof(*col.last));
	if (!col.hosts || !col.last) {
		helper_error("out of memory");
		goto out;
	}
	snprintf(jobid, sizeof(jobid), "--jobid=%.*s",
		 (int)strcspn(step, "."), step);
	snprintf(nodelist, sizeof(nodelist), "--nodelist=%s", nodes);
	snprintf(count, sizeof(count), "%zu", col.nhosts);
	{
		/* One task on each of the step's nodes, sharing the job's
		 * resources with it; no MPI, nothing of the site's. */
		const char *srun[] = { "srun", jobid, "--overlap", nodelist,
				 "-N", count, "-n", count,
				 "--ntasks-per-node=1", "--label", "--quiet",
				 "--mpi=none", "--kill-on-bad-exit=0",
				 "--job-name=dist-train-stacks", self,
				 "stacks", "--collect", step, uid, NULL };

		if (run_captured(srun, COLLECT_S, &c) < 0) {
			helper_error("cannot start srun: %s; run this where "
				     "Slurm's commands are installed",
				     strerror(errno));
			goto out;
		}
	}
	if (c.timed_out || c.status != 0) {
		helper_error("srun could not collect the stacks of step %s "
			     "in %d s (srun: %s): check that the job still "
			     "runs, and that this command is at %s on its "
			     "nodes too", step, COLLECT_S,
			     c.timed_out ? "no answer" : last_line(&c), self);
		goto out;
	}
	if (take_output(&col, c.out) < 0) {
		helper_error("out of memory");
		goto out;
	}
	if (col.nprocs == 0) {
		helper_error("no process of step %s was found on its nodes "
			     "(%s): it has ended, or its tasks are not this "
			     "user's, or they run without --dist-train",
			     step, nodes);
		goto out;
	}
	snprintf(want, sizeof(want), "dist-train-%s.stacks", step);
	if (make_folder(out_dir, want, dir, sizeof(dir)) < 0)
		goto out;
	rc = summarize(&col, step, dir, copy_dumps(&col, dir));
out:
	free_collection(&col);
	free(c.out);
	free(nodes);
	dt_hostlist_free(hl);
	return rc;
}
