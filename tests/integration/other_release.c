/*
 * For the integration tests only, never installed: what dist_train.so
 * looks like to a Slurm it was not built for, as after a Slurm upgrade
 * that the plugin was not rebuilt for (tests/integration/upgrade.sh).
 * Slurm compares a SPANK plugin's plugin_version with its own release,
 * major and minor; SPANK_PLUGIN() would set this release, so the symbols
 * are written out, naming the next major release.
 */
#include <stdint.h>

#include <slurm/spank.h>

const char plugin_name[] = "dist_train";
const char plugin_type[] = "spank";
const uint32_t plugin_version = SLURM_VERSION_NUMBER + (1U << 16);
const uint32_t spank_plugin_version = 1;

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)sp, (void)ac, (void)av;
	return 0;
}
