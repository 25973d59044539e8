/* --dist-train settings and plugstack.conf arguments. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "../../common/binding.h"
#include "../../common/settings.h"

#define USER_VALID \
	"on, off, verbose[=yes|no], nccl[=yes|no], check[=yes|no], " \
	"pmix[=yes|no], timeout=SECONDS, bind=gpu|numa|off, " \
	"visible-gpus=all|own, share-gpus[=yes|no], torchrun[=yes|no], " \
	"elastic=MIN:MAX, restarts=N, nproc=N, store=tree|torch, " \
	"fail-fast[=yes|no], " \
	"record=DIR|off"
#define SITE_VALID \
	"verbose[=yes|no], nccl[=yes|no], check[=yes|no], pmix[=yes|no], " \
	"timeout=SECONDS, bind=gpu|numa|off, visible-gpus=all|own, " \
	"share-gpus[=yes|no], restarts=N, store=tree|torch, " \
	"fail-fast[=yes|no], " \
	"record=DIR|off, default=on|off, " \
	"port-range=LOW-HIGH, helper=PATH, topology=FILE, " \
	"topology-cache=PATH|off, slurm-gpus=autodetect|minors, " \
	"worker-lib=PATH"

static void test_defaults(void)
{
	struct dt_config c;

	dt_config_init(&c);
	CU_ASSERT_FALSE(c.enabled);
	CU_ASSERT_FALSE(c.default_on);
	CU_ASSERT_FALSE(c.verbose);
	CU_ASSERT_EQUAL(c.port_lo, 20000);
	CU_ASSERT_EQUAL(c.port_hi, 28999);
	CU_ASSERT_TRUE(c.use_pmix);
	CU_ASSERT_FALSE(c.nccl || c.check);
	CU_ASSERT_EQUAL(c.timeout, 300);
	CU_ASSERT_STRING_EQUAL(c.helper, DT_HELPER_DEFAULT);
	CU_ASSERT_EQUAL(c.bind, DT_BIND_GPU);
	CU_ASSERT_FALSE(c.own_gpu_only || c.share_gpus);
	CU_ASSERT_STRING_EQUAL(c.topology, "");
	CU_ASSERT_STRING_EQUAL(c.topology_cache, DT_TOPOLOGY_CACHE_DEFAULT);
}

static void test_topology_cache(void)
{
	char *off[] = { "topology-cache=off" };
	char *path[] = { "topology-cache=/var/cache/dt/machine" };
	char *relative[] = { "topology-cache=machine" };
	struct dt_config c;
	char err[256];

	dt_config_init(&c);
	CU_ASSERT_EQUAL(dt_config_parse_site(&c, 1, path, err, sizeof(err)),
			0);
	CU_ASSERT_STRING_EQUAL(c.topology_cache, "/var/cache/dt/machine");
	CU_ASSERT_EQUAL(dt_config_parse_site(&c, 1, off, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(c.topology_cache, "");
	CU_ASSERT_EQUAL(dt_config_parse_site(&c, 1, relative, err,
					     sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'topology-cache': expected an "
				      "absolute path"));
	/* Not the user's to choose. */
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "topology-cache=off", err,
					       sizeof(err)), -1);
}

/* One plugstack.conf line, a file per node: %n is the node's name. */
static void test_topology_per_node(void)
{
	char *per_node[] = { "topology=/etc/dt/%n/%n.xml" };
	char *plain[] = { "topology=/etc/dt/node.xml" };
	char long_path[256], *too_long[1];
	struct dt_config c;
	char err[512];

	dt_config_init(&c);
	CU_ASSERT_EQUAL_FATAL(dt_config_parse_site(&c, 1, per_node, err,
						   sizeof(err)), 0);
	CU_ASSERT_EQUAL(dt_config_for_node(&c, "gpu17", err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(c.topology, "/etc/dt/gpu17/gpu17.xml");
	/* Done once: the name now in it is not replaced again. */
	CU_ASSERT_EQUAL(dt_config_for_node(&c, "x", err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(c.topology, "/etc/dt/gpu17/gpu17.xml");

	dt_config_parse_site(&c, 1, plain, err, sizeof(err));
	CU_ASSERT_EQUAL(dt_config_for_node(&c, "n1", err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(c.topology, "/etc/dt/node.xml");

	dt_config_parse_site(&c, 1, per_node, err, sizeof(err));
	CU_ASSERT_EQUAL(dt_config_for_node(&c, "../n1", err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot stand for %n"));
	CU_ASSERT_EQUAL(dt_config_for_node(&c, "..", err, sizeof(err)), -1);
	CU_ASSERT_EQUAL(dt_config_for_node(&c, "", err, sizeof(err)), -1);
	/* A path that fits until the names go in: 100 of 20 characters. */
	strcpy(long_path, "topology=/");
	for (int i = 0; i < 100; i++)
		strcat(long_path, "%n");
	too_long[0] = long_path;
	CU_ASSERT_EQUAL_FATAL(dt_config_parse_site(&c, 1, too_long, err,
						   sizeof(err)), 0);
	CU_ASSERT_EQUAL(dt_config_for_node(&c, "node-with-a-long-name",
					   err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "too long once %n is this node's "
				      "name 'node-with-a-long-name'"));
}

/* How Slurm numbers the GPUs is the site's gres.conf: a site key. */
static void test_slurm_gpus(void)
{
	char *minors[] = { "slurm-gpus=minors" };
	char *autodetect[] = { "slurm-gpus=autodetect" };
	char *bad[] = { "slurm-gpus=bus" };
	struct dt_config c;
	char err[256];

	dt_config_init(&c);
	CU_ASSERT_FALSE(c.slurm_gpus_minors);
	CU_ASSERT_EQUAL(dt_config_parse_site(&c, 1, minors, err, sizeof(err)),
			0);
	CU_ASSERT_TRUE(c.slurm_gpus_minors);
	CU_ASSERT_EQUAL(dt_config_parse_site(&c, 1, autodetect, err,
					     sizeof(err)), 0);
	CU_ASSERT_FALSE(c.slurm_gpus_minors);
	CU_ASSERT_EQUAL(dt_config_parse_site(&c, 1, bad, err, sizeof(err)),
			-1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "bad value 'bus' for 'slurm-gpus': "
				      "expected autodetect or minors"));
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "slurm-gpus=minors", err,
					       sizeof(err)), -1);
}

static void test_bare_option_enables(void)
{
	static const char *const empty[] = { NULL, "", "(null)" };
	struct dt_config c;

	for (size_t i = 0; i < 3; i++) {
		dt_config_init(&c);
		CU_ASSERT_EQUAL(dt_config_parse_option(&c, empty[i], NULL, 0),
				0);
		CU_ASSERT_TRUE(c.enabled);
		CU_ASSERT_FALSE(c.verbose);
	}
	CU_ASSERT_TRUE(dt_option_arg_is_empty("(null)"));
	CU_ASSERT_FALSE(dt_option_arg_is_empty("verbose"));
}

static void test_user_settings(void)
{
	struct dt_config c;

	dt_config_init(&c);
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "verbose", NULL, 0), 0);
	CU_ASSERT_TRUE(c.enabled && c.verbose);

	dt_config_init(&c);
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "verbose=no,off", NULL, 0),
			0);
	CU_ASSERT_FALSE(c.enabled || c.verbose);

	/* The last word wins. */
	dt_config_init(&c);
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "off,on,verbose=yes",
					       NULL, 0), 0);
	CU_ASSERT_TRUE(c.enabled && c.verbose);
}

static const char *option_error(const char *arg)
{
	static char err[640];
	struct dt_config c;

	dt_config_init(&c);
	err[0] = '\0';
	if (dt_config_parse_option(&c, arg, err, sizeof(err)) == 0)
		return "accepted";
	return err;
}

static void test_user_errors(void)
{
	CU_ASSERT_STRING_EQUAL(option_error("bogus"),
			       "unknown setting 'bogus'; valid: " USER_VALID);
	CU_ASSERT_STRING_EQUAL(option_error("verbose,,off"),
			       "empty setting in 'verbose,,off': remove the "
			       "extra comma");
	CU_ASSERT_STRING_EQUAL(option_error("verbose,"),
			       "empty setting in 'verbose,': remove the extra "
			       "comma");
	CU_ASSERT_STRING_EQUAL(option_error("off=1"),
			       "setting 'off' takes no value: remove '=' and "
			       "what follows");
	CU_ASSERT_STRING_EQUAL(option_error("verbose=maybe"),
			       "bad value 'maybe' for 'verbose': expected "
			       "yes or no");
	/* Site-only keys are not user settings. */
	CU_ASSERT_STRING_EQUAL(option_error("port-range=1-2"),
			       "setting 'port-range' is the administrator's (a "
			       "plugstack.conf argument), not yours to give: "
			       "remove it; valid: " USER_VALID);
	CU_ASSERT_STRING_EQUAL(option_error("helper=/bin/sh"),
			       "setting 'helper' is the administrator's (a "
			       "plugstack.conf argument), not yours to give: "
			       "remove it; valid: " USER_VALID);
	CU_ASSERT_STRING_EQUAL(option_error("Verbose"),
			       "unknown setting 'Verbose'; valid: "
			       USER_VALID);
	CU_ASSERT_STRING_EQUAL(option_error("timeout"),
			       "setting 'timeout' needs a value: write it as "
			       "timeout=SECONDS");
	CU_ASSERT_STRING_EQUAL(option_error("timeout=0"),
			       "bad value '0' for 'timeout': expected "
			       "seconds, 1 to 86400");
	CU_ASSERT_STRING_EQUAL(option_error("timeout=1m"),
			       "bad value '1m' for 'timeout': expected "
			       "seconds, 1 to 86400");
	CU_ASSERT_STRING_EQUAL(option_error("nccl=maybe"),
			       "bad value 'maybe' for 'nccl': expected yes "
			       "or no");
}

static void test_site_arguments(void)
{
	char *argv[] = { "default=on", "port-range=30000-30099",
			 "verbose=yes" };
	struct dt_config c;

	dt_config_init(&c);
	CU_ASSERT_EQUAL(dt_config_parse_site(&c, 3, argv, NULL, 0), 0);
	CU_ASSERT_TRUE(c.default_on && c.enabled && c.verbose);
	CU_ASSERT_EQUAL(c.port_lo, 30000);
	CU_ASSERT_EQUAL(c.port_hi, 30099);
	/* The user turns a site default off for one step. */
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "off,verbose=no", NULL, 0),
			0);
	CU_ASSERT_FALSE(c.enabled || c.verbose);
	CU_ASSERT_TRUE(c.default_on);
}

static const char *site_error(char *arg)
{
	static char err[640];
	struct dt_config c;

	dt_config_init(&c);
	err[0] = '\0';
	if (dt_config_parse_site(&c, 1, &arg, err, sizeof(err)) == 0)
		return "accepted";
	return err;
}

static void test_site_errors(void)
{
	CU_ASSERT_STRING_EQUAL(site_error("bogus=1"),
			       "unknown plugstack.conf argument 'bogus=1'; "
			       "valid: " SITE_VALID);
	CU_ASSERT_STRING_EQUAL(site_error("verbose"),
			       "plugstack.conf argument 'verbose' is not "
			       "KEY=VALUE; valid: " SITE_VALID);
	CU_ASSERT_STRING_EQUAL(site_error("helper=bin/dist-train"),
			       "bad value 'bin/dist-train' for 'helper': "
			       "expected an absolute path");
	CU_ASSERT_STRING_EQUAL(site_error("timeout=abc"),
			       "bad value 'abc' for 'timeout': expected "
			       "seconds, 1 to 86400");
	CU_ASSERT_STRING_EQUAL(site_error("default=yes"),
			       "bad value 'yes' for 'default': expected on "
			       "or off");
	CU_ASSERT_STRING_EQUAL(site_error("off=1"),
			       "unknown plugstack.conf argument 'off=1'; "
			       "valid: " SITE_VALID);
	static char *const bad_ranges[] = {
		"port-range=", "port-range=20000", "port-range=20000-",
		"port-range=-20000", "port-range=1000-2000",
		"port-range=30000-20000", "port-range=20000-20002",
		"port-range=20000-70000", "port-range=2e4-30000",
		"port-range= 20000-30000",
	};
	for (size_t i = 0; i < sizeof(bad_ranges) / sizeof(bad_ranges[0]);
	     i++)
		CU_ASSERT_PTR_NOT_NULL(strstr(site_error(bad_ranges[i]),
					      "bad value"));
	CU_ASSERT_STRING_EQUAL(site_error("port-range=20000-20003"),
			       "accepted");
}

static void test_binding_settings(void)
{
	char *site[] = { "bind=numa", "topology=/etc/slurm/node.xml" };
	struct dt_config c;

	dt_config_init(&c);
	CU_ASSERT_EQUAL(dt_config_parse_site(&c, 2, site, NULL, 0), 0);
	CU_ASSERT_EQUAL(c.bind, DT_BIND_NUMA);
	CU_ASSERT_STRING_EQUAL(c.topology, "/etc/slurm/node.xml");
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "bind=gpu,visible-gpus=own,"
					       "share-gpus", NULL, 0), 0);
	CU_ASSERT_EQUAL(c.bind, DT_BIND_GPU);
	CU_ASSERT_TRUE(c.own_gpu_only && c.share_gpus);
	CU_ASSERT_STRING_EQUAL(option_error("bind=cores"),
			       "bad value 'cores' for 'bind': expected gpu, "
			       "numa or off");
	CU_ASSERT_STRING_EQUAL(option_error("visible-gpus=mine"),
			       "bad value 'mine' for 'visible-gpus': expected "
			       "all or own");
	CU_ASSERT_STRING_EQUAL(option_error("topology=/tmp/x.xml"),
			       "setting 'topology' is the administrator's (a "
			       "plugstack.conf argument), not yours to give: "
			       "remove it; valid: " USER_VALID);
	CU_ASSERT_STRING_EQUAL(site_error("topology=node.xml"),
			       "bad value 'node.xml' for 'topology': expected "
			       "an absolute path");
}

/* What srun checks before launch and every node checks again. */
static void test_step_check(void)
{
	struct dt_config c;
	char err[640];

	dt_config_init(&c);
	CU_ASSERT_EQUAL(dt_config_check_step(&c, 4, 9, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "", NULL, 0), 0);
	CU_ASSERT_EQUAL(dt_config_check_step(&c, 4, 9, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "torchrun", NULL, 0), 0);
	CU_ASSERT_EQUAL(dt_config_check_step(&c, 4, 4, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(dt_config_check_step(&c, 2, 4, err, sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "--dist-train=torchrun runs one torchrun "
			       "agent per node, which starts the processes: "
			       "use --ntasks-per-node=1 (this step has 4 "
			       "tasks on 2 nodes)");
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "elastic=3:8", NULL, 0), 0);
	CU_ASSERT_EQUAL(dt_config_check_step(&c, 8, 8, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(dt_config_check_step(&c, 2, 2, err, sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "--dist-train=elastic=3:8 asks for up to 8 "
			       "nodes but the step has 2: use --nodes=8, or "
			       "elastic=2:2");
}

static void test_container_check(void)
{
	const unsigned long v22_05 = (22UL << 16) | (5UL << 8) | 8;
	const unsigned long v23_02 = (23UL << 16) | (2UL << 8);
	struct dt_config c;
	char err[512];

	dt_config_init(&c);
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "", NULL, 0), 0);
	CU_ASSERT_EQUAL(dt_config_check_container(&c, v22_05, NULL, err,
						  sizeof(err)), 0);
	CU_ASSERT_EQUAL(dt_config_check_container(&c, v22_05, "", err,
						  sizeof(err)), 0);
	CU_ASSERT_EQUAL(dt_config_check_container(&c, v23_02, "/b", err,
						  sizeof(err)), 0);
	CU_ASSERT_EQUAL(dt_config_check_container(&c, v22_05, "/b", err,
						  sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "Slurm 22.05's OCI container "
				      "(--container=/b)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "Slurm 23.02 or later"));
	/* A step that did not ask is never refused. */
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "off", NULL, 0), 0);
	CU_ASSERT_EQUAL(dt_config_check_container(&c, v22_05, "/b", err,
						  sizeof(err)), 0);
}

static void test_torchrun_settings(void)
{
	struct dt_config c;

	dt_config_init(&c);
	CU_ASSERT_FALSE(c.torchrun);
	CU_ASSERT_EQUAL(c.restarts, 3);
	CU_ASSERT_STRING_EQUAL(c.worker_lib, DT_WORKER_LIB_DEFAULT);
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "elastic=2:4,restarts=5,"
					       "nproc=8", NULL, 0), 0);
	CU_ASSERT_TRUE(c.torchrun);	/* elastic implies it */
	CU_ASSERT_EQUAL(c.min_nodes, 2);
	CU_ASSERT_EQUAL(c.max_nodes, 4);
	CU_ASSERT_EQUAL(c.restarts, 5);
	CU_ASSERT_EQUAL(c.nproc, 8);
	CU_ASSERT_STRING_EQUAL(option_error("elastic=4:2"),
			       "elastic=4:2: the minimum 4 is above the "
			       "maximum 2; expected MIN:MAX with MIN <= MAX");
	CU_ASSERT_STRING_EQUAL(option_error("elastic=4"),
			       "bad value '4' for 'elastic': expected MIN:MAX "
			       "nodes, such as 2:4");
	CU_ASSERT_STRING_EQUAL(option_error("elastic=0:2"),
			       "bad value '0:2' for 'elastic': expected "
			       "MIN:MAX nodes, such as 2:4");
	CU_ASSERT_STRING_EQUAL(option_error("nproc=0"),
			       "bad value '0' for 'nproc': expected a number "
			       "of processes per node, 1 to 4096");
	CU_ASSERT_STRING_EQUAL(option_error("restarts=-1"),
			       "bad value '-1' for 'restarts': expected a "
			       "number");
	CU_ASSERT_STRING_EQUAL(site_error("elastic=1:2"),
			       "unknown plugstack.conf argument 'elastic=1:2'; "
			       "valid: " SITE_VALID);
}

static void test_helper_settings(void)
{
	char *argv[] = { "helper=/opt/dist-train/bin/dist-train",
			 "timeout=60", "pmix=no" };
	struct dt_config c;

	dt_config_init(&c);
	CU_ASSERT_EQUAL(dt_config_parse_site(&c, 3, argv, NULL, 0), 0);
	CU_ASSERT_STRING_EQUAL(c.helper, "/opt/dist-train/bin/dist-train");
	CU_ASSERT_EQUAL(c.timeout, 60);
	CU_ASSERT_FALSE(c.use_pmix);
	CU_ASSERT_EQUAL(dt_config_parse_option(&c, "nccl,check,pmix,timeout=9",
					       NULL, 0), 0);
	CU_ASSERT_TRUE(c.nccl && c.check && c.use_pmix && c.enabled);
	CU_ASSERT_EQUAL(c.timeout, 9);
}

/* The plugin hands its settings to the helper as text: they survive. */
static void test_format_round_trip(void)
{
	struct dt_config a, b;
	char text[256];

	dt_config_init(&a);
	CU_ASSERT_EQUAL(dt_config_parse_option(&a, "verbose,nccl,pmix=no,"
					       "timeout=42", NULL, 0), 0);
	dt_config_format_settings(&a, text, sizeof(text));
	CU_ASSERT_STRING_EQUAL(text, "on,verbose=yes,pmix=no,nccl=yes,"
			       "check=no,timeout=42,bind=gpu,visible-gpus=all,"
			       "share-gpus=no,torchrun=no,restarts=3,"
			       "store=tree");
	dt_config_init(&b);
	CU_ASSERT_EQUAL(dt_config_parse_option(&b, text, NULL, 0), 0);
	CU_ASSERT_TRUE(a.enabled == b.enabled && a.verbose == b.verbose &&
		       a.use_pmix == b.use_pmix && a.nccl == b.nccl &&
		       a.check == b.check && a.timeout == b.timeout &&
		       a.bind == b.bind && a.own_gpu_only == b.own_gpu_only &&
		       a.share_gpus == b.share_gpus &&
		       a.store_tree == b.store_tree);
	/* store=torch survives too. */
	CU_ASSERT_EQUAL(dt_config_parse_option(&a, "store=torch", NULL, 0), 0);
	dt_config_format_settings(&a, text, sizeof(text));
	CU_ASSERT_EQUAL(dt_config_parse_option(&b, text, NULL, 0), 0);
	CU_ASSERT_FALSE(b.store_tree);
}

/*
 * The documented defaults (dist-train settings, and the README and man
 * pages made from it) are the real ones: giving a setting its documented
 * default changes nothing. A default in parentheses is no value the
 * setting takes, and is described instead.
 */
static void test_documented_defaults(void)
{
	struct dt_setting_info info;
	unsigned checked = 0;
	size_t i;

	for (i = 0; dt_setting_describe(i, &info) == 0; i++) {
		struct dt_config init, set;
		char word[128], err[640];
		char *argv[] = { word };

		CU_ASSERT_TRUE(info.user || info.site);
		CU_ASSERT_PTR_NOT_NULL(info.summary);
		CU_ASSERT_PTR_NOT_NULL(info.default_text);
		if (!info.default_text || info.default_text[0] == '(')
			continue;
		snprintf(word, sizeof(word), "%s=%s", info.name,
			 info.default_text);
		dt_config_init(&init);
		set = init;
		if (info.user) {
			init.enabled = true;
			CU_ASSERT_EQUAL_FATAL(dt_config_parse_option(
				&set, word, err, sizeof(err)), 0);
		} else {
			CU_ASSERT_EQUAL_FATAL(dt_config_parse_site(
				&set, 1, argv, err, sizeof(err)), 0);
		}
		if (memcmp(&init, &set, sizeof(init)))
			fprintf(stderr, "documented default differs: %s\n",
				word);
		CU_ASSERT_EQUAL(memcmp(&init, &set, sizeof(init)), 0);
		checked++;
	}
	CU_ASSERT_EQUAL(i, 24);
	CU_ASSERT_EQUAL(checked, 16);
	CU_ASSERT_EQUAL(dt_setting_describe(i, &info), -1);
}

/* After the start: fail-fast is on unless turned off; the record's
 * folder is srun's unless named, or none. */
static void test_after_start_settings(void)
{
	struct dt_config cfg;
	char err[256];

	dt_config_init(&cfg);
	CU_ASSERT_TRUE(cfg.fail_fast);
	CU_ASSERT_FALSE(cfg.record_off);
	CU_ASSERT_STRING_EQUAL(cfg.record_dir, "");
	CU_ASSERT_EQUAL(dt_config_parse_option(&cfg, "fail-fast=no,"
					       "record=/scratch/runs", err,
					       sizeof(err)), 0);
	CU_ASSERT_FALSE(cfg.fail_fast);
	CU_ASSERT_STRING_EQUAL(cfg.record_dir, "/scratch/runs");
	CU_ASSERT_EQUAL(dt_config_parse_option(&cfg, "record=off", err,
					       sizeof(err)), 0);
	CU_ASSERT_TRUE(cfg.record_off);
	CU_ASSERT_STRING_EQUAL(cfg.record_dir, "");
	CU_ASSERT_EQUAL(dt_config_parse_option(&cfg, "record=", err,
					       sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "a folder, or off"));
	CU_ASSERT_EQUAL(dt_config_parse_option(&cfg, "fail-fast=maybe", err,
					       sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "expected yes or no"));
}

/* The step's store: through the node tree unless the user or the site
 * says torch's own; any other value is refused by name. */
static void test_store_setting(void)
{
	struct dt_config cfg;
	char err[256];
	char *site[] = { "store=torch" };

	dt_config_init(&cfg);
	CU_ASSERT_TRUE(cfg.store_tree);
	CU_ASSERT_EQUAL(dt_config_parse_site(&cfg, 1, site, err,
					     sizeof(err)), 0);
	CU_ASSERT_FALSE(cfg.store_tree);
	CU_ASSERT_EQUAL(dt_config_parse_option(&cfg, "store=tree", err,
					       sizeof(err)), 0);
	CU_ASSERT_TRUE(cfg.store_tree);
	CU_ASSERT_EQUAL(dt_config_parse_option(&cfg, "store=relay", err,
					       sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "bad value 'relay' for 'store': expected "
			       "torch or tree");
	CU_ASSERT_EQUAL(dt_config_parse_option(&cfg, "store", err,
					       sizeof(err)), -1);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_defaults),
	UNIT_TEST(test_topology_cache),
	UNIT_TEST(test_topology_per_node),
	UNIT_TEST(test_slurm_gpus),
	UNIT_TEST(test_bare_option_enables),
	UNIT_TEST(test_user_settings),
	UNIT_TEST(test_user_errors),
	UNIT_TEST(test_site_arguments),
	UNIT_TEST(test_site_errors),
	UNIT_TEST(test_helper_settings),
	UNIT_TEST(test_binding_settings),
	UNIT_TEST(test_torchrun_settings),
	UNIT_TEST(test_after_start_settings),
	UNIT_TEST(test_store_setting),
	UNIT_TEST(test_step_check),
	UNIT_TEST(test_container_check),
	UNIT_TEST(test_format_round_trip),
	UNIT_TEST(test_documented_defaults),
};

UNIT_MAIN("settings", tests)
