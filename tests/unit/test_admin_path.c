/*
 * common/admin_path.c on a real tree: folders root's and mode 755 pass;
 * one a group, others or another uid can write is refused, sticky /tmp
 * alike, whether named or reached through a link. The tree is made in
 * /run, which only root can write; as another user only the refusals
 * that need no such tree are tested.
 */
#include "config.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/admin_path.h"
#include "common/settings.h"
#include "unit.h"

static char base[64];
static char err[512];

/* BASE/NAME, in a static buffer of one of four. */
static const char *at(const char *name)
{
	static char paths[4][256];
	static unsigned next;
	char *p = paths[next++ % 4];

	snprintf(p, sizeof(paths[0]), "%s/%s", base, name);
	return p;
}

static bool have_tree(void)
{
	return base[0] != '\0';
}

static void make_tree(void)
{
	int fd;

	snprintf(base, sizeof(base), "/run/dt-unit-admin-XXXXXX");
	if (geteuid() != 0 || !mkdtemp(base)) {
		base[0] = '\0';
		return;
	}
	chmod(base, 0755);
	mkdir(at("bin"), 0755);
	mkdir(at("group"), 0755);
	chmod(at("group"), 0775);
	mkdir(at("sticky"), 0755);
	chmod(at("sticky"), 01777);
	mkdir(at("user"), 0755);
	if (chown(at("user"), 65534, 65534) < 0)
		CU_FAIL("chown");
	fd = open(at("bin/tool"), O_WRONLY | O_CREAT, 0755);
	close(fd);
	fd = open(at("bin/open"), O_WRONLY | O_CREAT, 0644);
	fchmod(fd, 0666);
	close(fd);
	fd = open(at("group/tool"), O_WRONLY | O_CREAT, 0755);
	close(fd);
	if (symlink(at("group"), at("link")) < 0 ||
	    symlink(at("bin"), at("good-link")) < 0 ||
	    symlink(at("user/later"), at("bin/dangling")) < 0 ||
	    symlink("missing", at("bin/dangling-here")) < 0 ||
	    symlink(at("bin/dangling"), at("bin/dangling-twice")) < 0)
		CU_FAIL("symlink");
}

static void remove_tree(void)
{
	const char *files[] = { "bin/tool", "bin/open", "group/tool", "link",
				"good-link", "bin/dangling", "bin/dangling-here",
				"bin/dangling-twice" };
	const char *dirs[] = { "bin", "group", "sticky", "user", "made" };

	if (!have_tree())
		return;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		unlink(at(files[i]));
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		rmdir(at(dirs[i]));
	rmdir(base);
}

static int check(const char *path)
{
	err[0] = '\0';
	return dt_admin_path_check("helper", path, err, sizeof(err));
}

static void test_refused_anywhere(void)
{
	CU_ASSERT_EQUAL(check("dist-train"), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not an absolute path"));
	/* /tmp is sticky and everyone's. */
	CU_ASSERT_EQUAL(check("/tmp/dist-train"), -1);
	CU_ASSERT_STRING_EQUAL(err, "helper=/tmp/dist-train: /tmp can be "
			       "written by others than root (mode 1777): put "
			       "it where only root can write: every folder "
			       "above it root's, mode 755, such as "
			       "/usr/local/bin or /etc/dist-train");
	/* Root's folders, and what is missing below them. */
	CU_ASSERT_EQUAL(check("/usr/bin"), 0);
	CU_ASSERT_EQUAL(check("/nonexistent/dist-train"), 0);
}

static void test_root_tree(void)
{
	if (!have_tree()) {
		fprintf(stderr, "(not root: the tree in /run is skipped) ");
		return;
	}
	CU_ASSERT_EQUAL(check(at("bin/tool")), 0);
	CU_ASSERT_EQUAL(check(at("bin/missing/tool")), 0);
	CU_ASSERT_EQUAL(check(at("good-link/tool")), 0);

	CU_ASSERT_EQUAL(check(at("bin/open")), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "bin/open can be written by "
				      "others than root (mode 0666)"));
	CU_ASSERT_EQUAL(check(at("group/tool")), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "group can be written by others "
				      "than root (mode 0775)"));
	CU_ASSERT_EQUAL(check(at("sticky/tool")), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "(mode 1777)"));
	CU_ASSERT_EQUAL(check(at("user/tool")), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "user belongs to uid 65534, not "
				      "root"));
	/* Named through a link, refused where the link leads. */
	CU_ASSERT_EQUAL(check(at("link/tool")), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "group can be written by others "
				      "than root"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "link/tool: "));
	/* A link to a file not made yet, in a folder a user owns: the user
	 * could make it later. Through two links too; one that leads to a
	 * missing file in root's own folder is fine. */
	CU_ASSERT_EQUAL(check(at("bin/dangling")), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "user belongs to uid 65534"));
	CU_ASSERT_EQUAL(check(at("bin/dangling-twice")), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "user belongs to uid 65534"));
	CU_ASSERT_EQUAL(check(at("bin/dangling-here")), 0);
}

static void test_all_settings(void)
{
	struct dt_config cfg;

	if (!have_tree())
		return;
	dt_config_init(&cfg);
	snprintf(cfg.helper, sizeof(cfg.helper), "%s", at("bin/tool"));
	snprintf(cfg.worker_lib, sizeof(cfg.worker_lib), "%s",
		 at("bin/dist_train_worker.so"));
	snprintf(cfg.topology_cache, sizeof(cfg.topology_cache), "%s",
		 at("made/machine"));
	CU_ASSERT_EQUAL(dt_admin_paths_check(&cfg, err, sizeof(err)), 0);
	/* The cache file is the plugin's to replace: only its folders. */
	snprintf(cfg.topology_cache, sizeof(cfg.topology_cache), "%s",
		 at("bin/open"));
	CU_ASSERT_EQUAL(dt_admin_paths_check(&cfg, err, sizeof(err)), 0);
	snprintf(cfg.topology_cache, sizeof(cfg.topology_cache), "%s",
		 at("group/machine"));
	CU_ASSERT_EQUAL(dt_admin_paths_check(&cfg, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "group/machine: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "group can be written by others "
				      "than root (mode 0775)"));
	snprintf(cfg.topology_cache, sizeof(cfg.topology_cache), "%s",
		 at("made/machine"));
	snprintf(cfg.topology, sizeof(cfg.topology), "%s",
		 at("group/node.xml"));
	CU_ASSERT_EQUAL(dt_admin_paths_check(&cfg, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "topology="));
	cfg.topology[0] = '\0';
	snprintf(cfg.worker_lib, sizeof(cfg.worker_lib), "%s",
		 at("sticky/dist_train_worker.so"));
	CU_ASSERT_EQUAL(dt_admin_paths_check(&cfg, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "worker-lib="));
}

static void test_dir_open(void)
{
	struct stat st;
	int fd;

	if (!have_tree())
		return;
	CU_ASSERT_EQUAL(dt_admin_dir_open("topology-cache", at("made"), false,
					  err, sizeof(err)), -2);
	fd = dt_admin_dir_open("topology-cache", at("made"), true, err,
			       sizeof(err));
	CU_ASSERT_TRUE(fd >= 0);
	CU_ASSERT_TRUE(fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) &&
		       (st.st_mode & 07777) == 0755 && st.st_uid == 0);
	if (fd >= 0)
		close(fd);
	fd = dt_admin_dir_open("topology-cache", at("good-link"), false, err,
			       sizeof(err));
	CU_ASSERT_TRUE(fd >= 0);
	if (fd >= 0)
		close(fd);
	CU_ASSERT_EQUAL(dt_admin_dir_open("topology-cache", at("sticky"),
					  false, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "topology-cache="));
	CU_ASSERT_EQUAL(dt_admin_dir_open("topology-cache", at("link"), true,
					  err, sizeof(err)), -1);
	CU_ASSERT_EQUAL(dt_admin_dir_open("topology-cache",
					  at("bin/missing/made"), true, err,
					  sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot open the folder"));
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_refused_anywhere),
	UNIT_TEST(test_root_tree),
	UNIT_TEST(test_all_settings),
	UNIT_TEST(test_dir_open),
};

int main(void)
{
	int rc;

	make_tree();
	rc = unit_main("admin_path", tests, sizeof(tests) / sizeof(tests[0]));
	remove_tree();
	return rc;
}
