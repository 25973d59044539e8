#include "config.h"

#include "layout.h"
#include "error.h"
#include "hostlist.h"
#include "tasks_per_node.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct csv {
	char *buf;
	size_t used;
	size_t cap;
	bool too_long;
};

static int csv_append(const char *name, size_t len, void *arg)
{
	struct csv *c = arg;
	size_t need = c->used + len + (c->used ? 1 : 0) + 1;

	if (need > DT_NODES_ENV_MAX) {
		c->too_long = true;
		return 1;
	}
	if (need > c->cap) {
		size_t ncap = c->cap ? c->cap : 256;
		char *nb;

		while (ncap < need)
			ncap *= 2;
		nb = realloc(c->buf, ncap);
		if (!nb)
			return -1;
		c->buf = nb;
		c->cap = ncap;
	}
	if (c->used)
		c->buf[c->used++] = ',';
	memcpy(c->buf + c->used, name, len);
	c->used += len;
	c->buf[c->used] = '\0';
	return 0;
}

static char *hostlist_csv(const struct dt_hostlist *hl, int *too_long)
{
	struct csv c = { 0 };

	*too_long = 0;
	if (dt_hostlist_foreach(hl, csv_append, &c) != 0) {
		*too_long = c.too_long;
		free(c.buf);
		return NULL;
	}
	return c.buf ? c.buf : strdup("");
}

char *dt_nodes_csv(const char *nodelist, int *too_long)
{
	struct dt_hostlist *hl;
	char *csv;

	*too_long = 0;
	if (dt_hostlist_parse(nodelist, &hl, NULL, 0) < 0)
		return NULL;
	csv = hostlist_csv(hl, too_long);
	dt_hostlist_free(hl);
	return csv;
}

void dt_layout_free(struct dt_layout *layout)
{
	if (!layout)
		return;
	free(layout->master_addr);
	free(layout->nodes);
	memset(layout, 0, sizeof(*layout));
}

const char *dt_rank_source_name(enum dt_rank_source source)
{
	return source == DT_RANKS_FROM_PMIX ? "pmix" : "slurm";
}

int dt_layout_from_slurm(const struct dt_slurm_step *step,
			 struct dt_layout *out, char *err, size_t errlen)
{
	struct dt_hostlist *hl = NULL;
	struct dt_tasks_per_node tpn = { 0 };
	char perr[200], host[256];
	int too_long, rc = -1, len;

	memset(out, 0, sizeof(*out));
	out->source = DT_RANKS_FROM_SLURM;

	if (!step->nodelist || !*step->nodelist) {
		dt_errf(err, errlen, "SLURM_STEP_NODELIST is not set in the "
			"step's environment");
		goto out;
	}
	if (dt_hostlist_parse(step->nodelist, &hl, perr, sizeof(perr)) < 0) {
		dt_errf(err, errlen, "SLURM_STEP_NODELIST='%s' is malformed: "
			"%s", step->nodelist, perr);
		goto out;
	}
	if (dt_hostlist_count(hl) != step->num_nodes) {
		dt_errf(err, errlen, "SLURM_STEP_NODELIST='%s' names %zu "
			"nodes but the step has %u", step->nodelist,
			dt_hostlist_count(hl), step->num_nodes);
		goto out;
	}
	if (!step->tasks_per_node || !*step->tasks_per_node) {
		dt_errf(err, errlen, "SLURM_STEP_TASKS_PER_NODE is not set in "
			"the step's environment");
		goto out;
	}
	if (dt_tpn_parse(step->tasks_per_node, &tpn, perr, sizeof(perr)) < 0) {
		dt_errf(err, errlen, "SLURM_STEP_TASKS_PER_NODE is malformed: "
			"%s", perr);
		goto out;
	}
	if (tpn.nodes != step->num_nodes || tpn.tasks != step->num_tasks ||
	    dt_tpn_at(&tpn, step->node_id) != step->local_tasks) {
		dt_errf(err, errlen, "SLURM_STEP_TASKS_PER_NODE='%s' does not "
			"match the step (%u tasks on %u nodes, %u on node %u)",
			step->tasks_per_node, step->num_tasks,
			step->num_nodes, step->local_tasks, step->node_id);
		goto out;
	}
	/*
	 * Block, cyclic and plane layouts put task 0 on the step's first
	 * node; an arbitrary layout puts it wherever the host file says,
	 * which only PMIx (or the first node itself) knows.
	 */
	if (step->distribution &&
	    !strncmp(step->distribution, "arbitrary", 9)) {
		dt_errf(err, errlen, "with --distribution=arbitrary only PMIx "
			"knows which host runs rank 0: add --mpi=pmix");
		goto out;
	}
	if (step->node_id == 0 && step->first_global_id != 0) {
		dt_errf(err, errlen, "rank 0 does not run on the step's first "
			"node (SLURM_DISTRIBUTION=%s): add --mpi=pmix",
			step->distribution ? step->distribution : "unset");
		goto out;
	}

	len = dt_hostlist_nth(hl, 0, host, sizeof(host));
	if (len < 0 || (size_t)len >= sizeof(host)) {
		dt_errf(err, errlen, "the first host of SLURM_STEP_NODELIST "
			"is longer than %zu characters", sizeof(host) - 1);
		goto out;
	}
	out->master_addr = strdup(host);
	out->nodes = hostlist_csv(hl, &too_long);
	if (!out->master_addr || (!out->nodes && !too_long)) {
		dt_errf(err, errlen, "out of memory");
		goto out;
	}
	out->node_rank = step->node_id;
	out->num_nodes = step->num_nodes;
	out->world_size = step->num_tasks;
	out->local_size = step->local_tasks;
	out->max_local_size = tpn.max_count;
	rc = 0;
out:
	if (rc < 0)
		dt_layout_free(out);
	dt_hostlist_free(hl);
	dt_tpn_free(&tpn);
	return rc;
}
