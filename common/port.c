#include "config.h"

#include "port.h"
#include "error.h"
#include "hostlist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Slurm writes the reserved ports as a bracketless range list. */
static int parse_reserved(const char *text, struct dt_step_ports *out,
			  char *err, size_t errlen)
{
	struct dt_hostlist *hl = NULL;
	char *bracketed = NULL, perr[160];
	size_t n = strlen(text);
	int rc = -1;

	bracketed = malloc(n + 3);
	if (!bracketed) {
		dt_errf(err, errlen, "out of memory");
		goto out;
	}
	snprintf(bracketed, n + 3, "[%s]", text);
	if (dt_hostlist_parse(bracketed, &hl, perr, sizeof(perr)) < 0 ||
	    dt_hostlist_count(hl) < 2) {
		dt_errf(err, errlen, "SLURM_STEP_RESV_PORTS='%s' is not a "
			"list of at least two ports: ask your administrator to "
			"check MpiParams=ports= in slurm.conf", text);
		goto out;
	}
	out->count = 0;
	for (size_t i = 0; i < dt_hostlist_count(hl) &&
	     out->count < DT_PORTS_PER_STEP; i++) {
		char port[16];
		unsigned long v;

		dt_hostlist_nth(hl, i, port, sizeof(port));
		v = strtoul(port, NULL, 10);
		if (v == 0 || v > 65535) {
			dt_errf(err, errlen, "SLURM_STEP_RESV_PORTS='%s' "
				"holds '%s', which is not a port: ask your "
				"administrator to check MpiParams=ports= in "
				"slurm.conf", text, port);
			goto out;
		}
		out->port[out->count++] = (uint16_t)v;
	}
	out->source = DT_PORT_RESERVED;
	rc = 0;
out:
	dt_hostlist_free(hl);
	free(bracketed);
	return rc;
}

/* splitmix64's finalizer: every bit of X moves every bit of the result. */
static uint64_t mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

int dt_step_ports(const char *resv_ports, uint32_t job_id, uint32_t step_id,
		  uint32_t restart_count, uint16_t range_lo, uint16_t range_hi,
		  struct dt_step_ports *out, char *err, size_t errlen)
{
	uint32_t slots, slot;

	memset(out, 0, sizeof(*out));
	if (resv_ports &&
	    strnlen(resv_ports, DT_RESV_PORTS_TEXT_MAX + 1) >
	    DT_RESV_PORTS_TEXT_MAX) {
		dt_errf(err, errlen, "SLURM_STEP_RESV_PORTS is longer than %u "
			"bytes, more than every port written out, so it is "
			"refused unread: ask your administrator to check "
			"MpiParams=ports= in slurm.conf",
			DT_RESV_PORTS_TEXT_MAX);
		return -1;
	}
	if (resv_ports && *resv_ports)
		return parse_reserved(resv_ports, out, err, errlen);

	if (range_hi < range_lo ||
	    range_hi - range_lo + 1 < DT_PORTS_PER_STEP) {
		dt_errf(err, errlen, "port range %u-%u holds fewer than %d "
			"ports: ask your administrator to widen port-range= in "
			"plugstack.conf", range_lo, range_hi,
			DT_PORTS_PER_STEP);
		return -1;
	}
	slots = (uint32_t)(range_hi - range_lo + 1) / DT_PORTS_PER_STEP;
	slot = (uint32_t)(((uint64_t)job_id * 64 + step_id) % slots);
	if (restart_count > 0 && slots > 1) {
		uint64_t key = ((uint64_t)job_id << 32 | step_id) ^
			       mix64(restart_count);

		slot = (uint32_t)((slot + 1 + mix64(key) % (slots - 1)) %
				  slots);
	}
	for (unsigned i = 0; i < DT_PORTS_PER_STEP; i++)
		out->port[i] = (uint16_t)(range_lo + slot * DT_PORTS_PER_STEP +
					  i);
	out->count = DT_PORTS_PER_STEP;
	out->source = DT_PORT_DERIVED;
	return 0;
}

uint32_t dt_restart_count(const char *text)
{
	size_t n = text ? strnlen(text, 10) : 0;

	if (n == 0 || n > 9 || strspn(text, "0123456789") != n)
		return 0;
	return (uint32_t)strtoul(text, NULL, 10);
}

const char *dt_port_source_name(enum dt_port_source source)
{
	switch (source) {
	case DT_PORT_RESERVED:
		return "reserved";
	case DT_PORT_DERIVED:
		return "derived";
	default:
		return "probed";
	}
}

bool dt_is_port(const char *text)
{
	char *end;
	unsigned long v;

	if (!text || text[0] < '0' || text[0] > '9')
		return false;
	v = strtoul(text, &end, 10);
	return !*end && v >= 1 && v <= 65535;
}
