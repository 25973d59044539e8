/*
 * A PMIx client like an MPI library: started after dist-train's bootstrap
 * in the same task, it must still see its own rank, local rank, node id,
 * and rank 0's host. Prints them next to Slurm's view.
 */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int get_u32(const pmix_proc_t *p, const char *key, unsigned *out)
{
	pmix_value_t *v = NULL;

	if (PMIx_Get(p, key, NULL, 0, &v) != PMIX_SUCCESS)
		return -1;
	*out = v->type == PMIX_UINT16 ? v->data.uint16 : v->data.uint32;
	PMIX_VALUE_RELEASE(v);
	return 0;
}

int main(void)
{
	pmix_proc_t me, p;
	pmix_value_t *v = NULL;
	unsigned lrank = 99, nodeid = 99;
	char host0[256] = "NOT-FOUND";

	if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) {
		printf("PEER init-failed\n");
		return 1;
	}
	get_u32(&me, PMIX_LOCAL_RANK, &lrank);
	get_u32(&me, PMIX_NODEID, &nodeid);
	p = me;
	p.rank = 0;
	if (PMIx_Get(&p, PMIX_HOSTNAME, NULL, 0, &v) == PMIX_SUCCESS) {
		snprintf(host0, sizeof(host0), "%s", v->data.string);
		PMIX_VALUE_RELEASE(v);
	}
	printf("PEER rank=%u/%s lrank=%u/%s nodeid=%u/%s host0=%s\n", me.rank,
	       getenv("SLURM_PROCID"), lrank, getenv("SLURM_LOCALID"), nodeid,
	       getenv("SLURM_NODEID"), host0);
	PMIx_Finalize(NULL, 0);
	return 0;
}
