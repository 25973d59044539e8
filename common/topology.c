#include "config.h"

#include "topology.h"
#include "gpu_vendor.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dt_machine_free(struct dt_machine *m)
{
	if (!m)
		return;
	free(m->cores);
	free(m->pus);
	free(m->numas);
	free(m->gpus);
	free(m->nics);
	free(m->gpu_nic_hops);
	memset(m, 0, sizeof(*m));
}

static int cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

size_t dt_cpulist_format(const unsigned *cpus, unsigned n, char *buf,
			 size_t len)
{
	unsigned *sorted = n ? malloc(n * sizeof(*sorted)) : NULL;
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	if (n && !sorted)
		return 0;
	if (n)
		memcpy(sorted, cpus, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_unsigned);
	for (unsigned i = 0; i < n;) {
		unsigned j = i;
		int w;

		while (j + 1 < n && sorted[j + 1] <= sorted[j] + 1)
			j++;
		if (sorted[j] == sorted[i])
			w = snprintf(buf + (used < len ? used : len),
				     used < len ? len - used : 0, "%s%u",
				     used ? "," : "", sorted[i]);
		else
			w = snprintf(buf + (used < len ? used : len),
				     used < len ? len - used : 0, "%s%u-%u",
				     used ? "," : "", sorted[i], sorted[j]);
		if (w > 0)
			used += (size_t)w;
		i = j + 1;
	}
	free(sorted);
	return used;
}

int dt_intlist_parse(const char *text, unsigned max, unsigned **out)
{
	unsigned *list = NULL;
	size_t n = 0, cap = 0;
	const char *p = text;

	*out = NULL;
	if (!text || !*text)
		return -1;
	for (;;) {
		unsigned long lo, hi;
		char *end;

		if (*p < '0' || *p > '9')
			goto bad;
		lo = strtoul(p, &end, 10);
		hi = lo;
		p = end;
		if (*p == '-') {
			p++;
			if (*p < '0' || *p > '9')
				goto bad;
			hi = strtoul(p, &end, 10);
			p = end;
		}
		if (lo > hi || hi > max)
			goto bad;
		for (unsigned long v = lo; v <= hi; v++) {
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 8;
				unsigned *nl = realloc(list, ncap * sizeof(*nl));

				if (!nl)
					goto bad;
				list = nl;
				cap = ncap;
			}
			list[n++] = (unsigned)v;
		}
		if (!*p)
			break;
		if (*p++ != ',')
			goto bad;
	}
	*out = list;
	return (int)n;
bad:
	free(list);
	return -1;
}

unsigned dt_gpus_in_kfd_order(const struct dt_gpu *gpus, unsigned n,
			      const char (*kfd)[16], unsigned nkfd,
			      struct dt_gpu *out)
{
	unsigned count = 0;

	for (unsigned k = 0; k < nkfd; k++)
		for (unsigned g = 0; g < n; g++)
			if (!strcmp(gpus[g].busid, kfd[k])) {
				out[count++] = gpus[g];
				break;
			}
	for (unsigned g = 0; g < n; g++) {
		bool named = false;

		for (unsigned k = 0; k < nkfd && !named; k++)
			named = !strcmp(gpus[g].busid, kfd[k]);
		if (!named)
			out[count++] = gpus[g];
	}
	return count;
}

/* Index in M->gpus of the GPU with device minor MINOR, or -1. */
static int gpu_by_minor(const struct dt_machine *m, unsigned minor)
{
	bool known = false;

	for (unsigned g = 0; g < m->ngpus; g++) {
		if (m->gpus[g].minor >= 0)
			known = true;
		if (m->gpus[g].minor == (int)minor)
			return (int)g;
	}
	/* Without the driver's word, minors follow the bus order. */
	return !known && minor < m->ngpus ? (int)minor : -1;
}

const struct dt_gpu_vendor *dt_machine_gpu_vendor(const struct dt_machine *m)
{
	return m->ngpus && m->gpu_vendor >= 0 &&
	       m->gpu_vendor < DT_GPU_VENDORS ?
	       &dt_gpu_vendors[m->gpu_vendor] : NULL;
}

const char *dt_gpu_vendor_name(const struct dt_machine *m)
{
	const struct dt_gpu_vendor *v = dt_machine_gpu_vendor(m);

	return v ? v->name : "";
}

const char *dt_gpu_visible_name(const struct dt_machine *m)
{
	const struct dt_gpu_vendor *v = dt_machine_gpu_vendor(m);

	return v ? v->visible : "CUDA_VISIBLE_DEVICES";
}

/*
 * A MIG step: Slurm's list holds MIG devices (MIG-<uuid>), and
 * SLURM_STEP_GPUS counts instances, not GPUs, so neither names a GPU. The
 * driver says which GPUs hold instances (dt_machine_read_mig): where one
 * does, every instance of the step is on it, and each task is bound to it
 * (its NUMA node's cores split between them, as for any shared node).
 * Where several do, which instance is on which is NVML's to say, which
 * slurmstepd does not open: PARENT asks it where given (in a task);
 * otherwise, or where it cannot say, the tasks are bound by NUMA node,
 * and ERR says so with 0 returned.
 */
#define DT_MIG_DEVICES_MAX 1024u
/* NVML's longest UUID, its terminating NUL included. */
#define DT_MIG_UUID_MAX 96u

/* Each of the N devices of VISIBLE onto the GPU PARENT says holds it. */
static int place_mig(const struct dt_machine *m, const char *visible,
		     unsigned n, dt_mig_parent_fn parent, void *arg,
		     unsigned *out, char *err, size_t errlen)
{
	const char *p = visible;
	char uuid[DT_MIG_UUID_MAX], why[160];

	for (unsigned i = 0; i < n; i++) {
		size_t len = strcspn(p, ",");
		int minor = -1;
		unsigned g;

		if (len >= sizeof(uuid)) {
			/* message: not a problem (a verbose note: bound by NUMA) */
			dt_errf(err, errlen, "GPUs: MIG device '%.24s...' is "
				"no NVIDIA UUID, bound by NUMA node", p);
			return 0;
		}
		memcpy(uuid, p, len);
		uuid[len] = '\0';
		why[0] = '\0';
		if (parent(arg, uuid, &minor, why, sizeof(why)) < 0) {
			/* message: not a problem (a verbose note: bound by NUMA) */
			dt_errf(err, errlen, "GPUs: MIG instances of several "
				"GPUs, which NVML could not place (%s), bound "
				"by NUMA node", why);
			return 0;
		}
		for (g = 0; g < m->ngpus; g++)
			if (m->gpus[g].minor >= 0 && m->gpus[g].minor == minor)
				break;
		if (g == m->ngpus) {
			/* message: not a problem (a verbose note: bound by NUMA) */
			dt_errf(err, errlen, "GPUs: MIG device %s is on "
				"/dev/nvidia%d, which this node does not show, "
				"bound by NUMA node", uuid, minor);
			return 0;
		}
		out[i] = g;
		p += len + (p[len] == ',');
	}
	return (int)n;
}

static int mig_step_gpus(const struct dt_machine *m, const char *visible,
			 dt_mig_parent_fn parent, void *parent_arg,
			 unsigned **out, char *err, size_t errlen)
{
	unsigned n = 0, parents = 0, holder = 0;
	const char *p = visible;

	for (;;) {
		/* A node has a few dozen; the list is the user's. */
		if (n == DT_MIG_DEVICES_MAX) {
			dt_errf(err, errlen, "%s names more than %u MIG "
				"devices: unset it if you set it, or use "
				"--dist-train=bind=numa", dt_gpu_visible_name(m),
				DT_MIG_DEVICES_MAX);
			return -1;
		}
		if (strncmp(p, "MIG-", 4)) {
			dt_errf(err, errlen, "%s='%s' mixes MIG devices with "
				"others: unset it if you set it, or use "
				"--dist-train=bind=numa", dt_gpu_visible_name(m),
				visible);
			return -1;
		}
		n++;
		p = strchr(p, ',');
		if (!p)
			break;
		p++;
	}
	for (unsigned g = 0; g < m->ngpus; g++) {
		if (m->gpus[g].mig) {
			parents++;
			holder = g;
		}
	}
	*out = malloc(n * sizeof(**out));
	if (!*out) {
		dt_errf(err, errlen, "out of memory");
		return -1;
	}
	if (parents != 1 && parent)
		return place_mig(m, visible, n, parent, parent_arg, *out, err,
				 errlen);
	if (parents != 1) {
		/* message: not a problem (a verbose note: bound by NUMA) */
		dt_errf(err, errlen, "GPUs: MIG instances %s, bound by NUMA "
			"node", parents ? "of several GPUs, which cannot be "
			"told apart without NVML" : "of a GPU this node does "
			"not show");
		return 0;
	}
	for (unsigned i = 0; i < n; i++)
		(*out)[i] = holder;
	return (int)n;
}

int dt_step_gpus(const struct dt_machine *m, const char *step_gpus,
		 const char *job_gpus, const char *visible,
		 unsigned **out, char *err, size_t errlen)
{
	return dt_step_gpus_placing_mig(m, step_gpus, job_gpus, visible, NULL,
					NULL, out, err, errlen);
}

int dt_step_gpus_placing_mig(const struct dt_machine *m, const char *step_gpus,
			     const char *job_gpus, const char *visible,
			     dt_mig_parent_fn parent, void *parent_arg,
			     unsigned **out, char *err, size_t errlen)
{
	const char *name, *text;
	unsigned *ids = NULL;
	bool slurm_list = true;
	int n;

	*out = NULL;
	if (errlen)
		err[0] = '\0';
	/*
	 * No GPU on the node: whatever Slurm's GRES counts there (a GRES
	 * without devices) is not ours to place, and the node is bound as
	 * one without GPUs, by NUMA node.
	 */
	if (m->ngpus == 0) {
		*out = malloc(sizeof(**out));
		if (!*out) {
			dt_errf(err, errlen, "out of memory");
			return -1;
		}
		return 0;
	}
	if (visible && !strncmp(visible, "MIG-", 4))
		return mig_step_gpus(m, visible, parent, parent_arg, out, err,
				     errlen);
	if (step_gpus && *step_gpus) {
		name = "SLURM_STEP_GPUS";
		text = step_gpus;
	} else if (job_gpus && *job_gpus) {
		name = "SLURM_JOB_GPUS";
		text = job_gpus;
	} else if (visible && *visible) {
		name = dt_gpu_visible_name(m);
		text = visible;
		slurm_list = false;
	} else {
		ids = malloc((m->ngpus ? m->ngpus : 1) * sizeof(*ids));
		if (!ids) {
			dt_errf(err, errlen, "out of memory");
			return -1;
		}
		for (unsigned g = 0; g < m->ngpus; g++)
			ids[g] = g;
		*out = ids;
		return (int)m->ngpus;
	}

	n = dt_intlist_parse(text, 1u << 20, &ids);
	if (n < 0 && !slurm_list && !strncmp(text, "GPU-", 4)) {
		/* UUIDs (Slurm's env_uuid, or the user's): which GPU each
		 * is, only the driver's library says. */
		*out = malloc(sizeof(**out));
		if (!*out) {
			dt_errf(err, errlen, "out of memory");
			return -1;
		}
		/* message: not a problem (a verbose note: bound by NUMA) */
		dt_errf(err, errlen, "GPUs: %s names them by UUID, bound by "
			"NUMA node", name);
		return 0;
	}
	if (n < 0) {
		dt_errf(err, errlen, "%s='%s' is not a list of GPU numbers: "
			"unset it if you set it, or use --dist-train=bind=numa, "
			"which binds each task to a NUMA node and leaves the "
			"GPUs to you", name, text);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		int g = slurm_list && m->slurm_minors ?
			gpu_by_minor(m, ids[i]) :
			ids[i] < m->ngpus ? (int)ids[i] : -1;

		if (g < 0) {
			dt_errf(err, errlen, "%s='%s' names GPU %u, but this "
				"node has %u %s GPU%s: unset it if you set "
				"it, or use --dist-train=bind=numa", name, text,
				ids[i], m->ngpus, dt_gpu_vendor_name(m),
				m->ngpus == 1 ? "" : "s");
			free(ids);
			return -1;
		}
		ids[i] = (unsigned)g;
	}
	/* M's order: the runtime's ordinals (for NVIDIA, with
	 * CUDA_DEVICE_ORDER=PCI_BUS_ID). */
	qsort(ids, (size_t)n, sizeof(*ids), cmp_unsigned);
	for (int i = 1; i < n; i++) {
		if (ids[i] == ids[i - 1]) {
			dt_errf(err, errlen, "%s='%s' names a GPU twice: unset "
				"it if you set it, or use "
				"--dist-train=bind=numa", name, text);
			free(ids);
			return -1;
		}
	}
	*out = ids;
	return n;
}
