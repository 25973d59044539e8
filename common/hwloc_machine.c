#include "config.h"

#include "hwloc_machine.h"
#include "error.h"
#include "gpu_vendor.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_HWLOC

#include <dlfcn.h>

#include <hwloc.h>

/* The hwloc calls used, resolved from libhwloc.so.15 (hwloc 2.x). */
struct hwloc_api {
	int (*topology_init)(hwloc_topology_t *);
	int (*topology_load)(hwloc_topology_t);
	void (*topology_destroy)(hwloc_topology_t);
	int (*topology_set_xml)(hwloc_topology_t, const char *);
	int (*topology_set_io_types_filter)(hwloc_topology_t,
					    enum hwloc_type_filter_e);
	int (*topology_set_flags)(hwloc_topology_t, unsigned long);
	hwloc_const_cpuset_t (*topology_get_allowed_cpuset)(hwloc_topology_t);
	int (*get_type_depth)(hwloc_topology_t, hwloc_obj_type_t);
	unsigned (*get_nbobjs_by_depth)(hwloc_topology_t, int);
	hwloc_obj_t (*get_obj_by_depth)(hwloc_topology_t, int, unsigned);
	int (*bitmap_first)(hwloc_const_bitmap_t);
	int (*bitmap_next)(hwloc_const_bitmap_t, int);
	int (*bitmap_isset)(hwloc_const_bitmap_t, unsigned);
	int (*bitmap_weight)(hwloc_const_bitmap_t);
	/* hwloc >= 2.1; NULL before. */
	int (*topology_set_components)(hwloc_topology_t, unsigned long,
				       const char *);
};

/*
 * Discovery components that would open GPU or display libraries (CUDA,
 * NVML, OpenCL, ROCm SMI, Level Zero, X11). In slurmstepd that would
 * initialise a GPU driver in the process the tasks are forked from, or
 * wait on a display; GPUs are found from PCI alone, NICs by the Linux
 * component.
 */
static const char *const skipped_components[] = {
	"cuda", "nvml", "opencl", "rsmi", "levelzero", "gl",
};

static struct hwloc_api hw;

/*
 * Blacklisting a component only stops its discovery: its plugin file is
 * still opened, with the GPU libraries it links, by every topology_init
 * that finds no topology alive (hwloc 2.12 and 2.15 as Debian builds
 * them load libze_loader that way; Debian 12's 2.9 loaded none). Only
 * HWLOC_PLUGINS_BLACKLIST, read at that moment, keeps the files closed.
 * It is set once, before the first topology, and added to a value the
 * process already has.
 */
static void blacklist_gpu_plugins(void)
{
	static const char plugins[] = "hwloc_cuda,hwloc_nvml,hwloc_opencl,"
				      "hwloc_rsmi,hwloc_levelzero,hwloc_gl";
	static int done;
	const char *old;
	char *both;

	if (done)
		return;
	done = 1;
	old = getenv("HWLOC_PLUGINS_BLACKLIST");
	if (!old || !*old) {
		setenv("HWLOC_PLUGINS_BLACKLIST", plugins, 1);
		return;
	}
	if (strstr(old, plugins))
		return;
	both = malloc(strlen(old) + sizeof(plugins) + 1);
	if (!both)
		return;
	sprintf(both, "%s,%s", old, plugins);
	setenv("HWLOC_PLUGINS_BLACKLIST", both, 1);
	free(both);
}

static int load_hwloc(char *err, size_t errlen)
{
	static void *lib;

	if (lib)
		return 0;
	/* By its absolute path only: slurmstepd runs this, as root. */
	lib = dlopen(HWLOC_LIBDIR "/libhwloc.so.15", RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		dt_errf(err, errlen, "cannot load hwloc (%s): ask your "
			"administrator to install hwloc 2 on this node "
			"(Debian, Ubuntu: libhwloc15; RHEL: hwloc-libs), or "
			"use --dist-train=bind=off", dlerror());
		return -1;
	}
#define RESOLVE(field)                                                   \
	do {                                                             \
		*(void **)(&hw.field) = dlsym(lib, "hwloc_" #field);     \
		if (!hw.field) {                                         \
			dt_errf(err, errlen, "libhwloc lacks hwloc_%s: " \
				"ask your administrator to install the " \
				"hwloc dist-train was built with", #field); \
			dlclose(lib);                                    \
			lib = NULL;                                      \
			return -1;                                       \
		}                                                        \
	} while (0)
	RESOLVE(topology_init);
	RESOLVE(topology_load);
	RESOLVE(topology_destroy);
	RESOLVE(topology_set_xml);
	RESOLVE(topology_set_io_types_filter);
	RESOLVE(topology_set_flags);
	RESOLVE(topology_get_allowed_cpuset);
	RESOLVE(get_type_depth);
	RESOLVE(get_nbobjs_by_depth);
	RESOLVE(get_obj_by_depth);
	RESOLVE(bitmap_first);
	RESOLVE(bitmap_next);
	RESOLVE(bitmap_isset);
	RESOLVE(bitmap_weight);
#undef RESOLVE
	*(void **)(&hw.topology_set_components) =
		dlsym(lib, "hwloc_topology_set_components");
	return 0;
}

static bool is_io(const struct hwloc_obj *o)
{
	return o->type == HWLOC_OBJ_BRIDGE || o->type == HWLOC_OBJ_PCI_DEVICE ||
	       o->type == HWLOC_OBJ_OS_DEVICE || o->type == HWLOC_OBJ_MISC;
}

/*
 * Whether NUMA node INDEX is a GPU's own memory: hwloc 2.11 and later
 * show each Grace Hopper GPU's memory as a NUMA node of subtype
 * GPUMemory, with the same CPUs as its Grace. Never a task's memory,
 * nor a domain of cores.
 */
static bool is_gpu_memory(hwloc_topology_t topo, int index)
{
	int depth = hw.get_type_depth(topo, HWLOC_OBJ_NUMANODE);
	unsigned n = hw.get_nbobjs_by_depth(topo, depth);

	for (unsigned i = 0; i < n; i++) {
		hwloc_obj_t node = hw.get_obj_by_depth(topo, depth, i);

		if (node->os_index == (unsigned)index)
			return node->subtype &&
			       !strcmp(node->subtype, "GPUMemory");
	}
	return false;
}

/* The first node of NODESET that is not a GPU's memory, or -1; how many
 * there are into *COUNT. */
static int cpu_memory_node(hwloc_topology_t topo, hwloc_const_bitmap_t nodeset,
			   unsigned *count)
{
	int first = -1;

	*count = 0;
	for (int i = nodeset ? hw.bitmap_first(nodeset) : -1; i >= 0;
	     i = hw.bitmap_next(nodeset, i))
		if (!is_gpu_memory(topo, i) && (*count)++ == 0)
			first = i;
	return first;
}

/*
 * The NUMA node an I/O object is local to: its first non-I/O ancestor's,
 * when that is one node (a device under the machine itself is near none),
 * a GPU's memory not counted.
 */
static int numa_of(hwloc_topology_t topo, const struct hwloc_obj *o)
{
	unsigned count;
	int node;

	while (o && is_io(o))
		o = o->parent;
	if (!o)
		return -1;
	node = cpu_memory_node(topo, o->nodeset, &count);
	return count == 1 ? node : -1;
}

static void busid_of(const struct hwloc_obj *o, char *buf, size_t len)
{
	const struct hwloc_pcidev_attr_s *p = &o->attr->pcidev;

	snprintf(buf, len, "%04x:%02x:%02x.%01x", p->domain, p->bus, p->dev,
		 p->func);
}

static const char *info(const struct hwloc_obj *o, const char *name)
{
	for (unsigned i = 0; i < o->infos_count; i++)
		if (!strcmp(o->infos[i].name, name))
			return o->infos[i].value;
	return NULL;
}

/* An RDMA device's first active port (PortNState=4), else 1. */
static int active_port(const struct hwloc_obj *o)
{
	for (int port = 1; port <= 8; port++) {
		char key[32];
		const char *state;

		snprintf(key, sizeof(key), "Port%dState", port);
		state = info(o, key);
		if (state && !strcmp(state, "4"))
			return port;
	}
	return 1;
}

/* Hops between two objects through their closest common ancestor. */
static unsigned hops(const struct hwloc_obj *a, const struct hwloc_obj *b)
{
	unsigned up = 0;

	for (const struct hwloc_obj *x = a; x; x = x->parent, up++) {
		unsigned down = 0;

		for (const struct hwloc_obj *y = b; y; y = y->parent, down++)
			if (x == y)
				return up + down;
	}
	return 1000;
}

/* NVIDIA's device minor of a GPU, from the driver, or -1. */
static int nvidia_minor(const char *busid)
{
	char path[128], line[256];
	FILE *f;
	int minor = -1;

	snprintf(path, sizeof(path), "/proc/driver/nvidia/gpus/%s/information",
		 busid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Device Minor: %d", &minor) == 1)
			break;
	fclose(f);
	return minor;
}

/*
 * AMD: the ROCm runtime numbers GPUs (ROCR_VISIBLE_DEVICES, HIP's
 * ordinals) in the order of the KFD topology's GPU nodes, which need not
 * be bus order, and counts each partition of an MI300 in TPX or CPX mode
 * as a GPU. Read amdkfd's nodes (at most 4096, each file 8 KiB) and order
 * M->gpus so; without them (no amdkfd), bus order stays.
 */
static int kfd_order(struct dt_machine *m)
{
	char (*kfd)[16] = NULL;
	struct dt_gpu *ordered = NULL;
	unsigned nkfd = 0, cap = 0;
	int rc = -1;

	for (unsigned node = 0; node < 4096; node++) {
		char path[96], text[8192], busid[16];
		size_t len;
		FILE *f;

		snprintf(path, sizeof(path),
			 "/sys/class/kfd/kfd/topology/nodes/%u/properties", node);
		f = fopen(path, "r");
		if (!f)
			break;
		len = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
		text[len] = '\0';
		if (dt_kfd_node_parse(text, busid, sizeof(busid)) != 1)
			continue;
		if (nkfd == cap) {
			char (*more)[16] = realloc(kfd, (cap ? 2 * cap : 16) *
						   sizeof(*kfd));

			if (!more)
				goto out;
			kfd = more;
			cap = cap ? 2 * cap : 16;
		}
		memcpy(kfd[nkfd++], busid, sizeof(busid));
	}
	if (!nkfd) {
		rc = 0;
		goto out;
	}
	ordered = calloc(m->ngpus + nkfd + 1, sizeof(*ordered));
	if (!ordered)
		goto out;
	m->ngpus = dt_gpus_in_kfd_order(m->gpus, m->ngpus,
					(const char (*)[16])kfd, nkfd, ordered);
	free(m->gpus);
	m->gpus = ordered;
	ordered = NULL;
	rc = 0;
out:
	free(kfd);
	free(ordered);
	return rc;
}

static int cmp_gpu(const void *a, const void *b)
{
	return strcmp(((const struct dt_gpu *)a)->busid,
		      ((const struct dt_gpu *)b)->busid);
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Cores and PUs that are allowed, and which NUMA nodes hold them. */
static int load_cores(hwloc_topology_t topo, const char *alloc_cores,
		      bool whole, struct dt_machine *m, char *err,
		      size_t errlen)
{
	hwloc_const_cpuset_t allowed = hw.topology_get_allowed_cpuset(topo);
	int depth = hw.get_type_depth(topo, HWLOC_OBJ_CORE);
	unsigned total, *alloc = NULL;
	int nalloc = -1;

	if (depth < 0)	/* no core level: treat each PU as a core */
		depth = hw.get_type_depth(topo, HWLOC_OBJ_PU);
	total = hw.get_nbobjs_by_depth(topo, depth);
	if (alloc_cores && *alloc_cores)
		nalloc = dt_intlist_parse(alloc_cores, 1u << 20, &alloc);
	/* Slurm's list only counts when it describes this machine. */
	for (int i = 0; i < nalloc; i++)
		if (alloc[i] >= total)
			nalloc = -1;

	m->cores = calloc(total ? total : 1, sizeof(*m->cores));
	m->pus = calloc(hw.get_nbobjs_by_depth(topo, hw.get_type_depth(
				topo, HWLOC_OBJ_PU)) + 1, sizeof(*m->pus));
	m->numas = calloc(total ? total : 1, sizeof(*m->numas));
	if (!m->cores || !m->pus || !m->numas)
		goto nomem;
	for (unsigned c = 0; c < total; c++) {
		hwloc_obj_t core = hw.get_obj_by_depth(topo, depth, c);
		struct dt_core *dc = &m->cores[m->ncores];
		bool mine = nalloc < 0;
		unsigned nnodes;
		int pu;

		for (int i = 0; i < nalloc && !mine; i++)
			mine = alloc[i] == c;
		if (!mine || !core->cpuset)
			continue;
		dc->first_pu = m->npus;
		for (pu = hw.bitmap_first(core->cpuset); pu >= 0;
		     pu = hw.bitmap_next(core->cpuset, pu))
			if (whole || hw.bitmap_isset(allowed, (unsigned)pu))
				m->pus[m->npus++] = (unsigned)pu;
		dc->npus = m->npus - dc->first_pu;
		if (!dc->npus)
			continue;
		dc->numa = cpu_memory_node(topo, core->nodeset, &nnodes);
		m->ncores++;
		if (dc->numa >= 0) {
			bool seen = false;

			for (unsigned i = 0; i < m->nnumas; i++)
				seen = seen || m->numas[i] == dc->numa;
			if (!seen)
				m->numas[m->nnumas++] = dc->numa;
		}
	}
	qsort(m->numas, m->nnumas, sizeof(*m->numas), cmp_int);
	free(alloc);
	return 0;
nomem:
	free(alloc);
	dt_errf(err, errlen, "out of memory");
	return -1;
}

/* GPUs and network devices, with the PCI hops between them. */
static int load_devices(hwloc_topology_t topo, bool this_node,
			struct dt_machine *m, char *err, size_t errlen)
{
	int pdepth = hw.get_type_depth(topo, HWLOC_OBJ_PCI_DEVICE);
	int odepth = hw.get_type_depth(topo, HWLOC_OBJ_OS_DEVICE);
	unsigned npci = hw.get_nbobjs_by_depth(topo, pdepth);
	unsigned nos = hw.get_nbobjs_by_depth(topo, odepth);
	hwloc_obj_t *gpu_objs = NULL, *nic_objs = NULL;
	unsigned per_vendor[DT_GPU_VENDORS] = { 0 };
	int rc = -1;

	m->gpus = calloc(npci + 1, sizeof(*m->gpus));
	m->nics = calloc(npci + 1, sizeof(*m->nics));
	gpu_objs = calloc(npci + 1, sizeof(*gpu_objs));
	nic_objs = calloc(npci + 1, sizeof(*nic_objs));
	if (!m->gpus || !m->nics || !gpu_objs || !nic_objs)
		goto nomem;

	/* One vendor per node, the one with the most GPUs (as mpibind
	 * binds one kind): a board's own graphics is no vendor's GPU. */
	for (unsigned i = 0; i < npci; i++) {
		hwloc_obj_t o = hw.get_obj_by_depth(topo, pdepth, i);
		int v = dt_gpu_vendor_of(o->attr->pcidev.vendor_id,
					 o->attr->pcidev.class_id);

		if (v >= 0)
			per_vendor[v]++;
	}
	m->gpu_vendor = 0;
	for (int v = 1; v < DT_GPU_VENDORS; v++)
		if (per_vendor[v] > per_vendor[m->gpu_vendor])
			m->gpu_vendor = v;
	for (unsigned i = 0; i < npci; i++) {
		hwloc_obj_t o = hw.get_obj_by_depth(topo, pdepth, i);
		struct dt_gpu *gpu = &m->gpus[m->ngpus];

		if (dt_gpu_vendor_of(o->attr->pcidev.vendor_id,
				     o->attr->pcidev.class_id) != m->gpu_vendor)
			continue;
		busid_of(o, gpu->busid, sizeof(gpu->busid));
		gpu->numa = numa_of(topo, o);
		gpu->minor = this_node && m->gpu_vendor == DT_GPU_NVIDIA ?
			nvidia_minor(gpu->busid) : -1;
		m->ngpus++;
	}
	qsort(m->gpus, m->ngpus, sizeof(*m->gpus), cmp_gpu);
	if (this_node && m->gpu_vendor == DT_GPU_AMD && kfd_order(m) < 0)
		goto nomem;
	if (m->ngpus > npci) {
		/* Partitions: more GPUs than PCI devices. */
		hwloc_obj_t *more = realloc(gpu_objs, (m->ngpus + 1) *
					    sizeof(*gpu_objs));

		if (!more)
			goto nomem;
		gpu_objs = more;
	}
	for (unsigned g = 0; g < m->ngpus; g++) {
		for (unsigned i = 0; i < npci; i++) {
			hwloc_obj_t o = hw.get_obj_by_depth(topo, pdepth, i);
			char busid[16];

			busid_of(o, busid, sizeof(busid));
			if (!strcmp(busid, m->gpus[g].busid))
				gpu_objs[g] = o;
		}
	}

	/* A NIC is a PCI device with a network or RDMA OS device. */
	for (unsigned i = 0; i < nos; i++) {
		hwloc_obj_t o = hw.get_obj_by_depth(topo, odepth, i);
		hwloc_obj_t pci = o->parent;
		struct dt_nic *nic = NULL;
		unsigned n;

		if ((o->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK &&
		     o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS) ||
		    !pci || pci->type != HWLOC_OBJ_PCI_DEVICE || !o->name)
			continue;
		for (n = 0; n < m->nnics; n++)
			if (nic_objs[n] == pci)
				nic = &m->nics[n];
		if (!nic) {
			nic_objs[m->nnics] = pci;
			nic = &m->nics[m->nnics++];
			busid_of(pci, nic->busid, sizeof(nic->busid));
			nic->numa = numa_of(topo, pci);
			nic->kind = DT_NIC_ETHERNET;
			nic->port = 1;
		}
		if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
			/* RDMA devices go by their HCA name ("mlx5_0"). */
			nic->kind = DT_NIC_RDMA;
			snprintf(nic->name, sizeof(nic->name), "%s", o->name);
			nic->port = active_port(o);
		} else if (!nic->netdev[0] || !strncmp(o->name, "ib", 2)) {
			/* A VPI card has both: "ib0" names its RDMA port. */
			snprintf(nic->netdev, sizeof(nic->netdev), "%s",
				 o->name);
		}
	}
	for (unsigned n = 0; n < m->nnics; n++)
		if (m->nics[n].kind == DT_NIC_ETHERNET)
			snprintf(m->nics[n].name, sizeof(m->nics[n].name), "%s",
				 m->nics[n].netdev);
	m->gpu_nic_hops = calloc((size_t)m->ngpus * m->nnics + 1,
				 sizeof(*m->gpu_nic_hops));
	if (!m->gpu_nic_hops)
		goto nomem;
	for (unsigned g = 0; g < m->ngpus; g++)
		for (unsigned n = 0; n < m->nnics; n++)
			m->gpu_nic_hops[g * m->nnics + n] =
				hops(gpu_objs[g], nic_objs[n]);
	rc = 0;
	goto out;
nomem:
	dt_errf(err, errlen, "out of memory");
out:
	free(gpu_objs);
	free(nic_objs);
	return rc;
}

/* WHOLE: every core and PU of the node, whatever this process may use. */
static int load(const char *xml, const char *alloc_cores, bool whole,
		struct dt_machine *out, char *err, size_t errlen)
{
	hwloc_topology_t topo;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (load_hwloc(err, errlen) < 0)
		return -1;
	blacklist_gpu_plugins();
	if (hw.topology_init(&topo) < 0) {
		dt_errf(err, errlen, "hwloc cannot start: use "
			"--dist-train=bind=off, and report it to your "
			"administrator");
		return -1;
	}
	/* GPUs and NICs are I/O devices: hwloc skips those by default. */
	hw.topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	if (whole)
		hw.topology_set_flags(topo,
				      HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
	for (size_t i = 0; hw.topology_set_components &&
	     i < sizeof(skipped_components) / sizeof(skipped_components[0]); i++)
		hw.topology_set_components(topo,
					   HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
					   skipped_components[i]);
	if (xml && hw.topology_set_xml(topo, xml) < 0) {
		dt_errf(err, errlen, "cannot read the topology file %s: ask "
			"your administrator to fix topology= in plugstack.conf "
			"(an hwloc XML file of this node, from lstopo --of xml)",
			xml);
		goto out;
	}
	if (hw.topology_load(topo) < 0) {
		dt_errf(err, errlen, "hwloc cannot discover this node's "
			"topology: use --dist-train=bind=off, and ask your "
			"administrator to check lstopo on this node");
		goto out;
	}
	if (load_cores(topo, alloc_cores, whole, out, err, errlen) < 0 ||
	    load_devices(topo, xml == NULL, out, err, errlen) < 0)
		goto out;
	if (!xml)
		dt_machine_read_mig(out);
	rc = 0;
out:
	if (rc < 0)
		dt_machine_free(out);
	hw.topology_destroy(topo);
	return rc;
}

int dt_machine_load(const char *xml, const char *alloc_cores,
		    struct dt_machine *out, char *err, size_t errlen)
{
	return load(xml, alloc_cores, false, out, err, errlen);
}

int dt_machine_discover_whole(struct dt_machine *out, char *err,
			      size_t errlen)
{
	return load(NULL, NULL, true, out, err, errlen);
}

#else /* !HAVE_HWLOC */

static int no_hwloc(struct dt_machine *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	dt_errf(err, errlen, "this dist-train was built without hwloc (its "
		"headers were missing), so it cannot bind: use "
		"--dist-train=bind=off, or ask your administrator to rebuild "
		"it with libhwloc-dev");
	return -1;
}

int dt_machine_load(const char *xml, const char *alloc_cores,
		    struct dt_machine *out, char *err, size_t errlen)
{
	(void)xml, (void)alloc_cores;
	return no_hwloc(out, err, errlen);
}

int dt_machine_discover_whole(struct dt_machine *out, char *err,
			      size_t errlen)
{
	return no_hwloc(out, err, errlen);
}

#endif

void dt_machine_read_mig(struct dt_machine *m)
{
	for (unsigned g = 0; g < m->ngpus; g++) {
		char path[96];
		struct dirent *e;
		DIR *d;

		m->gpus[g].mig = 0;
		if (m->gpus[g].minor < 0)
			continue;
		snprintf(path, sizeof(path),
			 "/proc/driver/nvidia/capabilities/gpu%d/mig",
			 m->gpus[g].minor);
		d = opendir(path);
		if (!d)
			continue;
		while ((e = readdir(d)) != NULL)
			if (!strncmp(e->d_name, "gi", 2) && e->d_name[2] >= '0' &&
			    e->d_name[2] <= '9')
				m->gpus[g].mig++;
		closedir(d);
	}
}
