/* The start barrier's messages and its "who is missing" summary. */
#include "config.h"

#include <string.h>

#include "unit.h"
#include "../../common/rendezvous.h"

static void test_hello_round_trip(void)
{
	struct dt_rdv_hello h = { 5, 8, "gpu-node017", true }, back;
	char line[DT_RDV_LINE_MAX];

	CU_ASSERT_EQUAL(dt_rdv_format_hello(line, sizeof(line), &h), 23);
	CU_ASSERT_STRING_EQUAL(line, "DTB1 5 8 gpu-node017 1\n");
	line[strlen(line) - 1] = '\0';
	CU_ASSERT_EQUAL(dt_rdv_parse_hello(line, &back), 0);
	CU_ASSERT_EQUAL(back.rank, 5);
	CU_ASSERT_EQUAL(back.world, 8);
	CU_ASSERT_STRING_EQUAL(back.host, "gpu-node017");
	CU_ASSERT_TRUE(back.nccl_ok);
}

static void test_bad_hellos(void)
{
	static const char *const bad[] = {
		"", "DTB1", "DTB1 1 2 h", "DTB1 1 2 h 2", "DTB1 2 2 h 0",
		"DTB1 -1 2 h 0", "DTB1 1 2  0", "DTB2 1 2 h 0",
		"DTB1 1 2 h 0 extra", "GET / HTTP/1.1", "DTB1 1 99999999999 h 0",
		"DTB1 1x 2 h 0",
	};
	struct dt_rdv_hello h;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CU_ASSERT_EQUAL(dt_rdv_parse_hello(bad[i], &h), -1);
	/* A host name with a blank cannot be sent. */
	struct dt_rdv_hello blank = { 1, 2, "a b", false };
	char line[DT_RDV_LINE_MAX];

	CU_ASSERT_EQUAL(dt_rdv_format_hello(line, sizeof(line), &blank), -1);
}

static void test_replies(void)
{
	struct dt_rdv_reply ok = { .ok = true, .address = "10.1.2.3",
				   .nccl_port = 20257, .nccl_check = true };
	struct dt_rdv_reply fail = { .ok = false };
	struct dt_rdv_reply back;
	char line[DT_RDV_LINE_MAX];

	CU_ASSERT(dt_rdv_format_reply(line, sizeof(line), &ok) > 0);
	CU_ASSERT_STRING_EQUAL(line, "OK 10.1.2.3 20257 1\n");
	line[strlen(line) - 1] = '\0';
	CU_ASSERT_EQUAL(dt_rdv_parse_reply(line, &back), 0);
	CU_ASSERT_TRUE(back.ok && back.nccl_check);
	CU_ASSERT_STRING_EQUAL(back.address, "10.1.2.3");
	CU_ASSERT_EQUAL(back.nccl_port, 20257);

	snprintf(fail.message, sizeof(fail.message), "2 of 8 ranks did not "
		 "arrive");
	CU_ASSERT(dt_rdv_format_reply(line, sizeof(line), &fail) > 0);
	line[strlen(line) - 1] = '\0';
	CU_ASSERT_EQUAL(dt_rdv_parse_reply(line, &back), 0);
	CU_ASSERT_FALSE(back.ok);
	CU_ASSERT_STRING_EQUAL(back.message, "2 of 8 ranks did not arrive");

	CU_ASSERT_EQUAL(dt_rdv_parse_reply("OK fe80::1 0 0", &back), 0);
	CU_ASSERT_EQUAL(dt_rdv_parse_reply("OK 1.2.3.4 65536 0", &back), -1);
	CU_ASSERT_EQUAL(dt_rdv_parse_reply("OK 1.2.3.4 1 2", &back), -1);
	CU_ASSERT_EQUAL(dt_rdv_parse_reply("OK  1 0", &back), -1);
	CU_ASSERT_EQUAL(dt_rdv_parse_reply("MAYBE", &back), -1);
	strcpy(fail.message, "two\nlines");
	CU_ASSERT_EQUAL(dt_rdv_format_reply(line, sizeof(line), &fail), -1);
}

static const char *const hosts[] = {
	"n1", "n1", "n1", "n1", "n1", "n2", "n3", "n3", "n4", NULL,
};

static const char *host_of(uint32_t rank, void *arg)
{
	(void)arg;
	return rank < 10 ? hosts[rank] : NULL;
}

static void test_missing_summary(void)
{
	bool arrived[10] = { true, true, false, false, true, true, false,
			     false, false, false };
	char buf[256];

	CU_ASSERT_EQUAL(dt_rdv_describe_missing(arrived, 10, host_of, NULL,
						buf, sizeof(buf)), 6);
	CU_ASSERT_STRING_EQUAL(buf, "ranks 2-3 (n1), ranks 6-7 (n3), "
			       "rank 8 (n4), rank 9");
	CU_ASSERT_EQUAL(dt_rdv_describe_missing(arrived, 10, NULL, NULL, buf,
						sizeof(buf)), 6);
	CU_ASSERT_STRING_EQUAL(buf, "ranks 2-3, ranks 6-9");
	/* Too long: cut, and says so. */
	CU_ASSERT_EQUAL(dt_rdv_describe_missing(arrived, 10, host_of, NULL,
						buf, 24), 6);
	CU_ASSERT_STRING_EQUAL(buf, "ranks 2-3 (n1), ...");
}

static void test_missing_many(void)
{
	static bool arrived[100000];
	char buf[1024];

	memset(arrived, 1, sizeof(arrived));
	for (int i = 0; i < 100000; i += 2)
		arrived[i] = false;
	CU_ASSERT_EQUAL(dt_rdv_describe_missing(arrived, 100000, NULL, NULL,
						buf, sizeof(buf)), 50000);
	CU_ASSERT(strlen(buf) < sizeof(buf));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, ", ..."));
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_hello_round_trip),
	UNIT_TEST(test_bad_hellos),
	UNIT_TEST(test_replies),
	UNIT_TEST(test_missing_summary),
	UNIT_TEST(test_missing_many),
};

UNIT_MAIN("rendezvous", tests)
