#include "config.h"

#include "machine_cache.h"
#include "error.h"
#include "gpu_vendor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "dist-train machine 2"
/* Bounds on what a text may claim, far above any real node. */
#define CORES_MAX (1u << 16)
#define PUS_PER_CORE_MAX 256u
#define PU_INDEX_MAX (1u << 20)
#define DEVICES_MAX 1024u

/* snprintf into BUF at *USED, counting what would not fit. */
static void put(char *buf, size_t len, size_t *used, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void put(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(*used < len ? buf + *used : NULL,
		      *used < len ? len - *used : 0, fmt, ap);
	va_end(ap);
	if (w > 0)
		*used += (size_t)w;
}

size_t dt_machine_format(const struct dt_machine *m, const char *fingerprint,
			 char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	put(buf, len, &used, MAGIC "\nfingerprint %s\ncores %u\n", fingerprint,
	    m->ncores);
	for (unsigned c = 0; c < m->ncores; c++) {
		const struct dt_core *core = &m->cores[c];

		put(buf, len, &used, "%d ", core->numa);
		for (unsigned i = 0; i < core->npus; i++)
			put(buf, len, &used, "%s%u", i ? "," : "",
			    m->pus[core->first_pu + i]);
		put(buf, len, &used, "\n");
	}
	put(buf, len, &used, "gpu-vendor %s\ngpus %u\n",
	    dt_gpu_vendors[m->gpu_vendor >= 0 && m->gpu_vendor < DT_GPU_VENDORS ?
			   m->gpu_vendor : 0].name, m->ngpus);
	for (unsigned g = 0; g < m->ngpus; g++)
		put(buf, len, &used, "%s %d %d\n",
		    m->gpus[g].busid[0] ? m->gpus[g].busid : "-",
		    m->gpus[g].numa, m->gpus[g].minor);
	put(buf, len, &used, "nics %u\n", m->nnics);
	for (unsigned n = 0; n < m->nnics; n++) {
		const struct dt_nic *nic = &m->nics[n];

		put(buf, len, &used, "%s %s %s %c %d %d\n", nic->name,
		    nic->netdev[0] ? nic->netdev : "-",
		    nic->busid[0] ? nic->busid : "-",
		    nic->kind == DT_NIC_RDMA ? 'r' : 'e', nic->numa, nic->port);
	}
	put(buf, len, &used, "hops");
	for (unsigned i = 0; m->gpu_nic_hops && i < m->ngpus * m->nnics; i++)
		put(buf, len, &used, " %u", m->gpu_nic_hops[i]);
	put(buf, len, &used, "\nend\n");
	return used;
}

/* The text being read: the next line, bounded, without its '\n'. */
struct reader {
	const char *at, *end;
	char line[8192];
};

static int next_line(struct reader *r)
{
	const char *nl = memchr(r->at, '\n', (size_t)(r->end - r->at));
	size_t n;

	if (!nl)
		return -1;
	n = (size_t)(nl - r->at);
	if (n >= sizeof(r->line) || memchr(r->at, '\0', n))
		return -1;
	memcpy(r->line, r->at, n);
	r->line[n] = '\0';
	r->at = nl + 1;
	return 0;
}

/* "WORD N": N, at most MAX. */
static int count_line(struct reader *r, const char *word, unsigned max,
		      unsigned *out)
{
	char tail;

	if (next_line(r) < 0 || strncmp(r->line, word, strlen(word)) ||
	    r->line[strlen(word)] != ' ' ||
	    sscanf(r->line + strlen(word), " %u%c", out, &tail) != 1 ||
	    *out > max)
		return -1;
	return 0;
}

/* A decimal number at *P, at most MAX; moves *P past it. */
static int number(const char **p, unsigned max, unsigned *out)
{
	unsigned long v = 0;
	const char *s = *p;

	if (*s < '0' || *s > '9')
		return -1;
	while (*s >= '0' && *s <= '9') {
		v = v * 10 + (unsigned long)(*s++ - '0');
		if (v > max)
			return -1;
	}
	*p = s;
	*out = (unsigned)v;
	return 0;
}

/* A NUMA node or minor number: -1 or 0..MAX. */
static int signed_number(const char **p, int *out)
{
	unsigned v;

	if ((*p)[0] == '-' && (*p)[1] == '1') {
		*p += 2;
		*out = -1;
		return 0;
	}
	if (number(p, PU_INDEX_MAX, &v) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_cores(struct reader *r, struct dt_machine *m)
{
	unsigned cap = 0;

	if (count_line(r, "cores", CORES_MAX, &m->ncores) < 0)
		return -1;
	m->cores = calloc(m->ncores + 1, sizeof(*m->cores));
	if (!m->cores)
		return -1;
	for (unsigned c = 0; c < m->ncores; c++) {
		struct dt_core *core = &m->cores[c];
		const char *p = r->line;

		if (next_line(r) < 0 || signed_number(&p, &core->numa) < 0 ||
		    *p++ != ' ')
			return -1;
		core->first_pu = m->npus;
		for (;;) {
			unsigned pu;

			if (number(&p, PU_INDEX_MAX, &pu) < 0 ||
			    core->npus == PUS_PER_CORE_MAX)
				return -1;
			if (m->npus == cap) {
				unsigned *more;

				cap = cap ? cap * 2 : 64;
				more = realloc(m->pus, cap * sizeof(*more));
				if (!more)
					return -1;
				m->pus = more;
			}
			m->pus[m->npus++] = pu;
			core->npus++;
			if (*p == '\0')
				break;
			if (*p++ != ',')
				return -1;
		}
	}
	return 0;
}

/* One word of at most SIZE - 1 bytes, "-" for an empty one. */
static int word(const char **p, char *out, size_t size)
{
	size_t n = strcspn(*p, " ");

	if (!n || n >= size)
		return -1;
	memcpy(out, *p, n);
	out[n] = '\0';
	if (!strcmp(out, "-"))
		out[0] = '\0';
	*p += n;
	if (**p == ' ')
		(*p)++;
	return 0;
}

static int parse_devices(struct reader *r, struct dt_machine *m)
{
	char vendor[16], tail;

	if (next_line(r) < 0 ||
	    sscanf(r->line, "gpu-vendor %15s%c", vendor, &tail) != 1)
		return -1;
	m->gpu_vendor = -1;
	for (int v = 0; v < DT_GPU_VENDORS; v++)
		if (!strcmp(vendor, dt_gpu_vendors[v].name))
			m->gpu_vendor = v;
	if (m->gpu_vendor < 0 ||
	    count_line(r, "gpus", DEVICES_MAX, &m->ngpus) < 0 ||
	    !(m->gpus = calloc(m->ngpus + 1, sizeof(*m->gpus))))
		return -1;
	for (unsigned g = 0; g < m->ngpus; g++) {
		struct dt_gpu *gpu = &m->gpus[g];
		const char *p = r->line;

		if (next_line(r) < 0 ||
		    word(&p, gpu->busid, sizeof(gpu->busid)) < 0 ||
		    signed_number(&p, &gpu->numa) < 0 || *p++ != ' ' ||
		    signed_number(&p, &gpu->minor) < 0 || *p)
			return -1;
	}
	if (count_line(r, "nics", DEVICES_MAX, &m->nnics) < 0 ||
	    !(m->nics = calloc(m->nnics + 1, sizeof(*m->nics))))
		return -1;
	for (unsigned n = 0; n < m->nnics; n++) {
		struct dt_nic *nic = &m->nics[n];
		const char *p = r->line;
		char kind[2];
		unsigned port;

		if (next_line(r) < 0 ||
		    word(&p, nic->name, sizeof(nic->name)) < 0 ||
		    !nic->name[0] ||
		    word(&p, nic->netdev, sizeof(nic->netdev)) < 0 ||
		    word(&p, nic->busid, sizeof(nic->busid)) < 0 ||
		    word(&p, kind, sizeof(kind)) < 0 ||
		    (kind[0] != 'r' && kind[0] != 'e') ||
		    signed_number(&p, &nic->numa) < 0 || *p++ != ' ' ||
		    number(&p, 255, &port) < 0 || *p)
			return -1;
		nic->kind = kind[0] == 'r' ? DT_NIC_RDMA : DT_NIC_ETHERNET;
		nic->port = (int)port;
	}
	return 0;
}

static int parse_hops(struct reader *r, struct dt_machine *m)
{
	unsigned total = m->ngpus * m->nnics;
	const char *p;

	if (next_line(r) < 0 || strncmp(r->line, "hops", 4))
		return -1;
	p = r->line + 4;
	m->gpu_nic_hops = calloc(total + 1, sizeof(*m->gpu_nic_hops));
	if (!m->gpu_nic_hops)
		return -1;
	for (unsigned i = 0; i < total; i++)
		if (*p++ != ' ' || number(&p, 1024, &m->gpu_nic_hops[i]) < 0)
			return -1;
	if (*p || next_line(r) < 0 || strcmp(r->line, "end"))
		return -1;
	return 0;
}

/* The sorted NUMA nodes of M's cores. */
static int collect_numas(struct dt_machine *m)
{
	m->nnumas = 0;
	m->numas = calloc(m->ncores + 1, sizeof(*m->numas));
	if (!m->numas)
		return -1;
	for (unsigned c = 0; c < m->ncores; c++) {
		int numa = m->cores[c].numa;
		unsigned i = 0;

		if (numa < 0)
			continue;
		while (i < m->nnumas && m->numas[i] < numa)
			i++;
		if (i < m->nnumas && m->numas[i] == numa)
			continue;
		memmove(m->numas + i + 1, m->numas + i,
			(m->nnumas - i) * sizeof(*m->numas));
		m->numas[i] = numa;
		m->nnumas++;
	}
	return 0;
}

int dt_machine_parse(const char *text, size_t len, const char *fingerprint,
		     struct dt_machine *out, char *err, size_t errlen)
{
	struct reader *r;
	struct dt_machine m;
	int rc = -1;

	memset(&m, 0, sizeof(m));
	if (len > DT_MACHINE_TEXT_MAX) {
		dt_errf(err, errlen, "the cached machine is over %u bytes: "
			"remove the file, and the next step writes it again",
			DT_MACHINE_TEXT_MAX);
		return -1;
	}
	r = malloc(sizeof(*r));
	if (!r) {
		dt_errf(err, errlen, "out of memory");
		return -1;
	}
	r->at = text;
	r->end = text + len;
	r->line[0] = '\0';
	if (next_line(r) < 0 || strcmp(r->line, MAGIC))
		goto bad;
	if (next_line(r) < 0 || strncmp(r->line, "fingerprint ", 12))
		goto bad;
	if (strcmp(r->line + 12, fingerprint)) {
		rc = 1;
		goto out;
	}
	if (parse_cores(r, &m) < 0 || parse_devices(r, &m) < 0 ||
	    parse_hops(r, &m) < 0 || collect_numas(&m) < 0)
		goto bad;
	*out = m;
	memset(&m, 0, sizeof(m));
	rc = 0;
	goto out;
bad:
	dt_errf(err, errlen, "the cached machine is malformed near '%.40s': "
		"remove the file, and the next step writes it again",
		r->line);
out:
	dt_machine_free(&m);
	free(r);
	return rc;
}

int dt_machine_restrict(const struct dt_machine *full, const bool *allowed,
			unsigned nallowed, const char *alloc_cores,
			struct dt_machine *out, char *err, size_t errlen)
{
	struct dt_machine m;
	unsigned *alloc = NULL, kept = 0;
	int nalloc = -1;

	memset(&m, 0, sizeof(m));
	m.cores = calloc(full->ncores + 1, sizeof(*m.cores));
	m.pus = calloc(full->npus + 1, sizeof(*m.pus));
	m.gpus = calloc(full->ngpus + 1, sizeof(*m.gpus));
	m.nics = calloc(full->nnics + 1, sizeof(*m.nics));
	m.gpu_nic_hops = calloc(full->ngpus * full->nnics + 1,
				sizeof(*m.gpu_nic_hops));
	if (!m.cores || !m.pus || !m.gpus || !m.nics || !m.gpu_nic_hops)
		goto nomem;

	/* hwloc's numbering of a restricted topology: the cores left. */
	for (unsigned c = 0; c < full->ncores; c++)
		for (unsigned i = 0; i < full->cores[c].npus; i++) {
			unsigned pu = full->pus[full->cores[c].first_pu + i];

			if (pu < nallowed && allowed[pu]) {
				kept++;
				break;
			}
		}
	if (alloc_cores && *alloc_cores)
		nalloc = dt_intlist_parse(alloc_cores, 1u << 20, &alloc);
	/* Slurm's list only counts when it describes this machine. */
	for (int i = 0; i < nalloc; i++)
		if (alloc[i] >= kept)
			nalloc = -1;

	kept = 0;
	for (unsigned c = 0; c < full->ncores; c++) {
		const struct dt_core *from = &full->cores[c];
		struct dt_core *to = &m.cores[m.ncores];
		bool mine = nalloc < 0;
		unsigned first = m.npus;

		for (unsigned i = 0; i < from->npus; i++) {
			unsigned pu = full->pus[from->first_pu + i];

			if (pu < nallowed && allowed[pu])
				m.pus[m.npus++] = pu;
		}
		if (m.npus == first)
			continue;	/* not in this topology at all */
		for (int i = 0; i < nalloc && !mine; i++)
			mine = alloc[i] == kept;
		kept++;
		if (!mine) {
			m.npus = first;
			continue;
		}
		to->numa = from->numa;
		to->first_pu = first;
		to->npus = m.npus - first;
		m.ncores++;
	}
	if (collect_numas(&m) < 0)
		goto nomem;
	memcpy(m.gpus, full->gpus, full->ngpus * sizeof(*m.gpus));
	m.ngpus = full->ngpus;
	m.gpu_vendor = full->gpu_vendor;
	memcpy(m.nics, full->nics, full->nnics * sizeof(*m.nics));
	m.nnics = full->nnics;
	if (full->gpu_nic_hops)
		memcpy(m.gpu_nic_hops, full->gpu_nic_hops,
		       full->ngpus * full->nnics * sizeof(*m.gpu_nic_hops));
	free(alloc);
	*out = m;
	return 0;
nomem:
	free(alloc);
	dt_machine_free(&m);
	dt_errf(err, errlen, "out of memory");
	return -1;
}
