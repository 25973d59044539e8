/*
 * A plain NCCL program, no MPI: it builds its world communicator from the
 * environment alone.
 *
 *   srun -N2 --ntasks-per-node=8 --mpi=pmix --dist-train=nccl ./nccl_allreduce
 *
 * --dist-train=nccl sets NCCL_COMM_ID to rank 0's address and a free port,
 * so ncclGetUniqueId() returns the same id in every process and
 * ncclCommInitRank(WORLD_SIZE, id, RANK) needs nothing else.
 *
 * NCCL_COMM_ID fixes one bootstrap root: it gives one world communicator.
 * Derive the others from it with ncclCommSplit() rather than new ids.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include <nccl.h>

#define COUNT (1 << 20)

#define CHECK_CUDA(call)                                                   \
	do {                                                               \
		cudaError_t e_ = (call);                                   \
		if (e_ != cudaSuccess) {                                   \
			fprintf(stderr, "%s: %s\n", #call,                 \
				cudaGetErrorString(e_));                   \
			exit(1);                                           \
		}                                                          \
	} while (0)

#define CHECK_NCCL(call)                                                   \
	do {                                                               \
		ncclResult_t r_ = (call);                                  \
		if (r_ != ncclSuccess) {                                   \
			fprintf(stderr, "%s: %s\n", #call,                 \
				ncclGetErrorString(r_));                   \
			exit(1);                                           \
		}                                                          \
	} while (0)

static int env_int(const char *name)
{
	const char *v = getenv(name);

	if (!v) {
		fprintf(stderr, "%s is not set: run under srun --dist-train=nccl\n",
			name);
		exit(2);
	}
	return atoi(v);
}

int main(void)
{
	int rank = env_int("RANK"), world = env_int("WORLD_SIZE");
	int local_rank = env_int("LOCAL_RANK"), ndev = 0;
	float *host, *dev;
	double expect = 0;
	ncclUniqueId id;
	ncclComm_t comm;
	cudaStream_t stream;

	if (!getenv("NCCL_COMM_ID")) {
		fprintf(stderr, "NCCL_COMM_ID is not set: run under "
			"srun --dist-train=nccl\n");
		return 2;
	}
	CHECK_CUDA(cudaGetDeviceCount(&ndev));
	CHECK_CUDA(cudaSetDevice(local_rank % ndev));
	CHECK_CUDA(cudaStreamCreate(&stream));

	/* The same id everywhere, thanks to NCCL_COMM_ID. */
	CHECK_NCCL(ncclGetUniqueId(&id));
	CHECK_NCCL(ncclCommInitRank(&comm, world, id, rank));

	host = malloc(COUNT * sizeof(float));
	if (!host)
		return 1;
	for (int i = 0; i < COUNT; i++)
		host[i] = (float)(rank + 1);
	CHECK_CUDA(cudaMalloc((void **)&dev, COUNT * sizeof(float)));
	CHECK_CUDA(cudaMemcpy(dev, host, COUNT * sizeof(float),
			      cudaMemcpyHostToDevice));
	CHECK_NCCL(ncclAllReduce(dev, dev, COUNT, ncclFloat, ncclSum, comm,
				 stream));
	CHECK_CUDA(cudaStreamSynchronize(stream));
	CHECK_CUDA(cudaMemcpy(host, dev, COUNT * sizeof(float),
			      cudaMemcpyDeviceToHost));

	for (int r = 1; r <= world; r++)
		expect += r;
	for (int i = 0; i < COUNT; i++) {
		if (host[i] != (float)expect) {
			fprintf(stderr, "rank %d: element %d is %g, expected "
				"%g\n", rank, i, (double)host[i], expect);
			return 1;
		}
	}
	printf("rank %d/%d (GPU %d): all-reduce of %d floats ok, sum %g\n",
	       rank, world, local_rank % ndev, COUNT, expect);

	CHECK_NCCL(ncclCommDestroy(comm));
	CHECK_CUDA(cudaFree(dev));
	free(host);
	return 0;
}
