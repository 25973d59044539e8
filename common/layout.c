#include "config.h"

#include "layout.h"
#include "error.h"
#include "hostlist.h"
#include "tasks_per_node.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The fixes of the messages below: what the user cannot fix. */
#define SLURM_ODD \
	"ask your administrator to check that srun and this node's slurmd " \
	"run the same Slurm release"
/* ... and what a user may have set by hand (dist-train exec). */
#define SLURM_BAD "unset it if you set it yourself, else " SLURM_ODD
#define PMIX_ODD \
	"use --dist-train=pmix=no to take the ranks from Slurm alone, and " \
	"ask your administrator to check Slurm's mpi/pmix plugin"

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

/* Whether NAME is one of the comma-separated names in CSV. */
static bool csv_has(const char *csv, const char *name)
{
	size_t n = strlen(name);
	const char *p = csv;

	while (p) {
		if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0'))
			return true;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return false;
}

int dt_layout_rank0_from_hostfile(struct dt_layout *l, const char *host,
				  const char *self, bool runs_rank0,
				  char *err, size_t errlen)
{
	if (!host || !*host) {
		dt_layout_rank0_error("arbitrary", err, errlen);
		return -1;
	}
	if (l->nodes && !csv_has(l->nodes, host)) {
		dt_errf(err, errlen, "the first host of SLURM_HOSTFILE, %s, is "
			"not one of the step's nodes: fix the file, or add "
			"--mpi=pmix", host);
		return -1;
	}
	if (!self || runs_rank0 != !strcmp(host, self)) {
		dt_errf(err, errlen, "the first host of SLURM_HOSTFILE is %s, "
			"but Slurm started task 0 on %s: add --mpi=pmix",
			host, runs_rank0 && self ? self : "another node");
		return -1;
	}
	free(l->master_addr);
	l->master_addr = strdup(host);
	if (!l->master_addr) {
		dt_errf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

void dt_layout_rank0_error(const char *distribution, char *err,
			   size_t errlen)
{
	if (distribution && !strncmp(distribution, "arbitrary", 9))
		dt_errf(err, errlen, "with --distribution=arbitrary, srun "
			"reads rank 0's host from the first line of "
			"SLURM_HOSTFILE; without that file (as with an "
			"ordered --nodelist) only PMIx knows it: add "
			"--mpi=pmix");
	else
		dt_errf(err, errlen, "rank 0 does not run on the step's first "
			"node (SLURM_DISTRIBUTION=%s): add --mpi=pmix",
			distribution ? distribution : "unset");
}

const char *dt_rank_source_name(enum dt_rank_source source)
{
	return source == DT_RANKS_FROM_PMIX ? "pmix" : "slurm";
}

/* The longest text of PER_NODE bytes a node that NODES nodes have. */
static size_t text_bound(uint32_t nodes, size_t per_node)
{
	size_t bound = DT_STEP_TEXT_BASE + (size_t)nodes * per_node;

	return bound > DT_STEP_TEXT_MAX ? DT_STEP_TEXT_MAX : bound;
}

static bool too_big(const char *text, uint32_t nodes, size_t per_node)
{
	size_t bound = text_bound(nodes, per_node);

	return strnlen(text, bound + 1) > bound;
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

	if (step->distribution &&
	    strnlen(step->distribution, DT_DISTRIBUTION_MAX + 1) >
	    DT_DISTRIBUTION_MAX) {
		dt_errf(err, errlen, "SLURM_DISTRIBUTION is longer than %u "
			"bytes, more than any layout Slurm names, so it is "
			"refused unread: give srun a --distribution it knows",
			DT_DISTRIBUTION_MAX);
		goto out;
	}
	if (!step->nodelist || !*step->nodelist) {
		dt_errf(err, errlen, "SLURM_STEP_NODELIST is not set in the "
			"step's environment: " SLURM_ODD);
		goto out;
	}
	/*
	 * Read in slurmstepd, so bounded before it is parsed: no step's
	 * real list is longer than its nodes' names written out in full.
	 */
	if (too_big(step->nodelist, step->num_nodes, DT_NODELIST_PER_NODE)) {
		dt_errf(err, errlen, "SLURM_STEP_NODELIST is longer than %zu "
			"bytes, more than a step of %u node%s can have, so it "
			"is refused unread: " SLURM_BAD,
			text_bound(step->num_nodes, DT_NODELIST_PER_NODE),
			step->num_nodes, step->num_nodes == 1 ? "" : "s");
		goto out;
	}
	/*
	 * Parsed no further than the step's node count. A component of a
	 * heterogeneous step (srun A : B) sees its own nodes in Slurm's
	 * items, the whole step's in the environment.
	 */
	rc = dt_hostlist_parse_capped(step->nodelist, step->num_nodes, &hl,
				      perr, sizeof(perr));
	if (rc == -2) {
		dt_errf(err, errlen, "SLURM_STEP_NODELIST='%.200s' names more "
			"than the %u node%s of this part of the step: a "
			"heterogeneous step (srun A : B) cannot be one "
			"--dist-train world: run it as one srun, or its "
			"parts as separate sruns", step->nodelist,
			step->num_nodes, step->num_nodes == 1 ? "" : "s");
		rc = -1;
		goto out;
	}
	if (rc < 0) {
		dt_errf(err, errlen, "SLURM_STEP_NODELIST='%.200s' is malformed "
			"(%s): " SLURM_BAD, step->nodelist, perr);
		goto out;
	}
	rc = -1;
	if (dt_hostlist_count(hl) != step->num_nodes) {
		dt_errf(err, errlen, "SLURM_STEP_NODELIST='%.200s' names %zu "
			"nodes but the step has %u: " SLURM_BAD,
			step->nodelist, dt_hostlist_count(hl),
			step->num_nodes);
		goto out;
	}
	if (!step->tasks_per_node || !*step->tasks_per_node) {
		dt_errf(err, errlen, "SLURM_STEP_TASKS_PER_NODE is not set in "
			"the step's environment: " SLURM_ODD);
		goto out;
	}
	if (too_big(step->tasks_per_node, step->num_nodes,
		    DT_TASKS_PER_NODE_PER_NODE)) {
		dt_errf(err, errlen, "SLURM_STEP_TASKS_PER_NODE is longer than "
			"%zu bytes, more than a step of %u node%s can have, so "
			"it is refused unread: " SLURM_BAD,
			text_bound(step->num_nodes,
				DT_TASKS_PER_NODE_PER_NODE), step->num_nodes,
			step->num_nodes == 1 ? "" : "s");
		goto out;
	}
	if (dt_tpn_parse(step->tasks_per_node, &tpn, perr, sizeof(perr)) < 0) {
		dt_errf(err, errlen, "SLURM_STEP_TASKS_PER_NODE is malformed "
			"(%s): " SLURM_BAD, perr);
		goto out;
	}
	if (tpn.nodes != step->num_nodes || tpn.tasks != step->num_tasks ||
	    dt_tpn_at(&tpn, step->node_id) != step->local_tasks) {
		dt_errf(err, errlen, "SLURM_STEP_TASKS_PER_NODE='%s' does not "
			"match the step (%u tasks on %u nodes, %u on node %u): "
			SLURM_BAD, step->tasks_per_node, step->num_tasks,
			step->num_nodes, step->local_tasks, step->node_id);
		goto out;
	}
	/*
	 * Block, cyclic and plane layouts put task 0 on the step's first
	 * node; an arbitrary layout puts it wherever the host file says,
	 * which only PMIx (or the first node itself) knows.
	 */
	out->node_rank = step->node_id;
	out->num_nodes = step->num_nodes;
	out->world_size = step->num_tasks;
	out->local_size = step->local_tasks;
	out->max_local_size = tpn.max_count;
	out->nodes = hostlist_csv(hl, &too_long);
	if (!out->nodes && !too_long) {
		dt_errf(err, errlen, "out of memory");
		goto out;
	}
	if ((step->distribution &&
	     !strncmp(step->distribution, "arbitrary", 9)) ||
	    (step->node_id == 0 && step->first_global_id != 0)) {
		if (step->rank0_elsewhere_ok) {
			rc = 0;
			goto out;
		}
		dt_layout_rank0_error(step->distribution, err, errlen);
		goto out;
	}

	len = dt_hostlist_nth(hl, 0, host, sizeof(host));
	if (len < 0 || (size_t)len >= sizeof(host)) {
		dt_errf(err, errlen, "the first host of SLURM_STEP_NODELIST "
			"is longer than %zu characters: ask your administrator "
			"to give that node a shorter name", sizeof(host) - 1);
		goto out;
	}
	out->master_addr = strdup(host);
	if (!out->master_addr) {
		dt_errf(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		dt_layout_free(out);
	dt_hostlist_free(hl);
	dt_tpn_free(&tpn);
	return rc;
}

/* A decimal uint32 in NAME, which must be set. */
static int env_u32(dt_getenv_fn getenv, void *arg, const char *name,
		   uint32_t *out, char *err, size_t errlen)
{
	const char *v = getenv(name, arg);
	char *end;
	unsigned long long n;

	if (!v || !*v) {
		dt_errf(err, errlen, "%s is not set in the task's environment: "
			"run the command as a task of srun", name);
		return -1;
	}
	if (*v < '0' || *v > '9' || (n = strtoull(v, &end, 10), *end) ||
	    n > UINT32_MAX) {
		dt_errf(err, errlen, "%s='%.64s' is not a number: unset it if you "
			"set it, and run the command as a task of srun", name,
			v);
		return -1;
	}
	*out = (uint32_t)n;
	return 0;
}

int dt_slurm_step_from_env(dt_getenv_fn getenv, void *arg,
			   struct dt_slurm_step *step, struct dt_task_ids *ids,
			   char *err, size_t errlen)
{
	struct dt_tasks_per_node tpn;
	const char *gtids;
	char perr[200];

	memset(step, 0, sizeof(*step));
	memset(ids, 0, sizeof(*ids));
	step->nodelist = getenv("SLURM_STEP_NODELIST", arg);
	if (!step->nodelist)
		return 1;
	step->tasks_per_node = getenv("SLURM_STEP_TASKS_PER_NODE", arg);
	step->distribution = getenv("SLURM_DISTRIBUTION", arg);
	if (env_u32(getenv, arg, "SLURM_STEP_NUM_NODES", &step->num_nodes,
		    err, errlen) < 0 ||
	    env_u32(getenv, arg, "SLURM_STEP_NUM_TASKS", &step->num_tasks,
		    err, errlen) < 0 ||
	    env_u32(getenv, arg, "SLURM_NODEID", &step->node_id, err,
		    errlen) < 0 ||
	    env_u32(getenv, arg, "SLURM_PROCID", &ids->rank, err,
		    errlen) < 0 ||
	    env_u32(getenv, arg, "SLURM_LOCALID", &ids->local_rank, err,
		    errlen) < 0)
		return -1;

	/* This node's task count: SLURM_STEP_TASKS_PER_NODE at its id. */
	if (!step->tasks_per_node ||
	    dt_tpn_parse(step->tasks_per_node, &tpn, perr, sizeof(perr)) < 0) {
		dt_errf(err, errlen, "SLURM_STEP_TASKS_PER_NODE='%s' is "
			"malformed: unset it if you set it, and run the command "
			"as a task of srun", step->tasks_per_node ?
			step->tasks_per_node : "");
		return -1;
	}
	step->local_tasks = dt_tpn_at(&tpn, step->node_id);
	dt_tpn_free(&tpn);

	/* The lowest global id here, as slurmstepd's item would say. */
	gtids = getenv("SLURM_GTIDS", arg);
	step->first_global_id = gtids && *gtids >= '0' && *gtids <= '9' ?
		(uint32_t)strtoul(gtids, NULL, 10) : 0;
	return 0;
}

/* The PMIx and Slurm values of the same fact, which must agree. */
static int pmix_agrees(const char *what, uint32_t pmix, uint32_t slurm,
		       char *err, size_t errlen)
{
	if (pmix == slurm)
		return 1;
	dt_errf(err, errlen, "PMIx and Slurm disagree on the %s: PMIx says "
		"%u, Slurm %u; " PMIX_ODD, what, pmix, slurm);
	return 0;
}

int dt_layout_from_pmix(const struct dt_pmix_view *pmix,
			const struct dt_layout *slurm,
			const struct dt_task_ids *slurm_ids,
			struct dt_layout *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!pmix->rank0_host || !*pmix->rank0_host) {
		dt_errf(err, errlen, "PMIx does not say which host runs rank "
			"0: " PMIX_ODD);
		return -1;
	}
	if (slurm && slurm_ids) {
		if (!pmix_agrees("rank (SLURM_PROCID)", pmix->rank,
				 slurm_ids->rank, err, errlen) ||
		    !pmix_agrees("local rank (SLURM_LOCALID)", pmix->local_rank,
				 slurm_ids->local_rank, err, errlen) ||
		    !pmix_agrees("number of tasks (SLURM_STEP_NUM_TASKS)",
				 pmix->world_size, slurm->world_size, err,
				 errlen) ||
		    !pmix_agrees("tasks on this node (SLURM_STEP_TASKS_PER_NODE)",
				 pmix->local_size, slurm->local_size, err,
				 errlen) ||
		    !pmix_agrees("node id (SLURM_NODEID)", pmix->node_id,
				 slurm->node_rank, err, errlen) ||
		    !pmix_agrees("number of nodes (SLURM_STEP_NUM_NODES)",
				 pmix->num_nodes, slurm->num_nodes, err, errlen))
			return -1;
		if (slurm->master_addr &&
		    strcmp(slurm->master_addr, pmix->rank0_host)) {
			dt_errf(err, errlen, "PMIx and Slurm disagree on the "
				"host of rank 0: PMIx says %s, Slurm %s; "
				PMIX_ODD, pmix->rank0_host, slurm->master_addr);
			return -1;
		}
	}
	out->source = DT_RANKS_FROM_PMIX;
	out->node_rank = pmix->node_id;
	out->num_nodes = pmix->num_nodes;
	out->world_size = pmix->world_size;
	out->local_size = pmix->local_size;
	out->max_local_size = slurm ? slurm->max_local_size : pmix->local_size;
	out->master_addr = strdup(pmix->rank0_host);
	out->nodes = slurm && slurm->nodes ? strdup(slurm->nodes) : NULL;
	if (!out->master_addr || (slurm && slurm->nodes && !out->nodes)) {
		dt_layout_free(out);
		dt_errf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int dt_slurm_rank_host(const struct dt_slurm_step *step, uint32_t rank,
		       char *name, size_t len)
{
	struct dt_hostlist *nodes = NULL;
	struct dt_tasks_per_node tpn = { 0 };
	uint32_t node = 0;
	int rc = -1;

	if (step->distribution && strncmp(step->distribution, "block", 5))
		return -1;
	/* Capped at the step's nodes, where the caller knows them. */
	if (dt_hostlist_parse_capped(step->nodelist, step->num_nodes ?
				     step->num_nodes : DT_HOSTLIST_MAX_HOSTS,
				     &nodes, NULL, 0) < 0 ||
	    dt_tpn_parse(step->tasks_per_node, &tpn, NULL, 0) < 0)
		goto out;
	while (node < tpn.nodes && dt_tpn_tasks_before(&tpn, node + 1) <= rank)
		node++;
	if (node < tpn.nodes) {
		int n = dt_hostlist_nth(nodes, node, name, len);

		rc = n >= 0 && (size_t)n < len ? 0 : -1;
	}
out:
	dt_hostlist_free(nodes);
	dt_tpn_free(&tpn);
	return rc;
}
