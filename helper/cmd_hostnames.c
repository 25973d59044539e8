/*
 * dist-train hostnames [LIST]: what `scontrol show hostnames` prints, for
 * scripts and containers without Slurm's client tools. Without LIST it
 * expands $SLURM_NODELIST, as scontrol does.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "../common/hostlist.h"

static int print_host(const char *name, size_t len, void *arg)
{
	FILE *out = arg;

	if (fwrite(name, 1, len, out) != len || putc('\n', out) == EOF)
		return -1;
	return 0;
}

int cmd_hostnames(int argc, char **argv)
{
	static char outbuf[1 << 16];
	struct dt_hostlist *hl = NULL;
	const char *list;
	char err[512];
	int rc = 1;

	if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "--help") ||
				       !strcmp(argv[1], "-h")))) {
		fprintf(argc > 2 ? stderr : stdout,
			"usage: " DT_NAME " hostnames [HOSTLIST]\n");
		return argc > 2 ? 2 : 0;
	}
	list = argc == 2 ? argv[1] : getenv("SLURM_NODELIST");
	if (!list) {
		helper_error("no host list: give one, or run inside a Slurm "
			     "job (SLURM_NODELIST is not set)");
		return 2;
	}
	if (dt_hostlist_parse(list, &hl, err, sizeof(err)) < 0) {
		helper_error("malformed host list: %s", err);
		return 1;
	}
	if (dt_hostlist_count(hl) == 0) {
		helper_error("the host list '%s' names no host: give one that "
			     "names at least one", list);
		goto out;
	}
	setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	if (dt_hostlist_foreach(hl, print_host, stdout) != 0 ||
	    fflush(stdout) == EOF) {
		helper_error("cannot write the host names: check where the "
			     "output goes (a full disk, a closed pipe)");
		goto out;
	}
	rc = 0;
out:
	dt_hostlist_free(hl);
	return rc;
}
