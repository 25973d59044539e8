#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nccl_check.h"
#include "../common/gpu_vendor.h"
#include "../common/nccl_path.h"
#include "../common/topology.h"

/* The few runtime and NCCL types and calls used, declared here so that
 * neither is needed to build. Values from nccl.h, which RCCL keeps. A
 * device pointer is 64 bits on every vendor (CUdeviceptr, void *). */
typedef int gpu_result;
typedef void *gpu_context;
typedef void *gpu_stream;
typedef unsigned long long gpu_ptr;
typedef int nccl_result;
typedef void *nccl_comm;
typedef struct { char internal[128]; } nccl_unique_id;
enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0 };

/* The vendor table's runtime entry points, once found. */
struct runtime_api {
	gpu_result (*init)(unsigned);
	gpu_result (*device_count)(int *);
	gpu_result (*set_device)(int);
	gpu_result (*device_get)(int *, int);
	gpu_result (*ctx_retain)(gpu_context *, int);
	gpu_result (*ctx_release)(int);
	gpu_result (*ctx_set)(gpu_context);
	gpu_result (*mem_alloc)(gpu_ptr *, size_t);
	gpu_result (*mem_free)(gpu_ptr);
	gpu_result (*htod)(gpu_ptr, const void *, size_t);
	gpu_result (*dtoh)(void *, gpu_ptr, size_t);
	gpu_result (*stream_create)(gpu_stream *, unsigned);
	gpu_result (*stream_sync)(gpu_stream);
	gpu_result (*stream_destroy)(gpu_stream);
};

struct nccl_api {
	nccl_result (*get_unique_id)(nccl_unique_id *);
	nccl_result (*comm_init_rank)(nccl_comm *, int, nccl_unique_id, int);
	nccl_result (*all_reduce)(const void *, void *, size_t, int, int,
				  nccl_comm, gpu_stream);
	nccl_result (*comm_destroy)(nccl_comm);
	const char *(*error_string)(nccl_result);
	nccl_result (*get_version)(int *);
};

/* Local: every call is looked up in its own library's handle, so that
 * one vendor's NCCL, loaded and found wanting, cannot stand in for the
 * next one's (both define NCCL's names). A library that loads another by
 * name still finds it loaded. */
#define DLOPEN_FLAGS (RTLD_NOW | RTLD_LOCAL)

static struct runtime_api gpu;
static struct nccl_api nccl;
/* The vendor whose runtime and collective library were loaded. */
static const struct dt_gpu_vendor *vendor;
/* The program the check runs for (nccl_set_program), and which library
 * was loaded: "libnccl VERSION from PATH". */
static const char *program;
static char described[DT_NCCL_PATH_MAX + 64];

void nccl_set_program(const char *path)
{
	program = path;
}

/* PROGRAM's absolute path: as given, or found on PATH, in BUF. */
static bool find_program(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH"), *p;
	char cwd[PATH_MAX];

	if (strchr(name, '/')) {
		if (name[0] == '/')
			return snprintf(buf, len, "%s", name) < (int)len;
		return getcwd(cwd, sizeof(cwd)) &&
		       snprintf(buf, len, "%s/%s", cwd, name) < (int)len;
	}
	for (p = path ? path : ""; *p;) {
		size_t n = strcspn(p, ":");

		if (n && p[0] == '/' &&
		    snprintf(buf, len, "%.*s/%s", (int)n, p, name) < (int)len &&
		    access(buf, X_OK) == 0)
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}

/*
 * The Python interpreter that runs PROGRAM, into BUF: PROGRAM itself, or
 * the one its "#!" line names (torchrun and other Python scripts).
 */
static bool python_of(const char *name, char *buf, size_t len)
{
	char path[PATH_MAX], line[256], *end;
	FILE *f;

	if (!find_program(name, path, sizeof(path)))
		return false;
	if (dt_is_python(path))
		return snprintf(buf, len, "%s", path) < (int)len;
	f = fopen(path, "re");
	if (!f)
		return false;
	end = fgets(line, sizeof(line), f);
	fclose(f);
	if (!end || strncmp(line, "#!", 2))
		return false;
	end = line + 2;
	end[strcspn(end, " \t\r\n")] = '\0';
	if (!strcmp(end, "/usr/bin/env")) {
		char *word = end + strlen(end) + 1;

		word += strspn(word, " \t");
		word[strcspn(word, " \t\r\n")] = '\0';
		return dt_is_python(word) && find_program(word, buf, len);
	}
	return dt_is_python(end) && end[0] == '/' &&
	       snprintf(buf, len, "%s", end) < (int)len;
}

/*
 * V's collective library as a Python program loads it: the one of its own
 * environment (common/nccl_path.h), by absolute path only; else the
 * system's.
 */
static void *open_collective(const struct dt_gpu_vendor *v)
{
	char cand[DT_NCCL_CANDIDATES_MAX][DT_NCCL_PATH_MAX];
	char interp[PATH_MAX] = "", real[PATH_MAX] = "";
	const char *name = program ? program : getenv("DIST_TRAIN_PROGRAM");
	bool python = name && *name && python_of(name, interp, sizeof(interp));
	void *lib = NULL;
	int n = 0;

	if (python && !realpath(interp, real))
		real[0] = '\0';
	/* A program we know is not Python brings no environment of its
	 * own; one we do not know may (an activated environment). */
	if (python || !name || !*name)
		n = dt_nccl_candidates(v->collective.pip_path,
				       python ? interp : NULL,
				       python ? real : NULL,
				       getenv("VIRTUAL_ENV"),
				       getenv("CONDA_PREFIX"), cand,
				       DT_NCCL_CANDIDATES_MAX);
	for (int i = 0; i < n && !lib; i++) {
		glob_t g;

		if (glob(cand[i], 0, NULL, &g) != 0)
			continue;
		for (size_t j = 0; j < g.gl_pathc && !lib; j++)
			if (g.gl_pathv[j][0] == '/')
				lib = dlopen(g.gl_pathv[j], DLOPEN_FLAGS);
		globfree(&g);
	}
	for (int i = 0; !lib && i < DT_GPU_LIBS && v->collective.libs[i]; i++)
		lib = dlopen(v->collective.libs[i], DLOPEN_FLAGS);
	return lib;
}

/* "libnccl VERSION from PATH", once the library is loaded. */
static void describe_collective(void)
{
	const char *label = vendor->collective.label;
	Dl_info info;
	int v = 0;

	memset(&info, 0, sizeof(info));
	if (!dladdr(*(void **)&nccl.get_unique_id, &info) || !info.dli_fname)
		info.dli_fname = "an unknown path";
	if (nccl.get_version && nccl.get_version(&v) == 0 && v > 0)
		snprintf(described, sizeof(described), "%s %d.%d.%d from %s",
			 label, v >= 10000 ? v / 10000 : v / 1000,
			 v >= 10000 ? v / 100 % 100 : v / 100 % 10, v % 100,
			 info.dli_fname);
	else
		snprintf(described, sizeof(described), "%s (version unknown) "
			 "from %s", label, info.dli_fname);
}

const char *nccl_describe(void)
{
	return described[0] ? described : NULL;
}

/* The file LIB was loaded from, for messages. */
static const char *library_path(void *lib)
{
	struct link_map *map = NULL;

	return dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map &&
	       map->l_name && *map->l_name ? map->l_name : "its library";
}

/* Each entry point named in the vendor table, from LIB into FIELD. */
struct wanted {
	const char *name;
	void **field;
};

static bool find_all(void *lib, const char *what, const struct wanted *w,
		     size_t n, char *why, size_t len)
{
	for (size_t i = 0; i < n; i++) {
		*w[i].field = NULL;
		if (w[i].name && !(*w[i].field = dlsym(lib, w[i].name))) {
			snprintf(why, len, "the %s (%s) lacks %s: ask your "
				 "administrator to update it", what,
				 library_path(lib), w[i].name);
			return false;
		}
	}
	return true;
}

static bool find_calls(const struct dt_gpu_vendor *v, void *rt, void *coll,
		       char *why, size_t len)
{
	const struct dt_gpu_runtime *r = &v->runtime;
	const struct wanted runtime[] = {
		{ r->init, (void **)&gpu.init },
		{ r->device_count, (void **)&gpu.device_count },
		{ r->set_device, (void **)&gpu.set_device },
		{ r->device_get, (void **)&gpu.device_get },
		{ r->ctx_retain, (void **)&gpu.ctx_retain },
		{ r->ctx_release, (void **)&gpu.ctx_release },
		{ r->ctx_set, (void **)&gpu.ctx_set },
		{ r->mem_alloc, (void **)&gpu.mem_alloc },
		{ r->mem_free, (void **)&gpu.mem_free },
		{ r->htod, (void **)&gpu.htod },
		{ r->dtoh, (void **)&gpu.dtoh },
		{ r->stream_create, (void **)&gpu.stream_create },
		{ r->stream_sync, (void **)&gpu.stream_sync },
		{ r->stream_destroy, (void **)&gpu.stream_destroy },
	};
	/* NCCL's API, which RCCL keeps. */
	const struct wanted collective[] = {
		{ "ncclGetUniqueId", (void **)&nccl.get_unique_id },
		{ "ncclCommInitRank", (void **)&nccl.comm_init_rank },
		{ "ncclAllReduce", (void **)&nccl.all_reduce },
		{ "ncclCommDestroy", (void **)&nccl.comm_destroy },
		{ "ncclGetErrorString", (void **)&nccl.error_string },
	};

	if (!find_all(rt, r->name, runtime, sizeof(runtime) /
		      sizeof(runtime[0]), why, len) ||
	    !find_all(coll, v->collective.name, collective,
		      sizeof(collective) / sizeof(collective[0]), why, len))
		return false;
	/* Optional: older libraries lack it, and the check still runs. */
	*(void **)&nccl.get_version = dlsym(coll, "ncclGetVersion");
	return true;
}

/*
 * Loads vendor V's collective library and runtime and asks for its GPUs:
 * true where this task sees at least one, else false with WHY.
 */
static bool try_vendor(const struct dt_gpu_vendor *v, char *why, size_t len)
{
	void *coll = open_collective(v), *rt = NULL;
	int n = 0;

	/* The runtime the collective library brought where it did
	 * (PyTorch's ROCm wheels bundle HIP beside RCCL), so that the two
	 * match; else the system's. */
	if (coll && dlsym(coll, v->runtime.init))
		rt = coll;
	for (int i = 0; !rt && i < DT_GPU_LIBS && v->runtime.libs[i]; i++)
		rt = dlopen(v->runtime.libs[i], DLOPEN_FLAGS);
	if (!rt && access(v->runtime.device_node, F_OK) == 0)
		/* The vendor's driver is loaded: a GPU node without it. */
		snprintf(why, len, "no %s (%s) on this %s GPU node: ask your "
			 "administrator to install %s", v->runtime.name,
			 v->runtime.libs[0], v->name, v->runtime.install);
	else if (!rt)
		snprintf(why, len, "no %s (%s): run the step on GPU nodes, or "
			 "ask your administrator to install %s",
			 v->runtime.name, v->runtime.libs[0],
			 v->runtime.install);
	else if (!coll)
		snprintf(why, len, "no %s library (%s, here or in the "
			 "program's Python environment): install %s",
			 v->collective.name, v->collective.libs[0],
			 v->collective.install);
	else if (find_calls(v, rt, coll, why, len)) {
		if (gpu.init(0) == 0 && gpu.device_count(&n) == 0 && n > 0) {
			vendor = v;
			return true;
		}
		snprintf(why, len, "no GPU visible: request GPUs (such as "
			 "--gpus-per-node), and leave %s to Slurm", v->visible);
	}
	return false;
}

/*
 * The vendor whose GPUs this node has: those whose driver's device node
 * is here first, then the others (a node may hide its device nodes from a
 * container), in the table's order. Where none fits, WHY is the first
 * one's reason.
 */
static bool load(char *why, size_t len)
{
	int order[DT_GPU_VENDORS], n = 0;
	char other[512];

	if (vendor)
		return true;
	for (int pass = 0; pass < 2; pass++)
		for (int v = 0; v < DT_GPU_VENDORS; v++)
			if ((access(dt_gpu_vendors[v].runtime.device_node,
				    F_OK) == 0) == (pass == 0))
				order[n++] = v;
	for (int i = 0; i < n; i++)
		if (try_vendor(&dt_gpu_vendors[order[i]], i ? other : why,
			       i ? sizeof(other) : len)) {
			describe_collective();
			return true;
		}
	return false;
}

/*
 * The step's GPUs on this node: Slurm's list where it gave one (a task
 * Slurm bound to one GPU sees only that one), else those the runtime
 * sees.
 */
static int step_gpus_here(int visible)
{
	const char *listed = getenv("SLURM_STEP_GPUS");
	unsigned *ids = NULL;
	int n = listed && *listed ? dt_intlist_parse(listed, 65535, &ids) : -1;

	free(ids);
	return n > 0 ? n : visible;
}

bool nccl_usable(uint32_t local_size, char *why, size_t len)
{
	int n = 0;

	if (!load(why, len))
		return false;
	gpu.device_count(&n);
	/* NCCL fails such a communicator with a bare "invalid usage". */
	n = step_gpus_here(n);
	if (local_size > (uint32_t)n) {
		snprintf(why, len, "%u ranks on this node share %d GPU%s, "
			 "and %s refuses two ranks of one communicator on "
			 "one GPU: run at most %d task%s per node to have %s "
			 "checked", local_size, n, n == 1 ? "" : "s",
			 vendor->collective.name, n, n == 1 ? "" : "s",
			 vendor->collective.name);
		return false;
	}
	return true;
}

const char *nccl_collective_name(void)
{
	return vendor ? vendor->collective.name : "NCCL";
}

/*
 * The ordinal of this task's GPU among those it sees: the plugin's
 * DIST_TRAIN_GPU_ORDINAL where it names one, else LOCAL_RANK's turn.
 */
static int gpu_ordinal(uint32_t local_rank, int visible)
{
	const char *set = getenv("DIST_TRAIN_GPU_ORDINAL");
	char *end;
	long ord;

	if (set && *set) {
		errno = 0;
		ord = strtol(set, &end, 10);
		if (!errno && !*end && ord >= 0 && ord < visible)
			return (int)ord;
	}
	return (int)(local_rank % (uint32_t)visible);
}

/* Makes GPU ORD current: a primary context where the runtime needs one. */
static gpu_result select_gpu(int ord, int *dev, gpu_context *ctx)
{
	gpu_result r;

	if (gpu.set_device)
		return gpu.set_device(ord);
	r = gpu.device_get(dev, ord);
	if (!r)
		r = gpu.ctx_retain(ctx, *dev);
	if (!r)
		r = gpu.ctx_set(*ctx);
	return r;
}

int nccl_allreduce_check(uint32_t world, uint32_t rank, uint32_t local_rank,
			 uint32_t local_size, const char *host, char *err,
			 size_t errlen)
{
	const char *name;
	nccl_unique_id id;
	nccl_comm comm = NULL;
	gpu_context ctx = NULL;
	gpu_stream stream = NULL;
	gpu_ptr buf = 0;
	float one = 1.0f, sum = 0.0f;
	nccl_result nr;
	int ndev = 0, dev = 0, ord, rc = -1;

	if (!nccl_usable(local_size, err, errlen))
		return -1;
	name = vendor->collective.name;
	gpu.device_count(&ndev);
	ord = gpu_ordinal(local_rank, ndev);
	if (select_gpu(ord, &dev, &ctx) || gpu.stream_create(&stream, 0) ||
	    gpu.mem_alloc(&buf, 4) || gpu.htod(buf, &one, 4)) {
		snprintf(err, errlen, "rank %u on %s cannot prepare GPU %d for "
			 "the %s check: check that GPU with %s, or rerun "
			 "without --dist-train=check", rank, host, ord, name,
			 vendor->runtime.tool);
		goto out;
	}
	/* With NCCL_COMM_ID set, every rank gets the same id. */
	nr = nccl.get_unique_id(&id);
	if (!nr)
		nr = nccl.comm_init_rank(&comm, (int)world, id, (int)rank);
	if (!nr)
		nr = nccl.all_reduce((void *)buf, (void *)buf, 1, NCCL_FLOAT32,
				     NCCL_SUM, comm, stream);
	/* NCCL_DEBUG: RCCL reads NCCL's variables. */
	if (nr) {
		snprintf(err, errlen, "%s all-reduce failed on rank %u (%s): "
			 "%s, with %s; rerun with NCCL_DEBUG=INFO to see why",
			 name, rank, host, nccl.error_string(nr), described);
		goto out;
	}
	if (gpu.stream_sync(stream) || gpu.dtoh(&sum, buf, 4)) {
		snprintf(err, errlen, "%s all-reduce did not complete on rank "
			 "%u (%s), with %s: rerun with NCCL_DEBUG=INFO to see "
			 "why", name, rank, host, described);
		goto out;
	}
	if (sum != (float)world) {
		snprintf(err, errlen, "%s all-reduce gave %g on rank %u (%s), "
			 "expected %u, with %s: rerun with NCCL_DEBUG=INFO to "
			 "see why", name, (double)sum, rank, host, world,
			 described);
		goto out;
	}
	rc = 0;
out:
	if (comm)
		nccl.comm_destroy(comm);
	if (buf)
		gpu.mem_free(buf);
	if (stream)
		gpu.stream_destroy(stream);
	if (ctx && gpu.ctx_release)
		gpu.ctx_release(dev);
	return rc;
}
