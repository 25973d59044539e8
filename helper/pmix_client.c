#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmix_client.h"

/* The fix where PMIx does not answer as it should. */
#define PMIX_FIX \
	"use --dist-train=pmix=no, and ask your administrator to check " \
	"Slurm's mpi/pmix plugin"
/* What a build without PMIx says of every call. */
#define NO_PMIX \
	"this dist-train was built without PMIx (its headers were " \
	"missing): use --dist-train=pmix=no, or ask your administrator to " \
	"rebuild it with PMIx"

int pmix_available(void)
{
	const char *ns = getenv("PMIX_NAMESPACE");

	return ns && *ns;
}

#ifdef HAVE_PMIX

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <pmix.h>

#include "../common/net.h"

/* The PMIx calls the helper makes, resolved from libpmix at run time. */
struct pmix_api {
	pmix_status_t (*init)(pmix_proc_t *, pmix_info_t[], size_t);
	pmix_status_t (*finalize)(const pmix_info_t[], size_t);
	pmix_status_t (*get)(const pmix_proc_t *, const char[],
			     const pmix_info_t[], size_t, pmix_value_t **);
	pmix_status_t (*get_nb)(const pmix_proc_t *, const char[],
				const pmix_info_t[], size_t,
				pmix_value_cbfunc_t, void *);
	pmix_status_t (*put)(pmix_scope_t, const char[], pmix_value_t *);
	pmix_status_t (*commit)(void);
	const char *(*error_string)(pmix_status_t);
	void (*value_destruct)(pmix_value_t *);
};

struct pmix_session {
	void *lib;
	struct pmix_api api;
	pmix_proc_t me;
	uint32_t world;
	char *rank0_host;
	char **hosts;		/* rank -> host, filled on demand */
};

static void *load_library(char *err, size_t errlen)
{
	static const char *const names[] = {
		"libpmix.so.2", PMIX_LIBDIR "/libpmix.so.2",
	};
	const char *why = "";

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		/* GLOBAL: PMIx's own components resolve its symbols. */
		void *lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);

		if (lib)
			return lib;
		why = dlerror();
	}
	snprintf(err, errlen, "cannot load the PMIx library (libpmix.so.2: "
		 "%s): use --dist-train=pmix=no, or ask your administrator to "
		 "install PMIx on this node",
		 why);
	return NULL;
}

#define RESOLVE(field, symbol)                                            \
	do {                                                              \
		*(void **)(&api->field) = dlsym(lib, symbol);             \
		if (!api->field) {                                        \
			snprintf(err, errlen, "the PMIx library lacks %s: " \
				 "ask your administrator to install PMIx " \
				 "3 or later, or use --dist-train=pmix=no", \
				 symbol);                                 \
			return -1;                                        \
		}                                                         \
	} while (0)

static int resolve(void *lib, struct pmix_api *api, char *err, size_t errlen)
{
	RESOLVE(init, "PMIx_Init");
	RESOLVE(finalize, "PMIx_Finalize");
	RESOLVE(get, "PMIx_Get");
	RESOLVE(get_nb, "PMIx_Get_nb");
	RESOLVE(put, "PMIx_Put");
	RESOLVE(commit, "PMIx_Commit");
	RESOLVE(error_string, "PMIx_Error_string");
	RESOLVE(value_destruct, "PMIx_Value_destruct");
	return 0;
}

static void value_release(struct pmix_session *s, pmix_value_t *v)
{
	if (!v)
		return;
	s->api.value_destruct(v);
	free(v);
}

int pmix_open(struct pmix_session **out, char *err, size_t errlen)
{
	struct pmix_session *s = calloc(1, sizeof(*s));
	pmix_status_t rc;

	*out = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->lib = load_library(err, errlen);
	if (!s->lib || resolve(s->lib, &s->api, err, errlen) < 0)
		goto fail;
	/*
	 * Not PMIX_MCA_gds=hash here, although it would attach in 12 ms
	 * rather than 41 (PMIx 4.2): the program's own PMIx client, a rank's
	 * second, then finds none of its per-process data
	 * (tests/integration/pmix.sh, the PMIx program after the bootstrap).
	 */
	rc = s->api.init(&s->me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		snprintf(err, errlen, "PMIx_Init failed (%s): launch the step "
			 "with srun --mpi=pmix, or use --dist-train=pmix=no to "
			 "take the ranks from Slurm", s->api.error_string(rc));
		goto fail;
	}
	*out = s;
	return 0;
fail:
	if (s->lib)
		dlclose(s->lib);
	free(s);
	return -1;
}

static pmix_proc_t proc_of(const struct pmix_session *s, pmix_rank_t rank)
{
	pmix_proc_t p;

	memset(&p, 0, sizeof(p));
	memcpy(p.nspace, s->me.nspace, sizeof(p.nspace));
	p.rank = rank;
	return p;
}

static int value_u32(const pmix_value_t *v, uint32_t *out)
{
	switch (v->type) {
	case PMIX_UINT32:
		*out = v->data.uint32;
		return 0;
	case PMIX_UINT16:
		*out = v->data.uint16;
		return 0;
	case PMIX_UINT8:
		*out = v->data.uint8;
		return 0;
	case PMIX_INT:
		if (v->data.integer < 0)
			return -1;
		*out = (uint32_t)v->data.integer;
		return 0;
	default:
		return -1;
	}
}

static int get_u32(struct pmix_session *s, pmix_rank_t rank, const char *key,
		   uint32_t *out, char *err, size_t errlen)
{
	pmix_proc_t p = proc_of(s, rank);
	pmix_value_t *v = NULL;
	pmix_status_t rc = s->api.get(&p, key, NULL, 0, &v);

	if (rc != PMIX_SUCCESS || value_u32(v, out) < 0) {
		snprintf(err, errlen, "PMIx has no usable %s (%s): " PMIX_FIX,
			 key, rc == PMIX_SUCCESS ? "wrong type" :
			 s->api.error_string(rc));
		value_release(s, v);
		return -1;
	}
	value_release(s, v);
	return 0;
}

static char *get_string(struct pmix_session *s, pmix_rank_t rank,
			const char *key)
{
	pmix_proc_t p = proc_of(s, rank);
	pmix_value_t *v = NULL;
	char *copy = NULL;

	if (s->api.get(&p, key, NULL, 0, &v) == PMIX_SUCCESS &&
	    v->type == PMIX_STRING && v->data.string)
		copy = strdup(v->data.string);
	value_release(s, v);
	return copy;
}

int pmix_view(struct pmix_session *s, struct dt_pmix_view *view,
	      char *err, size_t errlen)
{
	memset(view, 0, sizeof(*view));
	view->rank = s->me.rank;
	if (get_u32(s, PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, &view->world_size,
		    err, errlen) < 0 ||
	    get_u32(s, PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, &view->local_size,
		    err, errlen) < 0 ||
	    get_u32(s, PMIX_RANK_WILDCARD, PMIX_NUM_NODES, &view->num_nodes,
		    err, errlen) < 0 ||
	    get_u32(s, s->me.rank, PMIX_LOCAL_RANK, &view->local_rank, err,
		    errlen) < 0 ||
	    get_u32(s, s->me.rank, PMIX_NODEID, &view->node_id, err,
		    errlen) < 0)
		return -1;
	s->world = view->world_size;
	if (!s->rank0_host)
		s->rank0_host = get_string(s, 0, PMIX_HOSTNAME);
	if (!s->rank0_host) {
		snprintf(err, errlen, "PMIx does not say which host runs "
			 "rank 0 (%s): " PMIX_FIX, PMIX_HOSTNAME);
		return -1;
	}
	view->rank0_host = s->rank0_host;
	return 0;
}

const char *pmix_rank_host(struct pmix_session *s, uint32_t rank)
{
	if (rank >= s->world)
		return NULL;
	if (!s->hosts && !(s->hosts = calloc(s->world, sizeof(char *))))
		return NULL;
	if (!s->hosts[rank])
		s->hosts[rank] = get_string(s, rank, PMIX_HOSTNAME);
	return s->hosts[rank];
}

int pmix_place_of(struct pmix_session *s, uint32_t rank, uint32_t *node_id,
		  uint32_t *local_rank, char *err, size_t errlen)
{
	if (rank >= s->world) {
		snprintf(err, errlen, "a task claimed rank %u, past the job's "
			 "%u ranks: report it to your administrator, as that "
			 "task may not belong to the step", rank, s->world);
		return -1;
	}
	return get_u32(s, rank, PMIX_NODEID, node_id, err, errlen) < 0 ||
	       get_u32(s, rank, PMIX_LOCAL_RANK, local_rank, err, errlen) < 0 ?
	       -1 : 0;
}

int pmix_publish(struct pmix_session *s, const char *key, const char *value,
		 char *err, size_t errlen)
{
	pmix_value_t v;
	pmix_status_t rc;

	memset(&v, 0, sizeof(v));
	v.type = PMIX_STRING;
	v.data.string = (char *)value;
	rc = s->api.put(PMIX_GLOBAL, key, &v);
	if (rc == PMIX_SUCCESS)
		rc = s->api.commit();
	if (rc != PMIX_SUCCESS) {
		snprintf(err, errlen, "cannot publish %s through PMIx (%s): "
			 PMIX_FIX, key, s->api.error_string(rc));
		return -1;
	}
	return 0;
}

/* Shared with PMIx's progress thread; leaked if we stop waiting. */
struct lookup {
	int pipe[2];
	pmix_status_t status;
	char value[512];
};

static void lookup_done(pmix_status_t status, pmix_value_t *kv, void *arg)
{
	struct lookup *l = arg;

	l->status = status;
	if (status == PMIX_SUCCESS) {
		if (kv && kv->type == PMIX_STRING && kv->data.string)
			snprintf(l->value, sizeof(l->value), "%s",
				 kv->data.string);
		else
			l->status = PMIX_ERR_BAD_PARAM;
	}
	/* PMIx releases KV after we return. */
	while (write(l->pipe[1], "", 1) < 0 && errno == EINTR)
		;
}

/* One non-blocking Get, waited for at most TIMEOUT_MS: 1 on timeout. */
static int lookup_once(struct pmix_session *s, const pmix_proc_t *p,
		       const char *key, int timeout_ms, pmix_status_t *status,
		       char *value, size_t len)
{
	struct lookup *l = calloc(1, sizeof(*l));
	struct pollfd pfd;
	pmix_info_t info;
	int n;

	if (!l || pipe2(l->pipe, O_CLOEXEC) < 0) {
		free(l);
		*status = PMIX_ERR_NOMEM;
		return -1;
	}
	/* The local server waits for data not there yet only when told
	 * how long; a remote one ignores it, hence our own timer too. */
	memset(&info, 0, sizeof(info));
	snprintf(info.key, sizeof(info.key), "%s", PMIX_TIMEOUT);
	info.value.type = PMIX_INT;
	info.value.data.integer = timeout_ms / 1000 + 1;
	*status = s->api.get_nb(p, key, &info, 1, lookup_done, l);
	if (*status != PMIX_SUCCESS)
		goto done;
	pfd.fd = l->pipe[0];
	pfd.events = POLLIN;
	do
		n = poll(&pfd, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 1;	/* L stays: the callback may still come */
	*status = l->status;
	if (*status == PMIX_SUCCESS)
		snprintf(value, len, "%s", l->value);
done:
	close(l->pipe[0]);
	close(l->pipe[1]);
	free(l);
	return *status == PMIX_SUCCESS ? 0 : -1;
}

int pmix_lookup(struct pmix_session *s, uint32_t rank, const char *key,
		int timeout_ms, char *value, size_t len, char *err,
		size_t errlen)
{
	pmix_proc_t p = proc_of(s, rank);
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	pmix_status_t status;
	unsigned delay = 1;
	int rc;

	for (;;) {
		rc = lookup_once(s, &p, key, net_remaining_ms(deadline),
				 &status, value, len);
		if (rc >= 0)
			return rc;
		/* Not published yet: ask again until the time is up. */
		if (status != PMIX_ERR_NOT_FOUND && status != PMIX_ERR_TIMEOUT)
			break;
		if (!net_remaining_ms(deadline))
			return 1;
		net_backoff(&delay, deadline);
	}
	snprintf(err, errlen, "PMIx lookup of %s from rank %u failed (%s): "
		 PMIX_FIX, key, rank, s->api.error_string(status));
	return -1;
}

void pmix_close(struct pmix_session *s)
{
	if (!s)
		return;
	s->api.finalize(NULL, 0);
	for (uint32_t i = 0; s->hosts && i < s->world; i++)
		free(s->hosts[i]);
	free(s->hosts);
	free(s->rank0_host);
	/* libpmix stays loaded: its threads may still be winding down. */
	free(s);
}

#else /* !HAVE_PMIX */

struct pmix_session {
	int unused;
};

int pmix_open(struct pmix_session **out, char *err, size_t errlen)
{
	*out = NULL;
	snprintf(err, errlen, NO_PMIX);
	return -1;
}

int pmix_view(struct pmix_session *s, struct dt_pmix_view *view,
	      char *err, size_t errlen)
{
	(void)s, (void)view;
	snprintf(err, errlen, NO_PMIX);
	return -1;
}

const char *pmix_rank_host(struct pmix_session *s, uint32_t rank)
{
	(void)s, (void)rank;
	return NULL;
}

int pmix_place_of(struct pmix_session *s, uint32_t rank, uint32_t *node_id,
		  uint32_t *local_rank, char *err, size_t errlen)
{
	(void)s, (void)rank, (void)node_id, (void)local_rank;
	snprintf(err, errlen, NO_PMIX);
	return -1;
}

int pmix_publish(struct pmix_session *s, const char *key, const char *value,
		 char *err, size_t errlen)
{
	(void)s, (void)key, (void)value;
	snprintf(err, errlen, NO_PMIX);
	return -1;
}

int pmix_lookup(struct pmix_session *s, uint32_t rank, const char *key,
		int timeout_ms, char *value, size_t len, char *err,
		size_t errlen)
{
	(void)s, (void)rank, (void)key, (void)timeout_ms, (void)value,
	(void)len;
	snprintf(err, errlen, NO_PMIX);
	return -1;
}

void pmix_close(struct pmix_session *s)
{
	(void)s;
}

#endif
