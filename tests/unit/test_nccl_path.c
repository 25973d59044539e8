/* Where the NCCL check looks for a Python program's own libnccl. */
#include "config.h"

#include <string.h>

#include "unit.h"
#include "../../common/nccl_path.h"

#define PIP_NCCL "/nvidia/nccl/lib/libnccl.so.2"
#define NCCL_REL (PIP_NCCL + 1)

static void test_is_python(void)
{
	CU_ASSERT_TRUE(dt_is_python("python3"));
	CU_ASSERT_TRUE(dt_is_python("/venv/bin/python3.11"));
	CU_ASSERT_TRUE(dt_is_python("python"));
	CU_ASSERT_FALSE(dt_is_python("/usr/bin/torchrun"));
	CU_ASSERT_FALSE(dt_is_python("./train"));
	CU_ASSERT_FALSE(dt_is_python("/opt/python3/bin/app"));
	CU_ASSERT_FALSE(dt_is_python(""));
	CU_ASSERT_FALSE(dt_is_python(NULL));
}

static void test_interpreter_first(void)
{
	char out[DT_NCCL_CANDIDATES_MAX][DT_NCCL_PATH_MAX];
	int n = dt_nccl_candidates(NCCL_REL, "/venv/bin/python3",
				   "/usr/bin/python3.11", "/other",
				   "/opt/conda", out, DT_NCCL_CANDIDATES_MAX);

	CU_ASSERT_EQUAL_FATAL(n, 8);
	CU_ASSERT_STRING_EQUAL(out[0], "/venv/lib/python3*/site-packages"
			       PIP_NCCL);
	CU_ASSERT_STRING_EQUAL(out[1], "/venv/lib/python3*/dist-packages"
			       PIP_NCCL);
	CU_ASSERT_STRING_EQUAL(out[2], "/usr/lib/python3*/site-packages"
			       PIP_NCCL);
	CU_ASSERT_STRING_EQUAL(out[4], "/other/lib/python3*/site-packages"
			       PIP_NCCL);
	CU_ASSERT_STRING_EQUAL(out[6], "/opt/conda/lib/python3*/site-packages"
			       PIP_NCCL);
}

static void test_once_and_absolute(void)
{
	char out[DT_NCCL_CANDIDATES_MAX][DT_NCCL_PATH_MAX];
	int n;

	/* The same environment thrice is listed once; a trailing slash,
	 * a relative path or none adds nothing. */
	n = dt_nccl_candidates(NCCL_REL, "/venv/bin/python3",
			       "/venv/bin/python3", "/venv/", NULL, out,
			       DT_NCCL_CANDIDATES_MAX);
	CU_ASSERT_EQUAL(n, 2);
	n = dt_nccl_candidates(NCCL_REL, "python3", "bin/python3", "venv", "",
			       out, DT_NCCL_CANDIDATES_MAX);
	CU_ASSERT_EQUAL(n, 0);
	n = dt_nccl_candidates(NCCL_REL, NULL, NULL, NULL, NULL, out,
			       DT_NCCL_CANDIDATES_MAX);
	CU_ASSERT_EQUAL(n, 0);
	/* An interpreter in /bin: its environment is the root. */
	n = dt_nccl_candidates(NCCL_REL, "/bin/python3", NULL, NULL, NULL,
			       out, 1);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_STRING_EQUAL(out[0], "/lib/python3*/site-packages"
			       PIP_NCCL);
}

/* ROCm's PyTorch brings RCCL in torch/lib; no pip path, no candidates. */
static void test_rccl(void)
{
	char out[DT_NCCL_CANDIDATES_MAX][DT_NCCL_PATH_MAX];
	int n = dt_nccl_candidates("torch/lib/librccl.so", "/venv/bin/python3",
				   NULL, NULL, NULL, out,
				   DT_NCCL_CANDIDATES_MAX);

	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(out[0], "/venv/lib/python3*/site-packages/"
			       "torch/lib/librccl.so");
	CU_ASSERT_EQUAL(dt_nccl_candidates(NULL, "/venv/bin/python3", NULL,
					   NULL, NULL, out, 8), 0);
	CU_ASSERT_EQUAL(dt_nccl_candidates("", "/venv/bin/python3", NULL,
					   NULL, NULL, out, 8), 0);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_is_python),
	UNIT_TEST(test_interpreter_first),
	UNIT_TEST(test_once_and_absolute),
	UNIT_TEST(test_rccl),
};

UNIT_MAIN("nccl_path", tests)
