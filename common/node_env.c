#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "node_env.h"

int dt_node_env_from(const struct dt_env *task, dt_getenv_fn getenv,
		     void *arg, struct dt_node_env *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < task->count; i++) {
		const struct dt_env_entry *e = &task->entries[i];
		const char *before;

		if (e->action == DT_ENV_UNSET)
			out->partial = true;
		if (e->action != DT_ENV_SET || dt_train_env_per_task(e->name))
			continue;
		before = getenv(e->name, arg);
		if (dt_env_add(&out->set, e->name, e->value, DT_ENV_SET) < 0 ||
		    dt_env_add(&out->was, e->name, before,
			       before ? DT_ENV_SET : DT_ENV_UNSET) < 0) {
			dt_node_env_free(out);
			return -1;
		}
	}
	return 0;
}

void dt_node_env_drop(struct dt_node_env *n, size_t i)
{
	if (i >= n->set.count)
		return;
	dt_env_remove(&n->set, i);
	dt_env_remove(&n->was, i);
}

/* Whether entry I of N still holds the node's value in NOW (a value
 * changed since, by Slurm or another plugin, stands). */
static bool still_the_nodes(const struct dt_node_env *n, size_t i,
			    const char *now)
{
	return now && !strcmp(now, n->set.entries[i].value);
}

const char *dt_node_env_getenv(const char *name, void *view)
{
	const struct dt_node_env_view *v = view;
	const char *now = v->getenv(name, v->arg);

	for (size_t i = 0; v->node && i < v->node->set.count; i++)
		if (!strcmp(v->node->set.entries[i].name, name))
			return still_the_nodes(v->node, i, now) ?
			       v->node->was.entries[i].value : now;
	return now;
}

int dt_node_env_undo(const struct dt_node_env *n, dt_getenv_fn getenv,
		     void *arg, struct dt_env *out)
{
	for (size_t i = 0; i < n->set.count; i++) {
		const struct dt_env_entry *b = &n->was.entries[i];

		if (still_the_nodes(n, i, getenv(b->name, arg)) &&
		    dt_env_add(out, b->name, b->value, b->action) < 0)
			return -1;
	}
	return 0;
}

int dt_node_env_complete(const struct dt_node_env *n, dt_getenv_fn getenv,
			 void *arg, struct dt_env *env)
{
	for (size_t i = 0; i < n->set.count; i++) {
		const struct dt_env_entry *b = &n->was.entries[i];

		if (!dt_env_find(env, b->name) &&
		    still_the_nodes(n, i, getenv(b->name, arg)) &&
		    dt_env_add(env, b->name, b->value, b->action) < 0)
			return -1;
	}
	return 0;
}

bool dt_node_env_intact(const struct dt_node_env *n, dt_getenv_fn getenv,
			void *arg)
{
	for (size_t i = 0; i < n->set.count; i++)
		if (!still_the_nodes(n, i, getenv(n->set.entries[i].name, arg)))
			return false;
	return true;
}

const char *dt_env_reads_getenv(const char *name, void *reads)
{
	struct dt_env_reads *r = reads;
	const char *v = r->getenv(name, r->arg);

	if (!dt_env_find(&r->seen, name) &&
	    dt_env_add(&r->seen, name, v, v ? DT_ENV_SET : DT_ENV_UNSET) < 0)
		r->failed = true;
	return v;
}

bool dt_env_reads_same(const struct dt_env_reads *r, dt_getenv_fn getenv,
		       void *arg)
{
	if (r->failed)
		return false;
	for (size_t i = 0; i < r->seen.count; i++) {
		const struct dt_env_entry *e = &r->seen.entries[i];
		const char *now = getenv(e->name, arg);

		if (e->action == DT_ENV_UNSET ? now != NULL :
		    !now || strcmp(now, e->value))
			return false;
	}
	return true;
}

bool dt_env_entry_changes(const struct dt_env_entry *e, dt_getenv_fn getenv,
			  void *arg)
{
	const char *now = getenv(e->name, arg);

	switch (e->action) {
	case DT_ENV_SET:
		return !now || strcmp(now, e->value);
	case DT_ENV_UNSET:
		return now != NULL;
	default:
		return false;
	}
}

void dt_node_env_free(struct dt_node_env *n)
{
	dt_env_free(&n->set);
	dt_env_free(&n->was);
}
