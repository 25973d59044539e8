/*
 * Shared by the unit test programs: each defines its suites with
 * UNIT_SUITE() entries and calls unit_main(), which runs them with CUnit's
 * basic interface and exits non-zero when an assertion failed.
 */
#ifndef DIST_TRAIN_UNIT_H
#define DIST_TRAIN_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>

#include "../peak_memory.h"

struct unit_test {
	const char *name;
	CU_TestFunc fn;
};

#define UNIT_TEST(fn) { #fn, fn }

/* LEN bytes of "a,a,...,a": what a forged launch could put in a variable
 * that slurmstepd reads. NULL without memory; the caller frees it. */
static inline char *unit_huge_text(size_t len)
{
	char *text = malloc(len + 1);

	if (!text)
		return NULL;
	for (size_t i = 0; i + 1 < len; i += 2)
		memcpy(text + i, "a,", 2);
	text[len - 1] = 'a';
	text[len] = '\0';
	return text;
}

static inline int unit_main(const char *suite, const struct unit_test *tests,
			    size_t n)
{
	CU_pSuite s;
	unsigned failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 99;
	s = CU_add_suite(suite, NULL, NULL);
	if (!s)
		return 99;
	for (size_t i = 0; i < n; i++)
		if (!CU_add_test(s, tests[i].name, tests[i].fn))
			return 99;
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() +
		 CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}

#define UNIT_MAIN(suite, tests) \
	int main(void) \
	{ \
		return unit_main(suite, tests, sizeof(tests) / sizeof(tests[0])); \
	}

#endif
