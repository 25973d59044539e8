/*
 * --dist-train=SETTINGS (first byte even) and plugstack.conf arguments
 * (odd: the rest split at blanks, as Slurm splits the line).
 */
#include "config.h"

#include "fuzz.h"
#include "../../common/settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text, err[640], out[512], *argv[64], *save = NULL;
	struct dt_config cfg, back;
	int argc = 0;

	if (size == 0)
		return 0;
	text = fuzz_string(data + 1, size - 1);
	dt_config_init(&cfg);
	if (data[0] % 2 == 0) {
		if (dt_config_parse_option(&cfg, text, err, sizeof(err)) == 0) {
			/* What the plugin hands the helper reads back. */
			dt_config_format_settings(&cfg, out, sizeof(out));
			dt_config_init(&back);
			FUZZ_ASSERT(dt_config_parse_option(&back, out, NULL,
							   0) == 0);
			FUZZ_ASSERT(back.enabled == cfg.enabled &&
				    back.bind == cfg.bind &&
				    back.timeout == cfg.timeout);
		}
	} else {
		for (char *w = strtok_r(text, " \t", &save); w && argc < 64;
		     w = strtok_r(NULL, " \t", &save))
			argv[argc++] = w;
		if (dt_config_parse_site(&cfg, argc, argv, err, sizeof(err)))
			FUZZ_ASSERT(err[0] != '\0');
		else
			FUZZ_ASSERT(cfg.port_lo <= cfg.port_hi);
	}
	free(text);
	return 0;
}
