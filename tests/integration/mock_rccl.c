/*
 * A stand-in for RCCL (librccl), for the tests of --dist-train=check on
 * AMD nodes (tests/integration/helper.sh). It speaks NCCL's API as RCCL
 * does but talks to no other rank: an all-reduce of a float multiplies it
 * by the communicator's size, which is what every rank giving 1.0 sums
 * to. What the tests check is which library the helper loads and how it
 * drives it; the collective itself is RCCL's to test.
 */
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } mock_unique_id;

int ncclGetUniqueId(mock_unique_id *id);
int ncclCommInitRank(void **comm, int nranks, mock_unique_id id, int rank);
int ncclAllReduce(const void *send, void *recv, size_t count, int type,
		  int op, void *comm, void *stream);
int ncclCommDestroy(void *comm);
const char *ncclGetErrorString(int result);
int ncclGetVersion(int *version);

/* ncclInvalidArgument, ncclSystemError */
enum { MOCK_INVALID = 4, MOCK_SYSTEM = 2 };

int ncclGetUniqueId(mock_unique_id *id)
{
	memset(id, 0, sizeof(*id));
	return 0;
}

int ncclCommInitRank(void **comm, int nranks, mock_unique_id id, int rank)
{
	int *size;

	(void)id;
	if (nranks < 1 || rank < 0 || rank >= nranks)
		return MOCK_INVALID;
	size = malloc(sizeof(*size));
	if (!size)
		return MOCK_SYSTEM;
	*size = nranks;
	*comm = size;
	return 0;
}

int ncclAllReduce(const void *send, void *recv, size_t count, int type,
		  int op, void *comm, void *stream)
{
	(void)stream;
	/* ncclFloat32, ncclSum */
	if (type != 7 || op != 0 || !comm)
		return MOCK_INVALID;
	for (size_t i = 0; i < count; i++)
		((float *)recv)[i] = ((const float *)send)[i] *
				     (float)*(int *)comm;
	return 0;
}

int ncclCommDestroy(void *comm)
{
	free(comm);
	return 0;
}

const char *ncclGetErrorString(int result)
{
	return result ? "mock error" : "no error";
}

int ncclGetVersion(int *version)
{
	*version = 22203;	/* as RCCL 2.22.3 says it */
	return 0;
}
