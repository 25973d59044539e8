/*
 * The step's task exits (see exit_tally.h).
 */
#include "config.h"

#include "exit_tally.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

int dt_exit_tally_init(struct dt_exit_tally *t, uint32_t tasks,
		       uint32_t nodes, uint32_t min_nodes,
		       bool stop_on_failure, bool torchrun)
{
	memset(t, 0, sizeof(*t));
	t->tasks = tasks;
	t->nodes = nodes;
	t->min_nodes = min_nodes;
	t->stop_on_failure = stop_on_failure;
	t->torchrun = torchrun;
	t->exited = calloc(tasks ? tasks : 1, 1);
	t->node_lost = calloc(nodes ? nodes : 1, 1);
	t->exits = calloc(tasks ? tasks : 1, sizeof(*t->exits));
	if (!t->exited || !t->node_lost || !t->exits) {
		dt_exit_tally_free(t);
		return -1;
	}
	return 0;
}

void dt_exit_tally_free(struct dt_exit_tally *t)
{
	free(t->exited);
	free(t->node_lost);
	free(t->exits);
	t->exited = t->node_lost = NULL;
	t->exits = NULL;
}

bool dt_exit_failed(int status)
{
	return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/* Whether the failures so far leave the step unable to go on. */
static bool must_stop(const struct dt_exit_tally *t)
{
	if (!t->stop_on_failure || t->n_failed == 0)
		return false;
	if (t->min_nodes == 0)
		return true;
	return t->nodes - t->n_nodes_lost < t->min_nodes;
}

int dt_exit_tally_add(struct dt_exit_tally *t, const struct dt_task_exit *e)
{
	if (e->rank >= t->tasks || t->exited[e->rank] ||
	    e->node_rank >= t->nodes)
		return -1;
	t->exited[e->rank] = 1;
	t->exits[t->n_exited++] = *e;
	if (!dt_exit_failed(e->status) || t->stopping)
		return 0;
	t->n_failed++;
	if (!t->have_first) {
		t->have_first = true;
		t->first = *e;
	}
	if (!t->node_lost[e->node_rank]) {
		t->node_lost[e->node_rank] = 1;
		t->n_nodes_lost++;
	}
	if (!must_stop(t))
		return 0;
	t->stopping = true;
	t->running_at_stop = t->tasks - t->n_exited;
	return 1;
}

void dt_exit_tally_stopped_by(struct dt_exit_tally *t, const char *by,
			      const char *ended)
{
	t->stopped_by = by;
	t->ended = ended;
	if (!t->stopping) {
		t->stopping = true;
		t->running_at_stop = t->tasks - t->n_exited;
	}
}

void dt_exit_tally_first_timed_out(struct dt_exit_tally *t,
				   const char *collective)
{
	if (dt_collective_name_ok(collective))
		snprintf(t->first_timed_out, sizeof(t->first_timed_out), "%s",
			 collective);
}

void dt_exit_tally_behind(struct dt_exit_tally *t, const char *words)
{
	size_t i;

	for (i = 0; words[i] && i + 1 < sizeof(t->behind); i++) {
		unsigned char c = (unsigned char)words[i];

		t->behind[i] = c < 0x20 || c == 0x7f || c == '"' ||
			       c == '\\' ? '?' : (char)c;
	}
	t->behind[i] = '\0';
}

void dt_exit_tally_lost_nodes(struct dt_exit_tally *t, const char *nodes)
{
	size_t n = strlen(nodes);

	if (n < sizeof(t->lost_nodes))
		memcpy(t->lost_nodes, nodes, n + 1);
	else
		snprintf(t->lost_nodes, sizeof(t->lost_nodes), "%.*s...",
			 (int)sizeof(t->lost_nodes) - 4, nodes);
}

/* The tasks never heard of, as "6" or "4-5,9" into BUF; how many. */
static uint32_t unheard(const struct dt_exit_tally *t, char *buf, size_t len)
{
	uint32_t count = 0;
	size_t used = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < t->tasks; i++) {
		uint32_t last = i;
		int k;

		if (t->exited[i])
			continue;
		while (last + 1 < t->tasks && !t->exited[last + 1])
			last++;
		count += last - i + 1;
		if (used < len) {
			k = last == i ?
			    snprintf(buf + used, len - used, "%s%u",
				     used ? "," : "", i) :
			    snprintf(buf + used, len - used, "%s%u-%u",
				     used ? "," : "", i, last);
			used = k < 0 ? len : used + (size_t)k;
		}
		i = last;
	}
	if (used >= len && len > 4)
		memcpy(buf + len - 4, "...", 4);
	return count;
}

static const char *signal_name(int sig)
{
	static const struct {
		int sig;
		const char *name;
	} names[] = {
		{ SIGHUP, "SIGHUP" }, { SIGINT, "SIGINT" },
		{ SIGQUIT, "SIGQUIT" }, { SIGILL, "SIGILL" },
		{ SIGTRAP, "SIGTRAP" }, { SIGABRT, "SIGABRT" },
		{ SIGBUS, "SIGBUS" }, { SIGFPE, "SIGFPE" },
		{ SIGKILL, "SIGKILL" }, { SIGUSR1, "SIGUSR1" },
		{ SIGSEGV, "SIGSEGV" }, { SIGUSR2, "SIGUSR2" },
		{ SIGPIPE, "SIGPIPE" }, { SIGALRM, "SIGALRM" },
		{ SIGTERM, "SIGTERM" }, { SIGXCPU, "SIGXCPU" },
		{ SIGXFSZ, "SIGXFSZ" }, { SIGSYS, "SIGSYS" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].sig == sig)
			return names[i].name;
	return NULL;
}

void dt_exit_describe(const struct dt_task_exit *e, char *buf, size_t len)
{
	int sig;
	const char *name;

	if (WIFEXITED(e->status)) {
		snprintf(buf, len, "exit code %d", WEXITSTATUS(e->status));
		return;
	}
	sig = WIFSIGNALED(e->status) ? WTERMSIG(e->status) : 0;
	name = signal_name(sig);
	if (e->oom)
		snprintf(buf, len, "the out-of-memory killer (signal %d%s%s)",
			 sig, name ? ", " : "", name ? name : "");
	else if (name)
		snprintf(buf, len, "signal %d (%s)", sig, name);
	else
		snprintf(buf, len, "signal %d", sig);
}

int dt_exit_cause(const struct dt_exit_tally *t, char *buf, size_t len)
{
	const struct dt_task_exit *f = &t->first;
	const char *what = t->torchrun ? "the torchrun agent of node" : "rank";
	const char *others = t->torchrun ?
			     (t->running_at_stop == 1 ? "agent" : "agents") :
			     (t->running_at_stop == 1 ? "rank" : "ranks");
	uint32_t id = t->torchrun ? f->node_rank : f->rank;
	char how[96], after[160], waited[DT_BEHIND_MAX + 96] = "";

	if (!t->have_first)
		return -1;
	dt_exit_describe(f, how, sizeof(how));
	if (t->stopped_by && t->lost_nodes[0]) {
		char lost[128];
		uint32_t n = unheard(t, lost, sizeof(lost));

		return snprintf(buf, len, "the step was stopped by %s, not by "
				"a task: %s stopped answering, and %s %s on "
				"it never reported an end; %u other tasks "
				"ended (the first, %s %u on %s, by %s)",
				t->stopped_by, t->lost_nodes,
				t->torchrun ? (n == 1 ? "the agent of node" :
					       "the agents of nodes") :
				(n == 1 ? "rank" : "ranks"),
				n ? lost : "none", t->n_exited, what, id,
				f->node, how);
	}
	if (t->stopped_by)
		return snprintf(buf, len, "the step was stopped by %s, not by "
				"a task: %u of its %u tasks ended (the first, "
				"%s %u on %s, by %s)", t->stopped_by,
				t->n_exited, t->tasks, what, id, f->node, how);
	if (t->stopping && t->min_nodes)
		snprintf(after, sizeof(after), "%u of %u nodes failed, fewer "
			 "than elastic's minimum of %u are left: stopping "
			 "the %u other %s still running", t->n_nodes_lost,
			 t->nodes, t->min_nodes, t->running_at_stop, others);
	else if (t->stopping && t->running_at_stop == 0)
		snprintf(after, sizeof(after), "no other task was still "
			 "running");
	else if (t->stopping)
		snprintf(after, sizeof(after), "stopping the %u other %s "
			 "still running (--dist-train=fail-fast=no lets them "
			 "run on)", t->running_at_stop, others);
	else
		snprintf(after, sizeof(after), "%u task%s failed in all",
			 t->n_failed, t->n_failed == 1 ? "" : "s");
	/* A rank whose collective timed out waited for the ones behind:
	 * the first to give up, not the cause. */
	if (t->first_timed_out[0] && t->behind[0])
		snprintf(waited, sizeof(waited), " when its %s timed out, "
			 "waiting for %s", t->first_timed_out, t->behind);
	else if (t->first_timed_out[0])
		snprintf(waited, sizeof(waited), " when its %s timed out: it "
			 "only waited for others, and no rank's saved stacks "
			 "show which were behind", t->first_timed_out);
	return snprintf(buf, len, "%s %u failed first, on %s (local rank "
			"%u): %s, %.1f s after the start%s; %s", what, id,
			f->node, f->local_rank, how, (double)f->after_ms / 1e3,
			waited, after);
}

/* A growing string; its text NULL once memory ran out. */
struct text {
	char *s;
	size_t used, size;
};

static void add(struct text *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!b->s)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->s + b->used, b->size - b->used, fmt, ap);
		va_end(ap);
		if (n < 0) {
			free(b->s);
			b->s = NULL;
			return;
		}
		if ((size_t)n < b->size - b->used) {
			b->used += (size_t)n;
			return;
		}
		char *grown = realloc(b->s, 2 * b->size + (size_t)n);

		if (!grown) {
			free(b->s);
			b->s = NULL;
			return;
		}
		b->s = grown;
		b->size = 2 * b->size + (size_t)n;
	}
}

/* E as a JSON object; node names are plain words (exit_record.c). */
static void add_exit(struct text *b, const struct dt_task_exit *e)
{
	char how[96];

	dt_exit_describe(e, how, sizeof(how));
	add(b, "{\"rank\": %u, \"local_rank\": %u, \"node_rank\": %u, "
	    "\"node\": \"%s\", ", e->rank, e->local_rank, e->node_rank,
	    e->node);
	if (WIFEXITED(e->status))
		add(b, "\"exit_code\": %d, \"signal\": null, ",
		    WEXITSTATUS(e->status));
	else
		add(b, "\"exit_code\": null, \"signal\": %d, ",
		    WIFSIGNALED(e->status) ? WTERMSIG(e->status) : 0);
	add(b, "\"oom\": %s, \"how\": \"%s\", \"after_s\": %.3f, "
	    "\"at_ms\": %llu}", e->oom ? "true" : "false", how,
	    (double)e->after_ms / 1e3, (unsigned long long)e->at_ms);
}

char *dt_exit_tally_json(const struct dt_exit_tally *t, const char *step_id)
{
	const char *ended = t->ended ? t->ended :
			    t->have_first ? "failed" : "completed";
	struct text b = { malloc(1024), 0, 1024 };
	char cause[DT_BEHIND_MAX + 512];

	add(&b, "{\n  \"version\": 1,\n  \"step\": \"%s\",\n  \"ended\": "
	    "\"%s\",\n  \"tasks\": %u,\n  \"nodes\": %u,\n  \"torchrun\": "
	    "%s,\n  \"fail_fast\": %s,\n", step_id, ended, t->tasks, t->nodes,
	    t->torchrun ? "true" : "false",
	    t->stop_on_failure ? "true" : "false");
	if (t->have_first && dt_exit_cause(t, cause, sizeof(cause)) > 0) {
		add(&b, "  \"cause\": \"%s\",\n  \"first_failure\": ", cause);
		add_exit(&b, &t->first);
		add(&b, ",\n");
	} else {
		add(&b, "  \"cause\": null,\n  \"first_failure\": null,\n");
	}
	if (t->lost_nodes[0]) {
		char lost[DT_LOST_NODES_MAX];

		add(&b, "  \"lost_nodes\": \"%s\",\n  \"never_heard\": \"",
		    t->lost_nodes);
		unheard(t, lost, sizeof(lost));
		add(&b, "%s\",\n", lost);
	}
	if (t->n_saved) {
		/* Names of dt_saved_file_of's making: no character to
		 * escape. */
		add(&b, "  \"saved\": [");
		for (size_t i = 0; i < t->n_saved; i++)
			add(&b, "%s\"%s\"", i ? ", " : "", t->saved[i].name);
		add(&b, "],\n");
	}
	add(&b, "  \"failed\": %u,\n  \"stopped\": %u,\n  \"exits_heard\": "
	    "%u,\n  \"exits\": [", t->n_failed,
	    t->stopping ? t->running_at_stop : 0, t->n_exited);
	for (uint32_t i = 0; i < t->n_exited; i++) {
		add(&b, "%s\n    ", i ? "," : "");
		add_exit(&b, &t->exits[i]);
	}
	add(&b, "\n  ]\n}\n");
	return b.s;
}
