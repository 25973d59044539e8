/*
 * The helper as a PMIx client. libpmix is loaded at run time, so that the
 * helper runs on nodes without it and says so when PMIx is asked for.
 *
 * Waits are bounded by the caller's timeout: PMIx's own PMIX_TIMEOUT is
 * not honoured while a server waits for another node's data (seen with
 * Slurm 22.05 and PMIx 4.2), so lookups run non-blocking under a timer.
 */
#ifndef DIST_TRAIN_HELPER_PMIX_CLIENT_H
#define DIST_TRAIN_HELPER_PMIX_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/layout.h"

struct pmix_session;

/* Whether this process was started with PMIx (PMIX_NAMESPACE is set). */
int pmix_available(void);

/* Connect. Returns 0, or -1 with ERR (no libpmix, init failed). */
int pmix_open(struct pmix_session **out, char *err, size_t errlen);

/* Job and process facts. RANK0_HOST is owned by the session. */
int pmix_view(struct pmix_session *s, struct dt_pmix_view *view,
	      char *err, size_t errlen);

/* Host of RANK (owned by the session, cached), or NULL. */
const char *pmix_rank_host(struct pmix_session *s, uint32_t rank);

/* Where RANK runs: its PMIX_NODEID and PMIX_LOCAL_RANK; 0, or -1 and ERR. */
int pmix_place_of(struct pmix_session *s, uint32_t rank, uint32_t *node_id,
		  uint32_t *local_rank, char *err, size_t errlen);

/* Publish KEY=VALUE for every rank, and commit. */
int pmix_publish(struct pmix_session *s, const char *key, const char *value,
		 char *err, size_t errlen);

/*
 * KEY as published by RANK, waiting at most TIMEOUT_MS for it. Returns 0;
 * 1 when time ran out; -1 with ERR on other errors.
 */
int pmix_lookup(struct pmix_session *s, uint32_t rank, const char *key,
		int timeout_ms, char *value, size_t len, char *err,
		size_t errlen);

/* Finalize and free. */
void pmix_close(struct pmix_session *s);

#endif
