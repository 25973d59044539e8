#include "config.h"

#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nccl_check.h"
#include "../common/nccl_path.h"
#include "../common/topology.h"

/* The few CUDA driver and NCCL types and calls used, declared here so
 * that neither is needed to build. Values from cuda.h and nccl.h. */
typedef int cu_result;
typedef int cu_device;
typedef void *cu_context;
typedef void *cu_stream;
typedef unsigned long long cu_ptr;
typedef int nccl_result;
typedef void *nccl_comm;
typedef struct { char internal[128]; } nccl_unique_id;
enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0 };

struct cuda_api {
	cu_result (*init)(unsigned);
	cu_result (*device_count)(int *);
	cu_result (*device_get)(cu_device *, int);
	cu_result (*ctx_retain)(cu_context *, cu_device);
	cu_result (*ctx_release)(cu_device);
	cu_result (*ctx_set)(cu_context);
	cu_result (*mem_alloc)(cu_ptr *, size_t);
	cu_result (*mem_free)(cu_ptr);
	cu_result (*htod)(cu_ptr, const void *, size_t);
	cu_result (*dtoh)(void *, cu_ptr, size_t);
	cu_result (*stream_create)(cu_stream *, unsigned);
	cu_result (*stream_sync)(cu_stream);
	cu_result (*stream_destroy)(cu_stream);
};

struct nccl_api {
	nccl_result (*get_unique_id)(nccl_unique_id *);
	nccl_result (*comm_init_rank)(nccl_comm *, int, nccl_unique_id, int);
	nccl_result (*all_reduce)(const void *, void *, size_t, int, int,
				  nccl_comm, cu_stream);
	nccl_result (*comm_destroy)(nccl_comm);
	const char *(*error_string)(nccl_result);
	nccl_result (*get_version)(int *);
};

static struct cuda_api cuda;
static struct nccl_api nccl;
static bool loaded;
/* The program the check runs for (nccl_set_program), and which libnccl
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
 * The NCCL a Python program loads: the one of its own environment
 * (common/nccl_path.h), by absolute path only; else the system's.
 */
static void *open_nccl(void)
{
	char cand[DT_NCCL_CANDIDATES_MAX][DT_NCCL_PATH_MAX];
	char interp[PATH_MAX] = "", real[PATH_MAX] = "";
	const char *name = program ? program : getenv("DIST_TRAIN_PROGRAM");
	bool python = name && *name && python_of(name, interp, sizeof(interp));
	int n = 0;

	if (python && !realpath(interp, real))
		real[0] = '\0';
	/* A program we know is not Python brings no environment of its
	 * own; one we do not know may (an activated environment). */
	if (python || !name || !*name)
		n = dt_nccl_candidates(python ? interp : NULL,
				       python ? real : NULL,
				       getenv("VIRTUAL_ENV"),
				       getenv("CONDA_PREFIX"), cand,
				       DT_NCCL_CANDIDATES_MAX);
	for (int i = 0; i < n; i++) {
		glob_t g;
		void *lib = NULL;

		if (glob(cand[i], 0, NULL, &g) != 0)
			continue;
		for (size_t j = 0; j < g.gl_pathc && !lib; j++)
			if (g.gl_pathv[j][0] == '/')
				lib = dlopen(g.gl_pathv[j],
					     RTLD_NOW | RTLD_GLOBAL);
		globfree(&g);
		if (lib)
			return lib;
	}
	return dlopen(DT_NCCL_SONAME, RTLD_NOW | RTLD_GLOBAL);
}

/* "libnccl VERSION from PATH", once NCCL is loaded. */
static void describe_nccl(void)
{
	Dl_info info;
	int v = 0;

	memset(&info, 0, sizeof(info));
	if (!dladdr(*(void **)&nccl.get_unique_id, &info) || !info.dli_fname)
		info.dli_fname = DT_NCCL_SONAME;
	if (nccl.get_version && nccl.get_version(&v) == 0 && v > 0)
		snprintf(described, sizeof(described),
			 "libnccl %d.%d.%d from %s",
			 v >= 10000 ? v / 10000 : v / 1000,
			 v >= 10000 ? v / 100 % 100 : v / 100 % 10, v % 100,
			 info.dli_fname);
	else
		snprintf(described, sizeof(described), "libnccl (version "
			 "unknown) from %s", info.dli_fname);
}

const char *nccl_describe(void)
{
	return described[0] ? described : NULL;
}

#define SYM(lib, field, name)                                            \
	do {                                                             \
		*(void **)(&(field)) = dlsym(lib, name);                 \
		if (!(field)) {                                          \
			snprintf(why, len, "%s lacks %s: ask your "      \
				 "administrator to update it", #lib,     \
				 name);                                  \
			return false;                                    \
		}                                                        \
	} while (0)

static bool load(char *why, size_t len)
{
	void *libcuda, *libnccl;

	if (loaded)
		return true;
	libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!libcuda && access("/dev/kfd", F_OK) == 0) {
		/* An AMD node: RCCL is NCCL's API over HIP, not CUDA. */
		snprintf(why, len, "this node's GPUs are AMD's (/dev/kfd), "
			 "and the GPU all-reduce is checked with CUDA and NCCL "
			 "only, not yet RCCL: the rendezvous was checked, "
			 "run an RCCL test (rccl-tests) for the GPUs");
		return false;
	}
	if (!libcuda) {
		snprintf(why, len, "no CUDA driver (libcuda.so.1): run the "
			 "step on GPU nodes, or ask your administrator to "
			 "install the NVIDIA driver");
		return false;
	}
	libnccl = open_nccl();
	if (!libnccl) {
		snprintf(why, len, "no NCCL library (libnccl.so.2, here or in "
			 "the program's Python environment): install PyTorch "
			 "with its NCCL (pip install torch), or NCCL itself");
		return false;
	}
	SYM(libcuda, cuda.init, "cuInit");
	SYM(libcuda, cuda.device_count, "cuDeviceGetCount");
	SYM(libcuda, cuda.device_get, "cuDeviceGet");
	SYM(libcuda, cuda.ctx_retain, "cuDevicePrimaryCtxRetain");
	SYM(libcuda, cuda.ctx_release, "cuDevicePrimaryCtxRelease_v2");
	SYM(libcuda, cuda.ctx_set, "cuCtxSetCurrent");
	SYM(libcuda, cuda.mem_alloc, "cuMemAlloc_v2");
	SYM(libcuda, cuda.mem_free, "cuMemFree_v2");
	SYM(libcuda, cuda.htod, "cuMemcpyHtoD_v2");
	SYM(libcuda, cuda.dtoh, "cuMemcpyDtoH_v2");
	SYM(libcuda, cuda.stream_create, "cuStreamCreate");
	SYM(libcuda, cuda.stream_sync, "cuStreamSynchronize");
	SYM(libcuda, cuda.stream_destroy, "cuStreamDestroy_v2");
	SYM(libnccl, nccl.get_unique_id, "ncclGetUniqueId");
	SYM(libnccl, nccl.comm_init_rank, "ncclCommInitRank");
	SYM(libnccl, nccl.all_reduce, "ncclAllReduce");
	SYM(libnccl, nccl.comm_destroy, "ncclCommDestroy");
	SYM(libnccl, nccl.error_string, "ncclGetErrorString");
	*(void **)(&nccl.get_version) = dlsym(libnccl, "ncclGetVersion");
	describe_nccl();
	loaded = true;
	return true;
}

/*
 * The step's GPUs on this node: Slurm's list where it gave one (a task
 * Slurm bound to one GPU sees only that one), else those CUDA sees.
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
	if (cuda.init(0) != 0 || cuda.device_count(&n) != 0 || n < 1) {
		snprintf(why, len, "no GPU visible: request GPUs (such as "
			 "--gpus-per-node), and leave CUDA_VISIBLE_DEVICES to "
			 "Slurm");
		return false;
	}
	/* NCCL fails such a communicator with a bare "invalid usage". */
	n = step_gpus_here(n);
	if (local_size > (uint32_t)n) {
		snprintf(why, len, "%u ranks on this node share %d GPU%s, "
			 "and NCCL refuses two ranks of one communicator on "
			 "one GPU: run at most %d task%s per node to have NCCL "
			 "checked", local_size, n, n == 1 ? "" : "s", n,
			 n == 1 ? "" : "s");
		return false;
	}
	return true;
}

int nccl_allreduce_check(uint32_t world, uint32_t rank, uint32_t local_rank,
			 uint32_t local_size, const char *host, char *err,
			 size_t errlen)
{
	nccl_unique_id id;
	nccl_comm comm = NULL;
	cu_context ctx = NULL;
	cu_stream stream = NULL;
	cu_device dev;
	cu_ptr buf = 0;
	float one = 1.0f, sum = 0.0f;
	nccl_result nr;
	int ndev = 0, rc = -1;

	if (!nccl_usable(local_size, err, errlen))
		return -1;
	cuda.device_count(&ndev);
	if (cuda.device_get(&dev, (int)(local_rank % (uint32_t)ndev)) ||
	    cuda.ctx_retain(&ctx, dev) || cuda.ctx_set(ctx) ||
	    cuda.stream_create(&stream, 0) || cuda.mem_alloc(&buf, 4) ||
	    cuda.htod(buf, &one, 4)) {
		snprintf(err, errlen, "rank %u on %s cannot prepare GPU %u for "
			 "the NCCL check: check that GPU with nvidia-smi, or "
			 "rerun without --dist-train=check", rank, host,
			 local_rank % (uint32_t)ndev);
		goto out;
	}
	/* With NCCL_COMM_ID set, every rank gets the same id. */
	nr = nccl.get_unique_id(&id);
	if (!nr)
		nr = nccl.comm_init_rank(&comm, (int)world, id, (int)rank);
	if (!nr)
		nr = nccl.all_reduce((void *)buf, (void *)buf, 1, NCCL_FLOAT32,
				     NCCL_SUM, comm, stream);
	if (nr) {
		snprintf(err, errlen, "NCCL all-reduce failed on rank %u (%s): "
			 "%s, with %s; rerun with NCCL_DEBUG=INFO to see why",
			 rank, host, nccl.error_string(nr), described);
		goto out;
	}
	if (cuda.stream_sync(stream) || cuda.dtoh(&sum, buf, 4)) {
		snprintf(err, errlen, "NCCL all-reduce did not complete on rank "
			 "%u (%s), with %s: rerun with NCCL_DEBUG=INFO to see "
			 "why", rank, host, described);
		goto out;
	}
	if (sum != (float)world) {
		snprintf(err, errlen, "NCCL all-reduce gave %g on rank %u (%s), "
			 "expected %u, with %s: rerun with NCCL_DEBUG=INFO to "
			 "see why", (double)sum, rank, host, world, described);
		goto out;
	}
	rc = 0;
out:
	if (comm)
		nccl.comm_destroy(comm);
	if (buf)
		cuda.mem_free(buf);
	if (stream)
		cuda.stream_destroy(stream);
	if (ctx)
		cuda.ctx_release(dev);
	return rc;
}
