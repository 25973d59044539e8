#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_check.h"
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
};

static struct cuda_api cuda;
static struct nccl_api nccl;
static bool loaded;

#define SYM(lib, field, name)                                            \
	do {                                                             \
		*(void **)(&(field)) = dlsym(lib, name);                 \
		if (!(field)) {                                          \
			snprintf(why, len, "%s lacks %s", #lib, name);   \
			return false;                                    \
		}                                                        \
	} while (0)

static bool load(char *why, size_t len)
{
	void *libcuda, *libnccl;

	if (loaded)
		return true;
	libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!libcuda) {
		snprintf(why, len, "no CUDA driver (libcuda.so.1)");
		return false;
	}
	libnccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
	if (!libnccl) {
		snprintf(why, len, "no NCCL library (libnccl.so.2)");
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
		snprintf(why, len, "no GPU visible");
		return false;
	}
	/* NCCL fails such a communicator with a bare "invalid usage". */
	n = step_gpus_here(n);
	if (local_size > (uint32_t)n) {
		snprintf(why, len, "%u ranks on this node share %d GPU%s, "
			 "and NCCL refuses two ranks of one communicator on "
			 "one GPU", local_size, n, n == 1 ? "" : "s");
		return false;
	}
	return true;
}

int nccl_allreduce_check(uint32_t world, uint32_t rank, uint32_t local_rank,
			 uint32_t local_size, char *err, size_t errlen)
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
		snprintf(err, errlen, "cannot prepare GPU %u for the NCCL check",
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
		snprintf(err, errlen, "NCCL all-reduce failed: %s",
			 nccl.error_string(nr));
		goto out;
	}
	if (cuda.stream_sync(stream) || cuda.dtoh(&sum, buf, 4)) {
		snprintf(err, errlen, "NCCL all-reduce did not complete");
		goto out;
	}
	if (sum != (float)world) {
		snprintf(err, errlen, "NCCL all-reduce gave %g, expected %u",
			 (double)sum, world);
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
