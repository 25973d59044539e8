/* The cached machine: text and back, staleness, bounds, restriction. */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "../../common/machine_cache.h"
#include "../../common/gpu_vendor.h"

#define FP "boot=1 cpus=0-7 nodes=0-1 pci=3:abcd net=2:ef01"

/* 4 cores of 2 PUs (0+4, 1+5, 2+6, 3+7), NUMA 0 and 1, a GPU, 2 NICs. */
static void sample(struct dt_machine *m)
{
	static const unsigned pus[] = { 0, 4, 1, 5, 2, 6, 3, 7 };

	memset(m, 0, sizeof(*m));
	m->ncores = 4;
	m->cores = calloc(4, sizeof(*m->cores));
	m->npus = 8;
	m->pus = malloc(sizeof(pus));
	memcpy(m->pus, pus, sizeof(pus));
	for (unsigned c = 0; c < 4; c++) {
		m->cores[c].numa = (int)(c / 2);
		m->cores[c].first_pu = 2 * c;
		m->cores[c].npus = 2;
	}
	m->nnumas = 2;
	m->numas = calloc(2, sizeof(*m->numas));
	m->numas[1] = 1;
	m->ngpus = 1;
	m->gpus = calloc(1, sizeof(*m->gpus));
	strcpy(m->gpus[0].busid, "0000:03:00.0");
	m->gpus[0].numa = 1;
	m->gpus[0].minor = 0;
	m->nnics = 2;
	m->nics = calloc(2, sizeof(*m->nics));
	strcpy(m->nics[0].name, "mlx5_0");
	strcpy(m->nics[0].netdev, "ib0");
	strcpy(m->nics[0].busid, "0000:04:00.0");
	m->nics[0].kind = DT_NIC_RDMA;
	m->nics[0].numa = 1;
	m->nics[0].port = 1;
	strcpy(m->nics[1].name, "eth0");
	m->nics[1].kind = DT_NIC_ETHERNET;
	m->nics[1].numa = -1;
	m->nics[1].port = 1;
	m->gpu_nic_hops = calloc(2, sizeof(*m->gpu_nic_hops));
	m->gpu_nic_hops[0] = 2;
	m->gpu_nic_hops[1] = 7;
}

static char *text_of(const struct dt_machine *m)
{
	size_t len = dt_machine_format(m, FP, NULL, 0);
	char *text = malloc(len + 1);

	CU_ASSERT_FATAL(text != NULL);
	CU_ASSERT_EQUAL(dt_machine_format(m, FP, text, len + 1), len);
	return text;
}

static void test_round_trip(void)
{
	struct dt_machine m, back;
	char *text, err[256];

	sample(&m);
	text = text_of(&m);
	CU_ASSERT_FATAL(dt_machine_parse(text, strlen(text), FP, &back, err,
					 sizeof(err)) == 0);
	CU_ASSERT_EQUAL(back.ncores, 4);
	CU_ASSERT_EQUAL(back.npus, 8);
	CU_ASSERT_EQUAL(memcmp(back.pus, m.pus, 8 * sizeof(*m.pus)), 0);
	CU_ASSERT_EQUAL(back.cores[3].numa, 1);
	CU_ASSERT_EQUAL(back.cores[3].first_pu, 6);
	CU_ASSERT_EQUAL(back.nnumas, 2);
	CU_ASSERT_EQUAL(back.numas[1], 1);
	CU_ASSERT_EQUAL(back.ngpus, 1);
	CU_ASSERT_STRING_EQUAL(back.gpus[0].busid, "0000:03:00.0");
	CU_ASSERT_EQUAL(back.gpus[0].minor, 0);
	CU_ASSERT_EQUAL(back.nnics, 2);
	CU_ASSERT_STRING_EQUAL(back.nics[0].netdev, "ib0");
	CU_ASSERT_EQUAL(back.nics[0].kind, DT_NIC_RDMA);
	CU_ASSERT_STRING_EQUAL(back.nics[1].netdev, "");
	CU_ASSERT_STRING_EQUAL(back.nics[1].busid, "");
	CU_ASSERT_EQUAL(back.nics[1].numa, -1);
	CU_ASSERT_EQUAL(back.gpu_nic_hops[1], 7);
	CU_ASSERT_EQUAL(back.gpu_vendor, DT_GPU_NVIDIA);
	free(text);
	dt_machine_free(&back);

	/* An AMD node stays one, its GPUs in the order they were cached. */
	m.gpu_vendor = DT_GPU_AMD;
	m.gpus[0].minor = -1;
	text = text_of(&m);
	CU_ASSERT_FATAL(dt_machine_parse(text, strlen(text), FP, &back, err,
					 sizeof(err)) == 0);
	CU_ASSERT_EQUAL(back.gpu_vendor, DT_GPU_AMD);
	CU_ASSERT_EQUAL(back.gpus[0].minor, -1);
	free(text);
	dt_machine_free(&m);
	dt_machine_free(&back);
}

static void test_stale(void)
{
	struct dt_machine m, back;
	char *text, err[256];

	sample(&m);
	text = text_of(&m);
	memset(&back, 0x5a, sizeof(back));
	CU_ASSERT_EQUAL(dt_machine_parse(text, strlen(text),
					 "boot=2 cpus=0-7", &back, err,
					 sizeof(err)), 1);
	free(text);
	dt_machine_free(&m);
}

/* Every prefix, and every byte changed, is refused or read: never more. */
static void test_malformed(void)
{
	static const char *const bad[] = {
		"",
		"dist-train machine 2\nfingerprint " FP "\n",
		"dist-train machine 2\nfingerprint " FP "\ncores 70000\n",
		"dist-train machine 2\nfingerprint " FP "\ncores 1\n0 \n",
		"dist-train machine 2\nfingerprint " FP "\ncores 1\n0 1,\n",
		"dist-train machine 2\nfingerprint " FP "\ncores 1\n0 99999999\n",
		"dist-train machine 2\nfingerprint " FP "\ncores 0\n"
		"gpu-vendor NVIDIA\ngpus 0\nnics 1\nx - - q 0 1\nhops\nend\n",
		"dist-train machine 2\nfingerprint " FP "\ncores 0\n"
		"gpu-vendor NVIDIA\ngpus 1\n0000:03:00.0 0 0\nnics 1\n"
		"eth0 - - e -1 1\nhops\nend\n",
		/* A vendor not in the table, none, and the format before
		 * vendors (a cache of an older plugin). */
		"dist-train machine 2\nfingerprint " FP "\ncores 0\n"
		"gpu-vendor Intel\ngpus 0\nnics 0\nhops\nend\n",
		"dist-train machine 2\nfingerprint " FP "\ncores 0\n"
		"gpus 0\nnics 0\nhops\nend\n",
		"dist-train machine 1\nfingerprint " FP "\ncores 0\n"
		"gpus 0\nnics 0\nhops\nend\n",
	};
	struct dt_machine m, back;
	char *text, err[256];
	size_t len;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CU_ASSERT_EQUAL(dt_machine_parse(bad[i], strlen(bad[i]), FP,
						 &back, err, sizeof(err)), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "cached machine"));
	}
	sample(&m);
	text = text_of(&m);
	len = strlen(text);
	for (size_t n = 0; n < len; n++) {
		int rc = dt_machine_parse(text, n, FP, &back, err,
					  sizeof(err));

		CU_ASSERT(rc == -1 || rc == 1);
	}
	for (size_t n = 0; n < len; n++) {
		char saved = text[n];
		int rc;

		text[n] = '\0';
		rc = dt_machine_parse(text, len, FP, &back, err, sizeof(err));
		CU_ASSERT(rc == -1 || rc == 1);
		text[n] = saved;
	}
	CU_ASSERT_EQUAL(dt_machine_parse(text, DT_MACHINE_TEXT_MAX + 1, FP,
					 &back, err, sizeof(err)), -1);
	free(text);
	dt_machine_free(&m);
}

static void test_restrict(void)
{
	struct dt_machine m, r;
	bool allowed[8] = { 0 };
	char err[256];

	sample(&m);
	/* The cgroup gives PUs 1, 5, 2 and 3: cores 1, 2, 3 stay, renumbered
	 * 0, 1, 2, and core 3 keeps only PU 3. */
	allowed[1] = allowed[5] = allowed[2] = allowed[3] = true;
	CU_ASSERT_FATAL(dt_machine_restrict(&m, allowed, 8, NULL, &r, err,
					    sizeof(err)) == 0);
	CU_ASSERT_EQUAL(r.ncores, 3);
	CU_ASSERT_EQUAL(r.npus, 4);
	CU_ASSERT_EQUAL(r.pus[r.cores[0].first_pu], 1);
	CU_ASSERT_EQUAL(r.cores[0].npus, 2);
	CU_ASSERT_EQUAL(r.cores[2].npus, 1);
	CU_ASSERT_EQUAL(r.nnumas, 2);
	CU_ASSERT_EQUAL(r.ngpus, 1);
	CU_ASSERT_EQUAL(r.gpu_nic_hops[1], 7);
	dt_machine_free(&r);

	/* Slurm's cores 1-2 of those three: the last two. */
	CU_ASSERT_FATAL(dt_machine_restrict(&m, allowed, 8, "1-2", &r, err,
					    sizeof(err)) == 0);
	CU_ASSERT_EQUAL(r.ncores, 2);
	CU_ASSERT_EQUAL(r.pus[r.cores[0].first_pu], 2);
	CU_ASSERT_EQUAL(r.nnumas, 1);
	CU_ASSERT_EQUAL(r.numas[0], 1);
	dt_machine_free(&r);

	/* A list naming a core this topology lacks is not this machine's. */
	CU_ASSERT_FATAL(dt_machine_restrict(&m, allowed, 8, "0,3", &r, err,
					    sizeof(err)) == 0);
	CU_ASSERT_EQUAL(r.ncores, 3);
	dt_machine_free(&r);
	dt_machine_free(&m);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_round_trip),
	UNIT_TEST(test_stale),
	UNIT_TEST(test_malformed),
	UNIT_TEST(test_restrict),
};

UNIT_MAIN("machine_cache", tests)
