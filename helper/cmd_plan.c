/*
 * dist-train plan [--topology FILE] [--tasks N] [--bind MODE] [--gpus LIST]
 *                 [--share-gpus] [--json]
 *
 * Print, for every local rank of this node (or of the machine in FILE),
 * the GPU, NUMA node, CPUs and NIC the binding gives it: the plugin runs
 * the same code, so this is what tasks get.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "../common/binding.h"
#include "../common/hwloc_machine.h"
#include "../common/nvml_mig.h"
#include "../common/settings.h"
#include "../common/tasks_per_node.h"

struct plan_options {
	const char *topology;
	const char *gpus;	/* --gpus: indexes in bus order */
	unsigned tasks;
	int bind;
	bool share_gpus;
	bool json;
};

static int parse(int argc, char **argv, struct plan_options *o)
{
	static const struct option longopts[] = {
		{ "topology", required_argument, NULL, 't' },
		{ "tasks", required_argument, NULL, 'n' },
		{ "bind", required_argument, NULL, 'b' },
		{ "gpus", required_argument, NULL, 'g' },
		{ "share-gpus", no_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct dt_config cfg;
	char word[64], err[640];
	int c;

	memset(o, 0, sizeof(*o));
	o->bind = DT_BIND_GPU;
	optind = 1;
	while ((c = getopt_long(argc, argv, "hn:", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			o->topology = optarg;
			break;
		case 'n':
			o->tasks = (unsigned)strtoul(optarg, NULL, 10);
			if (o->tasks == 0) {
				helper_error("--tasks wants a positive number: "
					     "give one, such as --tasks=8");
				return 2;
			}
			break;
		case 'b':
			/* The same words as --dist-train=bind=MODE. */
			dt_config_init(&cfg);
			snprintf(word, sizeof(word), "bind=%s", optarg);
			if (dt_config_parse_option(&cfg, word, err,
						   sizeof(err)) < 0) {
				helper_error("%s", err);
				return 2;
			}
			o->bind = cfg.bind;
			break;
		case 'g':
			o->gpus = optarg;
			break;
		case 's':
			o->share_gpus = true;
			break;
		case 'j':
			o->json = true;
			break;
		case 'h':
			printf("usage: " DT_NAME " plan [--topology FILE] "
			       "[--tasks N] [--bind gpu|numa|off] [--gpus LIST]"
			       " [--share-gpus] [--json]\n\n"
			       "Show the GPU, NUMA node, CPUs and NIC each "
			       "local rank of this node (or of FILE, an hwloc "
			       "XML)\ngets, with the plugin's own code.\n\n"
			       "  --topology FILE  an hwloc XML (lstopo --of "
			       "xml) instead of this node\n"
			       "  -n, --tasks N    tasks on the node [this "
			       "step's, else one per GPU]\n"
			       "  --bind MODE      gpu, numa or off, as "
			       "--dist-train=bind=MODE [gpu]\n"
			       "  --gpus LIST      the step's GPUs, indexes in "
			       "PCI bus order [all]\n"
			       "  --share-gpus     allow more tasks than GPUs\n"
			       "  --json           one JSON object per rank\n"
			       "  -h, --help       show this help\n\n"
			       "See dist-train(1).\n");
			return -1;
		default:
			return 2;
		}
	}
	if (optind != argc) {
		helper_error("unexpected argument '%s'; see " DT_NAME
			     " plan --help", argv[optind]);
		return 2;
	}
	return 0;
}

/* Tasks on this node when inside a step, else one per GPU, else one. */
static unsigned default_tasks(unsigned ngpus)
{
	const char *tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
	const char *node = getenv("SLURM_NODEID");
	struct dt_tasks_per_node t;
	unsigned n = 0;

	if (tpn && node && dt_tpn_parse(tpn, &t, NULL, 0) == 0) {
		n = dt_tpn_at(&t, (uint32_t)strtoul(node, NULL, 10));
		dt_tpn_free(&t);
	}
	if (!n)
		n = ngpus ? ngpus : 1;
	return n;
}

static void print_table(const struct dt_machine *m, const struct dt_plan *p,
			const char *source)
{
	char cpus[4096];

	printf("%s: %u NUMA node%s, %u core%s, %u %s%sGPU%s, %u NIC%s\n",
	       source, m->nnumas, m->nnumas == 1 ? "" : "s", m->ncores,
	       m->ncores == 1 ? "" : "s", m->ngpus, dt_gpu_vendor_name(m),
	       m->ngpus ? " " : "", m->ngpus == 1 ? "" : "s",
	       m->nnics, m->nnics == 1 ? "" : "s");
	printf("binding: %s, %u task%s\n", dt_bind_mode_name(p->mode),
	       p->ntasks, p->ntasks == 1 ? "" : "s");
	/* Which variable says each task's GPU: the vendor's own. */
	if (m->ngpus && p->mode == DT_BIND_GPU)
		printf("each task's GPU: DIST_TRAIN_GPU_ORDINAL, or %s alone "
		       "with visible-gpus=own\n", dt_gpu_visible_name(m));
	putchar('\n');
	printf("%-10s %-3s %-12s %-4s %-20s %s\n", "LOCAL_RANK", "GPU",
	       "PCI_BUS_ID", "NUMA", "CPUS", "NIC");
	for (unsigned r = 0; r < p->ntasks; r++) {
		const struct dt_task_plan *t = &p->tasks[r];
		char gpu[16] = "-", numa[16] = "-", nic[80] = "-";

		if (t->gpu >= 0)
			snprintf(gpu, sizeof(gpu), "%d", t->gpu_ordinal);
		if (t->numa >= 0)
			snprintf(numa, sizeof(numa), "%d", t->numa);
		if (t->nic >= 0) {
			const struct dt_nic *x = &m->nics[t->nic];

			if (x->netdev[0] && strcmp(x->netdev, x->name))
				snprintf(nic, sizeof(nic), "%s (%s)", x->name,
					 x->netdev);
			else
				snprintf(nic, sizeof(nic), "%s", x->name);
		}
		dt_cpulist_format(t->cpus, t->ncpus, cpus, sizeof(cpus));
		printf("%-10u %-3s %-12s %-4s %-20s %s%s\n", r, gpu,
		       t->gpu >= 0 ? m->gpus[t->gpu].busid : "-", numa,
		       t->ncpus ? cpus : "-", nic,
		       t->shares_cores ? "  (shares cores)" : "");
	}
}

static void print_json(const struct dt_machine *m, const struct dt_plan *p)
{
	char cpus[4096];

	printf("{\"mode\": \"%s\", \"tasks\": [", dt_bind_mode_name(p->mode));
	for (unsigned r = 0; r < p->ntasks; r++) {
		const struct dt_task_plan *t = &p->tasks[r];

		dt_cpulist_format(t->cpus, t->ncpus, cpus, sizeof(cpus));
		printf("%s\n  {\"local_rank\": %u, ", r ? "," : "", r);
		if (t->gpu >= 0)
			printf("\"gpu\": %d, \"pci_bus_id\": \"%s\", ",
			       t->gpu_ordinal, m->gpus[t->gpu].busid);
		else
			printf("\"gpu\": null, \"pci_bus_id\": null, ");
		if (t->numa >= 0)
			printf("\"numa\": %d, ", t->numa);
		else
			printf("\"numa\": null, ");
		printf("\"cpus\": \"%s\", \"cores\": %u, ", cpus, t->ncores);
		if (t->nic >= 0)
			printf("\"nic\": \"%s\", \"nic_netdev\": \"%s\", ",
			       m->nics[t->nic].name, m->nics[t->nic].netdev);
		else
			printf("\"nic\": null, \"nic_netdev\": null, ");
		printf("\"shares_cores\": %s}", t->shares_cores ? "true" :
		       "false");
	}
	printf("\n]}\n");
}

int cmd_plan(int argc, char **argv)
{
	struct plan_options o;
	struct dt_machine m;
	struct dt_plan_request req;
	struct dt_plan plan = { 0 };
	unsigned *gpus = NULL;
	char err[512];
	int rc = parse(argc, argv, &o), n;

	if (rc)
		return rc < 0 ? 0 : rc;
	if (dt_machine_load(o.topology, NULL, &m, err, sizeof(err)) < 0) {
		helper_error("%s", err);
		return 1;
	}
	rc = 1;
	/* This node's MIG instances are placed as its tasks place them;
	 * another machine's topology file has no NVML to ask. */
	n = (o.topology ? dt_step_gpus : dt_task_step_gpus)(&m,
		o.gpus ? NULL : getenv("SLURM_STEP_GPUS"),
		o.gpus ? NULL : getenv("SLURM_JOB_GPUS"),
		o.gpus ? o.gpus : getenv(dt_gpu_visible_name(&m)),
		&gpus, err, sizeof(err));
	if (n < 0) {
		helper_error("%s", err);
		goto out;
	}
	memset(&req, 0, sizeof(req));
	req.machine = &m;
	req.ntasks = o.tasks ? o.tasks : default_tasks((unsigned)n);
	req.mode = o.bind;
	req.share_gpus = o.share_gpus;
	req.gpus = gpus;
	req.ngpus = (unsigned)n;
	if (dt_plan_compute(&req, &plan, err, sizeof(err)) < 0) {
		helper_error("%s", err);
		goto out;
	}
	if (o.json) {
		print_json(&m, &plan);
	} else {
		print_table(&m, &plan, o.topology ? o.topology : "this node");
		/* Why the step's GPUs could not be told (MIG, UUIDs). */
		if (n == 0 && err[0])
			printf("\n%s\n", err);
	}
	rc = 0;
out:
	free(gpus);
	dt_plan_free(&plan);
	dt_machine_free(&m);
	return rc;
}
