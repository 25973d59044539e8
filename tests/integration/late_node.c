/*
 * For the integration tests only, never installed: a SPANK plugin put
 * before dist_train.so in plugstack.conf (test_plugin in lib.sh)
 * that holds back every task of the nodes named in the job's DT_TEST_SLOW
 * (space-separated) for DT_TEST_DELAY seconds in task_init, just before
 * dist_train.so's, as a node slow to start its tasks would be. The start
 * barrier runs in the tasks themselves (plugin/leader.c): a late helper
 * no longer makes a late node.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(late_node, 1);

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	char slow[512] = " ", delay[16], host[256] = "";
	size_t len;

	(void)ac, (void)av;
	if (spank_getenv(sp, "DT_TEST_SLOW", slow + 1, sizeof(slow) - 2) !=
	    ESPANK_SUCCESS ||
	    spank_getenv(sp, "DT_TEST_DELAY", delay, sizeof(delay)) !=
	    ESPANK_SUCCESS || gethostname(host, sizeof(host) - 2) < 0)
		return 0;
	len = strlen(slow);
	slow[len] = ' ';
	slow[len + 1] = '\0';
	len = strlen(host);
	memmove(host + 1, host, len + 1);
	host[0] = ' ';
	host[len + 1] = ' ';
	host[len + 2] = '\0';
	if (strstr(slow, host))
		sleep((unsigned)atoi(delay));
	return 0;
}
