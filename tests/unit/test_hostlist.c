/*
 * Host list expansion. Expected outputs were taken from
 * `scontrol show hostnames` of Slurm 22.05.8; tests/hostlist-vs-scontrol
 * compares against it on random lists as well.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "unit.h"
#include "../../common/hostlist.h"

/* What follows each bad range's reason. */
#define RANGE_FIX "): write each range as N or LOW-HIGH, such as n[1-4,7]"

static char joined[1 << 16];

static int join(const char *name, size_t len, void *arg)
{
	size_t *used = arg;

	if (*used + len + 2 > sizeof(joined))
		return 1;
	if (*used)
		joined[(*used)++] = ' ';
	memcpy(joined + *used, name, len);
	*used += len;
	joined[*used] = '\0';
	return 0;
}

/* "a b c", or "ERR: why" */
static const char *expand(const char *list)
{
	struct dt_hostlist *hl;
	char err[256];
	size_t used = 0;

	joined[0] = '\0';
	if (dt_hostlist_parse(list, &hl, err, sizeof(err)) < 0) {
		snprintf(joined, sizeof(joined), "ERR: %s", err);
		return joined;
	}
	dt_hostlist_foreach(hl, join, &used);
	dt_hostlist_free(hl);
	return joined;
}

static void test_single_ranges(void)
{
	CU_ASSERT_STRING_EQUAL(expand("n[1-3]"), "n1 n2 n3");
	CU_ASSERT_STRING_EQUAL(expand("n[8-12]"), "n8 n9 n10 n11 n12");
	CU_ASSERT_STRING_EQUAL(expand("gpu[001-003,020]"),
			       "gpu001 gpu002 gpu003 gpu020");
	CU_ASSERT_STRING_EQUAL(expand("n[3,1,2]"), "n3 n1 n2");
	CU_ASSERT_STRING_EQUAL(expand("[1-3]"), "1 2 3");
	CU_ASSERT_STRING_EQUAL(expand("n[7]"), "n7");
}

static void test_padding_follows_low_bound(void)
{
	CU_ASSERT_STRING_EQUAL(expand("n[010-012]"), "n010 n011 n012");
	CU_ASSERT_STRING_EQUAL(expand("n[01-3]"), "n01 n02 n03");
	CU_ASSERT_STRING_EQUAL(expand("n[1-03]"), "n1 n2 n3");
	CU_ASSERT_STRING_EQUAL(expand("n[098-101]"), "n098 n099 n100 n101");
}

static void test_separators_order_duplicates(void)
{
	CU_ASSERT_STRING_EQUAL(expand("a,b,,c d\te"), "a b c d e");
	CU_ASSERT_STRING_EQUAL(expand("n[3,1,2],n1"), "n3 n1 n2 n1");
	CU_ASSERT_STRING_EQUAL(expand(" n[1-2], "), "n1 n2");
	CU_ASSERT_STRING_EQUAL(expand("z1,a[1-2],z1"), "z1 a1 a2 z1");
	CU_ASSERT_STRING_EQUAL(expand("login,node-a,n01"),
			       "login node-a n01");
	CU_ASSERT_STRING_EQUAL(expand(""), "");
	CU_ASSERT_STRING_EQUAL(expand(" , "), "");
}

/* Slurm's order: last group fastest, then the first, second, ... */
static void test_several_groups(void)
{
	CU_ASSERT_STRING_EQUAL(expand("rack[1-2]-node[01-02]"),
			       "rack1-node01 rack1-node02 "
			       "rack2-node01 rack2-node02");
	CU_ASSERT_STRING_EQUAL(expand("x[1-2]y[3-4]z[5-6]"),
			       "x1y3z5 x1y3z6 x2y3z5 x2y3z6 "
			       "x1y4z5 x1y4z6 x2y4z5 x2y4z6");
	/* Three groups and a suffix: as scontrol 24.11 orders them. */
	CU_ASSERT_STRING_EQUAL(expand("w[1-2]x[3-4]y[5-6]z7"),
			       "w1x3y5z7 w1x3y6z7 w2x3y5z7 w2x3y6z7 "
			       "w1x4y5z7 w1x4y6z7 w2x4y5z7 w2x4y6z7");
	CU_ASSERT_STRING_EQUAL(expand("w[1-2]x[3-4]y[5-6]z[7]"),
			       "w1x3y5z7 w2x3y5z7 w1x4y5z7 w2x4y5z7 "
			       "w1x3y6z7 w2x3y6z7 w1x4y6z7 w2x4y6z7");
	CU_ASSERT_STRING_EQUAL(expand("n[1-2][3]"), "n13 n23");
	CU_ASSERT_STRING_EQUAL(expand("a[1,3]b[2],c[5-6]"),
			       "a1b2 a3b2 c5 c6");
}

static void test_rejects_what_slurm_rejects(void)
{
	CU_ASSERT_STRING_EQUAL(expand("n[3-1]"),
			       "ERR: bad range '3-1' in '[3-1]' (the range "
			       "runs backwards" RANGE_FIX);
	CU_ASSERT_STRING_EQUAL(expand("n[]"),
			       "ERR: bad range '' in '[]' (expected a number"
			       RANGE_FIX);
	CU_ASSERT_STRING_EQUAL(expand("n[1,,2]"),
			       "ERR: bad range '' in '[1,,2]' (expected a "
			       "number" RANGE_FIX);
	CU_ASSERT_STRING_EQUAL(expand("n[-1]"),
			       "ERR: bad range '-1' in '[-1]' (expected a "
			       "number" RANGE_FIX);
	CU_ASSERT_STRING_EQUAL(expand("n[a-b]"),
			       "ERR: bad range 'a-b' in '[a-b]' (expected a "
			       "number" RANGE_FIX);
	/* A suffix: Slurm 24.11 and later (22.05 refuses it). */
	CU_ASSERT_STRING_EQUAL(expand("n[1-3].ib"), "n1.ib n2.ib n3.ib");
	CU_ASSERT_STRING_EQUAL(expand("r[1-2]n[08-09]-ib0,x"),
			       "r1n08-ib0 r1n09-ib0 r2n08-ib0 r2n09-ib0 x");
	CU_ASSERT_STRING_EQUAL(expand("n[1-2]]"),
			       "ERR: ']' without a matching '[' in 'n[1-2]]': "
			       "remove it, or open the bracket");
	/* 65536 hosts in one range is Slurm's limit; 65537 is refused. */
	CU_ASSERT_STRING_EQUAL(expand("n[0-65536]"),
			       "ERR: bad range '0-65536' in '[0-65536]' (one "
			       "range may hold at most 65536 hosts, as in "
			       "Slurm" RANGE_FIX);
	CU_ASSERT_STRING_EQUAL(expand("a[0-32768,40000-72767]b[1]"),
			       "ERR: a bracket group followed by another may "
			       "hold at most 65536 hosts, as in Slurm: write "
			       "the names as several lists");
}

/* Garbage that scontrol turns into odd names is an error here. */
static void test_stricter_than_slurm(void)
{
	CU_ASSERT_STRING_EQUAL(expand("n[1-"),
			       "ERR: '[' without a matching ']' in 'n[1-': "
			       "close the bracket");
	CU_ASSERT_STRING_EQUAL(expand("n]1["),
			       "ERR: ']' without a matching '[' in 'n]1[': "
			       "remove it, or open the bracket");
	CU_ASSERT_STRING_EQUAL(expand("a[[1]]"),
			       "ERR: '[' without a matching ']' in 'a[[1]]': "
			       "close the bracket");
	CU_ASSERT_STRING_EQUAL(expand("n[ 1-2]"),
			       "ERR: blank inside brackets in 'n[ 1-2]': "
			       "remove it");
	CU_ASSERT_STRING_EQUAL(expand("n[+1]"),
			       "ERR: bad range '+1' in '[+1]' (expected a "
			       "number" RANGE_FIX);
	CU_ASSERT_STRING_EQUAL(expand("n[99999999999999999999]"),
			       "ERR: bad range '99999999999999999999' in "
			       "'[99999999999999999999]' (expected a number"
			       RANGE_FIX);
	/* Shown escaped, as every message is (common/error.h). */
	CU_ASSERT_STRING_EQUAL(expand("a\nb"),
			       "ERR: control character in host name "
			       "'a\\x0ab': remove it");
}

static void test_count_and_nth(void)
{
	const char *list = "x[1-2]y[3-4]z[5-6],solo,n[09-11]";
	struct dt_hostlist *hl;
	char name[32];

	CU_ASSERT_FATAL(dt_hostlist_parse(list, &hl, NULL, 0) == 0);
	CU_ASSERT_EQUAL(dt_hostlist_count(hl), 12);
	CU_ASSERT_EQUAL(dt_hostlist_nth(hl, 0, name, sizeof(name)), 6);
	CU_ASSERT_STRING_EQUAL(name, "x1y3z5");
	dt_hostlist_nth(hl, 4, name, sizeof(name));
	CU_ASSERT_STRING_EQUAL(name, "x1y4z5");
	dt_hostlist_nth(hl, 8, name, sizeof(name));
	CU_ASSERT_STRING_EQUAL(name, "solo");
	dt_hostlist_nth(hl, 11, name, sizeof(name));
	CU_ASSERT_STRING_EQUAL(name, "n11");
	CU_ASSERT_EQUAL(dt_hostlist_nth(hl, 12, name, sizeof(name)), -1);
	/* Truncation reports the full length, like snprintf. */
	CU_ASSERT_EQUAL(dt_hostlist_nth(hl, 0, name, 3), 6);
	CU_ASSERT_STRING_EQUAL(name, "x1");
	CU_ASSERT_EQUAL(dt_hostlist_max_name_len(hl), 6);
	dt_hostlist_free(hl);
}

static void test_million_hosts(void)
{
	char list[512] = "", name[32];
	struct dt_hostlist *hl;
	size_t used = 0;

	/* 16 tokens of 65536 hosts: 1,048,576 in all. */
	for (int i = 0; i < 16; i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used,
					 "%sr%02d-[00000-65535]",
					 i ? "," : "", i);
	CU_ASSERT_FATAL(dt_hostlist_parse(list, &hl, NULL, 0) == 0);
	CU_ASSERT_EQUAL(dt_hostlist_count(hl), 1048576);
	dt_hostlist_nth(hl, 1048575, name, sizeof(name));
	CU_ASSERT_STRING_EQUAL(name, "r15-65535");
	dt_hostlist_nth(hl, 65536, name, sizeof(name));
	CU_ASSERT_STRING_EQUAL(name, "r01-00000");
	dt_hostlist_free(hl);
}

static void test_too_many_hosts(void)
{
	CU_ASSERT_STRING_EQUAL(expand("a[0-65535]b[0-32767]"),
			       "ERR: 'a[0-65535]b[0-32767]' expands to more "
			       "than 2147483647 hosts: give a shorter list");
}

/* SLURM_HOSTFILE's first host: where -m arbitrary puts task 0. */
static void test_hostfile_first_host(void)
{
	char host[16];
	const char *text;

#define FIRST(t) dt_hostfile_first_host((t), strlen(t), host, sizeof(host))
	CU_ASSERT_EQUAL(FIRST("n3\nn1\n"), 0);
	CU_ASSERT_STRING_EQUAL(host, "n3");
	CU_ASSERT_EQUAL(FIRST("# comment\n\n  \t\nn2,n1\n"), 0);
	CU_ASSERT_STRING_EQUAL(host, "n2");
	CU_ASSERT_EQUAL(FIRST("  node[07-09,12] n1\n"), 0);
	CU_ASSERT_STRING_EQUAL(host, "node07");
	CU_ASSERT_EQUAL(FIRST("n4*2\n"), 0);
	CU_ASSERT_STRING_EQUAL(host, "n4");
	CU_ASSERT_EQUAL(FIRST("n5\r\n"), 0);
	CU_ASSERT_STRING_EQUAL(host, "n5");
	CU_ASSERT_EQUAL(FIRST(""), -1);
	CU_ASSERT_EQUAL(FIRST("# only a comment\n"), -1);
	CU_ASSERT_EQUAL(FIRST("n[1-\n"), -1);
	CU_ASSERT_EQUAL(FIRST("a-name-longer-than-sixteen\n"), -1);
	CU_ASSERT_EQUAL(FIRST("*3\n"), -1);
	/* Not terminated: only LEN bytes are read. */
	text = "n12345";
	CU_ASSERT_EQUAL(dt_hostfile_first_host(text, 2, host, sizeof(host)), 0);
	CU_ASSERT_STRING_EQUAL(host, "n1");
#undef FIRST
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_single_ranges),
	UNIT_TEST(test_padding_follows_low_bound),
	UNIT_TEST(test_separators_order_duplicates),
	UNIT_TEST(test_several_groups),
	UNIT_TEST(test_rejects_what_slurm_rejects),
	UNIT_TEST(test_stricter_than_slurm),
	UNIT_TEST(test_count_and_nth),
	UNIT_TEST(test_million_hosts),
	UNIT_TEST(test_too_many_hosts),
	UNIT_TEST(test_hostfile_first_host),
};

UNIT_MAIN("hostlist", tests)
