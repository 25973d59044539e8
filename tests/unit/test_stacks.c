/* dist-train stacks: where each rank is, and the ranks grouped by it. */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "../../common/fr_dump.h"
#include "../../common/json_read.h"
#include "../../common/rank_evidence.h"
#include "../../common/saved_files.h"
#include "../../common/stack_report.h"
#include "fr_dumps.h"

/* What Python 3.11's faulthandler writes for a process with one thread
 * besides the main one (the signal reached the main thread). */
static const char dump[] =
	"Thread 0x00007f92f42676c0 (most recent call first):\n"
	"  File \"/tmp/fh.py\", line 3 in worker\n"
	"  File \"/usr/lib/python3.11/threading.py\", line 975 in run\n"
	"\n"
	"Current thread 0x00007f92f45222c0 (most recent call first):\n"
	"  File \"/jobs/train.py\", line 6 in stuck_in_loader\n"
	"  File \"/jobs/train.py\", line 11 in <module>\n";

static void test_where_main_thread(void)
{
	char where[DT_STACK_WHERE_MAX];

	CU_ASSERT_EQUAL_FATAL(dt_stack_where(dump, strlen(dump), where,
					     sizeof(where)), 0);
	CU_ASSERT_STRING_EQUAL(where, "/jobs/train.py:6 in stuck_in_loader");
}

static void test_where_last_dump(void)
{
	/* Two signals: the file holds both dumps, the newest counts; the
	 * main thread, listed last, even where another got the signal. */
	static const char two[] =
		"Current thread 0x1 (most recent call first):\n"
		"  File \"/a.py\", line 1 in old\n"
		"\n"
		"Current thread 0x2 (most recent call first):\n"
		"  File \"/a.py\", line 9 in helper_thread\n"
		"\n"
		"Thread 0x1 (most recent call first):\n"
		"  File \"/a.py\", line 2 in new\n";
	char where[DT_STACK_WHERE_MAX];

	CU_ASSERT_EQUAL_FATAL(dt_stack_where(two, strlen(two), where,
					     sizeof(where)), 0);
	CU_ASSERT_STRING_EQUAL(where, "/a.py:2 in new");
}

static void test_where_none(void)
{
	static const char no_frame[] =
		"Current thread 0x1 (most recent call first):\n"
		"  <no Python frame>\n";
	char where[DT_STACK_WHERE_MAX];

	CU_ASSERT_EQUAL(dt_stack_where("", 0, where, sizeof(where)), -1);
	CU_ASSERT_EQUAL(dt_stack_where("garbage\n  File \"x\"", 18, where,
				       sizeof(where)), -1);
	CU_ASSERT_EQUAL_FATAL(dt_stack_where(no_frame, strlen(no_frame),
					     where, sizeof(where)), 0);
	CU_ASSERT_STRING_EQUAL(where, "<no Python frame>");
	/* Cut short: the frame line's end is missing. */
	CU_ASSERT_EQUAL_FATAL(dt_stack_where(dump, strlen(dump) - 30, where,
					     sizeof(where)), 0);
	CU_ASSERT_STRING_EQUAL(where, "/jobs/train.py:6 in stuck_in_loader");
	CU_ASSERT_EQUAL_FATAL(dt_stack_where(dump, strlen(dump) - 70, where,
					     sizeof(where)), 0);
	CU_ASSERT_STRING_EQUAL(where, "<no Python frame>");
}

static void test_group_odd_first(void)
{
	const char *ar = "c10d.py:1536 in all_reduce", *st = "t.py:6 in stuck";
	const char *where[8] = { ar, ar, ar, ar, ar, st, NULL, ar };
	size_t order[8];
	struct dt_stack_group groups[8];
	size_t n = dt_stack_group(where, 8, order, groups);

	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(groups[0].where, st);
	CU_ASSERT_EQUAL(groups[0].count, 1);
	CU_ASSERT_EQUAL(order[groups[0].first], 5);
	CU_ASSERT_STRING_EQUAL(groups[1].where, ar);
	CU_ASSERT_EQUAL(groups[1].count, 6);
	CU_ASSERT_EQUAL(order[groups[1].first], 0);
	CU_ASSERT_EQUAL(order[groups[1].first + 5], 7);
}

static void test_group_ties_by_rank(void)
{
	const char *where[4] = { "b", "a", "b", "a" };
	size_t order[4];
	struct dt_stack_group groups[4];

	CU_ASSERT_EQUAL_FATAL(dt_stack_group(where, 4, order, groups), 2);
	CU_ASSERT_STRING_EQUAL(groups[0].where, "b");
	CU_ASSERT_EQUAL(order[0], 0);
	CU_ASSERT_EQUAL(order[1], 2);
	CU_ASSERT_EQUAL(order[2], 1);
	CU_ASSERT_EQUAL(order[3], 3);
	CU_ASSERT_EQUAL(dt_stack_group(where, 0, order, groups), 0);
}

static void test_rank_ranges(void)
{
	const size_t ranks[] = { 0, 1, 2, 3, 4, 6, 9, 10 };
	char buf[64], small[10];

	dt_rank_ranges(ranks, 8, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "0-4,6,9-10");
	dt_rank_ranges(ranks, 1, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "0");
	dt_rank_ranges(ranks, 8, small, sizeof(small));
	CU_ASSERT_STRING_EQUAL(small, "0-4,6,...");
	dt_rank_ranges(ranks, 0, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "");
}

static void test_fr_torch(void)
{
	char out[DT_FR_NEWEST_MAX];

	CU_ASSERT_EQUAL(dt_fr_newest(fr_torch_2_11, sizeof(fr_torch_2_11),
				     out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "#3 nccl:all_reduce scheduled, process "
			       "group 0 (default_pg)");
}

static void test_fr_python_pickles(void)
{
	const char *want = "p2p #7 nccl:send 0->1 started, process group 0 "
			   "(default_pg)";
	char out[DT_FR_NEWEST_MAX], small[12];

	CU_ASSERT_EQUAL(dt_fr_newest(fr_python_2, sizeof(fr_python_2), out,
				     sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, want);
	CU_ASSERT_EQUAL(dt_fr_newest(fr_python_4, sizeof(fr_python_4), out,
				     sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, want);
	CU_ASSERT_EQUAL(dt_fr_newest(fr_python_4, sizeof(fr_python_4), small,
				     sizeof(small)), 0);
	CU_ASSERT_STRING_EQUAL(small, "p2p #7 nccl");
	CU_ASSERT_EQUAL(dt_fr_newest(fr_empty, sizeof(fr_empty), out,
				     sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "no collective yet");
}

/* What is not a dump of plain values is refused, whole or cut anywhere. */
static void test_fr_refused(void)
{
	const unsigned char not_dict[] = { 0x80, 0x02, 'K', 7, '.' };
	const unsigned char dangling[] = { 0x80, 0x02, 'e', '.' };
	const unsigned char unwritten[] = { 0x80, 0x02, 'h', 9, '.' };
	char out[DT_FR_NEWEST_MAX];

	CU_ASSERT_EQUAL(dt_fr_newest(fr_class, sizeof(fr_class), out,
				     sizeof(out)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "other than plain values"));
	CU_ASSERT_EQUAL(dt_fr_newest(not_dict, sizeof(not_dict), out,
				     sizeof(out)), -1);
	CU_ASSERT_STRING_EQUAL(out, "not a flight recorder dump: it has no "
			       "list of entries");
	CU_ASSERT_EQUAL(dt_fr_newest(dangling, sizeof(dangling), out,
				     sizeof(out)), -1);
	CU_ASSERT_EQUAL(dt_fr_newest(unwritten, sizeof(unwritten), out,
				     sizeof(out)), -1);
	CU_ASSERT_EQUAL(dt_fr_newest(NULL, 0, out, sizeof(out)), -1);
	for (size_t cut = 0; cut < sizeof(fr_torch_2_11); cut++)
		CU_ASSERT_EQUAL(dt_fr_newest(fr_torch_2_11, cut, out,
					     sizeof(out)), -1);
}

/* A shape of dump: HEAD, UNIT as often as it fits, then TAIL. */
struct dump_shape {
	const char *what;
	const unsigned char *head, *unit, *tail;
	size_t head_len, unit_len, tail_len;
	const char *want;	/* in what the reader says */
};

/* Literals, whose NULs count. */
#define DUMP_SHAPE(what, head, unit, tail, want)                          \
	{ what, (const unsigned char *)(head), (const unsigned char *)(unit), \
	  (const unsigned char *)(tail), sizeof(head) - 1, sizeof(unit) - 1, \
	  sizeof(tail) - 1, want }

/* A dump of LEN bytes of SHAPE; the caller frees it. */
static unsigned char *dump_of(size_t len, const struct dump_shape *shape)
{
	unsigned char *bytes = malloc(len);
	size_t at = shape->head_len;

	if (!bytes)
		return NULL;
	memcpy(bytes, shape->head, shape->head_len);
	for (; at + shape->unit_len + shape->tail_len <= len;
	     at += shape->unit_len)
		memcpy(bytes + at, shape->unit, shape->unit_len);
	/* What is left over: PROTO 2 or NONE, which grow nothing. */
	for (; at + shape->tail_len < len; at++)
		bytes[at] = at + 1 + shape->tail_len < len ? 0x80 : 0x02;
	memcpy(bytes + len - shape->tail_len, shape->tail, shape->tail_len);
	return bytes;
}

/* How many times the dump's size the reader's peak grew by; the dump
 * itself is made and touched before. */
static double peak_per_byte(const unsigned char *bytes, size_t len,
			    const char *want)
{
	char out[DT_FR_NEWEST_MAX];
	long before;

	reset_peak_memory();
	before = peak_memory_kb();
	dt_fr_newest(bytes, len, out, sizeof(out));
	if (!strstr(out, want))
		fprintf(stderr, "(it said '%s', not '%s') ", out, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
	return (peak_memory_kb() - before) * 1024.0 / (double)len;
}

/* The keys read, remembered in memo slots 0 to 5 and put out of the way
 * in a list. */
#define FR_KEYS                                                            \
	"\x80\x02]\x8c\x07" "entries\x94" "a\x8c\x11" "collective_seq_id"  \
	"\x94" "a\x8c\x0ap2p_seq_id\x94" "a\x8c\x0dprocess_group\x94" "a"  \
	"\x8c\x0eprofiling_name\x94" "a\x8c\x05state\x94" "a"

/* An entry as torch writes one, two frames too. */
#define FR_ENTRY                                                           \
	"}(\x8c\x11" "collective_seq_id" "K\x07"                           \
	"\x8c\x0eprofiling_name\x8c\x0fnccl:all_reduce"                    \
	"\x8c\x05state\x8c\x09" "completed"                                \
	"\x8c\x06" "frames](}(\x8c\x04name\x8c\x07" "forward"              \
	"\x8c\x08" "filename\x8c\x08train.py\x8c\x04lineK*u"               \
	"}(\x8c\x04name\x8c\x04step\x8c\x08" "filename\x8c\x08train.py"    \
	"\x8c\x04lineK\x09ueua"

/*
 * The reader's peak memory on 64 MiB dumps, one shaped as torch writes
 * them and the others to cost the most per byte each in its way: at
 * most about 4 times the dump (where keeping every value took 65 times,
 * 4.1 GB). Not measured under AddressSanitizer, which keeps what is
 * freed.
 */
static void test_fr_memory_bounded(void)
{
#ifdef __SANITIZE_ADDRESS__
	const size_t len = 4u << 20;
#else
	const size_t len = 64u << 20;
#endif
	static const struct dump_shape shapes[] = {
		DUMP_SHAPE("torch's", "\x80\x02}(\x8c\x07" "entries]", FR_ENTRY,
			   "u.", "#7 nccl:all_reduce completed"),
		DUMP_SHAPE("empty dicts", "\x80\x02]", "}a", ".",
			   "no list of entries"),
		DUMP_SHAPE("memo slots", "\x80\x02]N", "\x94", "a.",
			   "no list of entries"),
		DUMP_SHAPE("dicts of every key", FR_KEYS,
			   "}(h\x00Nh\x01Nh\x02Nh\x03Nh\x04Nh\x05Nua", ".",
			   "no list of entries"),
		DUMP_SHAPE("pairs of strings", FR_KEYS, "h\x00h\x01\x86" "a", ".",
			   "no list of entries"),
		DUMP_SHAPE("values outside a container", "\x80\x02(", "N", ".",
			   "too many values"),
	};
	unsigned char *bytes;
	double times, most = 0;

	/* Big blocks mapped and unmapped, as glibc does at first, so that
	 * one shape's freed memory is neither counted nor reused by the
	 * next. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	for (size_t i = 0; i < sizeof(shapes) / sizeof(*shapes); i++) {
		bytes = dump_of(len, &shapes[i]);
		CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
		times = peak_per_byte(bytes, len, shapes[i].want);
		if (i == 0)
			fprintf(stderr, "(%zu MiB dumps: ", len >> 20);
		fprintf(stderr, "%s%s x%.2f", i ? ", " : "", shapes[i].what,
			times);
		if (times > most)
			most = times;
		free(bytes);
	}
	fprintf(stderr, ") ");
#ifndef __SANITIZE_ADDRESS__
	CU_ASSERT(most <= 4.5);
#endif
}

/* A rank in torch.distributed waits in a collective; the path decides,
 * not the function's name, and a path may hold " in ". */
static void test_in_collective(void)
{
	CU_ASSERT(dt_stack_in_collective("/usr/lib/python3/dist-packages/"
					 "torch/distributed/distributed_c10d.py:"
					 "2501 in all_reduce"));
	CU_ASSERT(dt_stack_in_collective("/opt/my env/lib/torch/distributed/"
					 "c10d_logger.py:83 in wrapper"));
	CU_ASSERT(!dt_stack_in_collective("/jobs/train.py:6 in all_reduce"));
	CU_ASSERT(dt_stack_in_collective("/jobs/torch/distributed/x in y/"
					 "train.py:6 in step"));
	CU_ASSERT(!dt_stack_in_collective("/jobs/a in b/train.py:6 in "
					  "torch/distributed/"));
	CU_ASSERT(!dt_stack_in_collective("<no Python frame>"));
}

/* The hook's line above an uncaught exception's frames: a collective's
 * name only, and only before the first traceback (a frame or a later
 * dump cannot forge it). */
static void test_timed_out(void)
{
	static const char exc[] =
		"dist-train: the stacks of rank 2 (pid 7) when SIGTERM came, "
		"written by Python's faulthandler\n"
		"dist-train: rank 2 (pid 7) ended by an uncaught RuntimeError: "
		"Timed out waiting 5000ms for recv operation to complete\n"
		"dist-train: its all_reduce timed out\n"
		"Current thread 0x00007f0000000001 (most recent call first):\n"
		"  File \"/usr/lib/python3/dist-packages/torch/distributed/"
		"distributed_c10d.py\", line 2501 in all_reduce\n"
		"  File \"/jobs/train.py\", line 9 in <module>\n";
	static const char late[] =
		"Current thread 0x00007f0000000001 (most recent call first):\n"
		"  File \"/jobs/train.py\", line 9 in <module>\n"
		"dist-train: its all_reduce timed out\n";
	static const char odd[] = "dist-train: its all reduce; rm timed out\n";
	char name[DT_COLLECTIVE_NAME_MAX], where[256];

	CU_ASSERT_EQUAL(dt_stack_timed_out(exc, strlen(exc), name,
					   sizeof(name)), 0);
	CU_ASSERT_STRING_EQUAL(name, "all_reduce");
	/* The frames are read as any rank's stacks. */
	CU_ASSERT_EQUAL(dt_stack_where(exc, strlen(exc), where,
				       sizeof(where)), 0);
	CU_ASSERT(dt_stack_in_collective(where));
	CU_ASSERT_EQUAL(dt_stack_timed_out(late, strlen(late), name,
					   sizeof(name)), -1);
	CU_ASSERT_EQUAL(dt_stack_timed_out(odd, strlen(odd), name,
					   sizeof(name)), -1);
	CU_ASSERT_EQUAL(dt_stack_timed_out(exc, strlen(exc), name, 4), -1);
	CU_ASSERT(!dt_collective_name_ok(""));
	CU_ASSERT(!dt_collective_name_ok("a_name_that_is_far_too_long_to_keep"));
}

/* What `dist-train why` reads back: srun's record, strictly. */
static void test_json_record(void)
{
	static const char text[] =
		"{\n  \"version\": 1, \"step\": \"42.0\", \"tasks\": 8,\n"
		"  \"cause\": \"rank 5 \\\"x\\\" \\u00e9\\ud83d\\ude00\\n\",\n"
		"  \"first_failure\": null, \"torchrun\": false,\n"
		"  \"exits\": [{\"rank\": 5, \"after_s\": 2.013e0}, {}],\n"
		"  \"tasks\": 4\n}\n";
	char err[200];
	struct dt_json *v = dt_json_parse(text, strlen(text), err,
					  sizeof(err));
	const struct dt_json *exits;

	CU_ASSERT_PTR_NOT_NULL_FATAL(v);
	CU_ASSERT_STRING_EQUAL(dt_json_string(v, "step"), "42.0");
	/* The last of a repeated name, as most readers take it. */
	CU_ASSERT_EQUAL(dt_json_number(v, "tasks", -1), 4);
	CU_ASSERT_STRING_EQUAL(dt_json_string(v, "cause"),
			       "rank 5 \"x\" \xc3\xa9\xf0\x9f\x98\x80\n");
	CU_ASSERT_PTR_NULL(dt_json_string(v, "first_failure"));
	CU_ASSERT_EQUAL(dt_json_get(v, "torchrun")->type, DT_JSON_BOOL);
	CU_ASSERT(!dt_json_get(v, "torchrun")->boolean);
	exits = dt_json_get(v, "exits");
	CU_ASSERT_EQUAL_FATAL(exits->count, 2);
	CU_ASSERT_DOUBLE_EQUAL(dt_json_number(&exits->items[0], "after_s", 0),
			       2.013, 1e-9);
	CU_ASSERT_EQUAL(dt_json_number(v, "missing", -7), -7);
	dt_json_free(v);
}

static void test_json_refused(void)
{
	static const char *const bad[] = {
		"", "{", "{\"a\" 1}", "{\"a\": 1,}", "[1 2]", "01", "1.", "-",
		"\"\\x\"", "\"\\ud800\"", "\"\\udc00x\"", "\"\\u0000\"",
		"\"\x01\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "tru",
		"{} {}", "\"open", "nul",
	};
	char err[200], deep[2 * DT_JSON_DEPTH_MAX + 3];
	struct dt_json *v;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		err[0] = '\0';
		v = dt_json_parse(bad[i], strlen(bad[i]), err, sizeof(err));
		CU_ASSERT_PTR_NULL(v);
		CU_ASSERT(!strncmp(err, "at byte ", 8));
		dt_json_free(v);
	}
	/* Nesting past the bound is refused, not followed. */
	memset(deep, '[', DT_JSON_DEPTH_MAX + 1);
	memset(deep + DT_JSON_DEPTH_MAX + 1, ']', DT_JSON_DEPTH_MAX + 1);
	v = dt_json_parse(deep, 2 * DT_JSON_DEPTH_MAX + 2, err, sizeof(err));
	CU_ASSERT_PTR_NULL(v);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "nested deeper"));
	v = dt_json_parse(deep + 1, 2 * DT_JSON_DEPTH_MAX, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL(v);
	dt_json_free(v);
}

/* The files a step leaves beside its record, and nothing else. */
static void test_saved_files(void)
{
	static const char *const names[] = {
		"dist-train-42.0.stacks-rank-10", "dist-train-42.0.nccl-rank-0",
		"dist-train-42.0.stacks-rank-2", "dist-train-42.0.json",
		"dist-train-42.1.stacks-rank-0", "dist-train-42.0.stacks-rank-01",
		"dist-train-42.0.stacks-rank-", "dist-train-42.0.stacks-rank-3x",
		"dist-train-42.0.stacks-rank-4294967296",
		"dist-train-420.0.stacks-rank-1",
	};
	char dir[] = "/tmp/dt-saved-XXXXXX", path[128];
	struct dt_saved_file *files;
	enum dt_saved_kind kind;
	uint32_t rank;
	size_t n;

	CU_ASSERT_EQUAL(dt_saved_file_of("42.0", "dist-train-42.0.nccl-rank-"
					 "7", &kind, &rank), 0);
	CU_ASSERT(kind == DT_SAVED_NCCL && rank == 7);
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		f = fopen(path, "w");
		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		fclose(f);
	}
	CU_ASSERT_EQUAL_FATAL(dt_saved_files(dir, "42.0", &files, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_STRING_EQUAL(files[0].name, "dist-train-42.0.stacks-rank-2");
	CU_ASSERT_STRING_EQUAL(files[1].name,
			       "dist-train-42.0.stacks-rank-10");
	CU_ASSERT(files[2].kind == DT_SAVED_NCCL && files[2].rank == 0);
	dt_saved_files_free(files, n);
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
	CU_ASSERT_EQUAL(dt_saved_files(dir, "42.0", &files, &n), -1);
}

/* A rank's stacks of its end: a second SIGTERM during Python's exit
 * added a dump from its exit handlers; the first one counts. */
static void test_first_dump(void)
{
	static const char two[] =
		"dist-train: the stacks of rank 0 (pid 1) when SIGTERM came\n"
		"Thread 0x2 (most recent call first):\n"
		"  File \"/x.py\", line 1 in run\n"
		"\n"
		"Current thread 0x1 (most recent call first):\n"
		"  File \"/jobs/end.py\", line 15 in behind\n"
		"  File \"/jobs/end.py\", line 20 in <module>\n"
		"Current thread 0x1 (most recent call first):\n"
		"  File \"/usr/lib/torch/library.py\", line 674 in _del_library\n"
		"dist-train: rank 0 on n1 ended by signal 15 (SIGTERM)\n";
	char where[DT_STACK_WHERE_MAX];
	size_t first = dt_stack_first_dump(two, strlen(two));

	CU_ASSERT_EQUAL_FATAL(dt_stack_where(two, first, where, sizeof(where)),
			      0);
	CU_ASSERT_STRING_EQUAL(where, "/jobs/end.py:15 in behind");
	/* One dump: all of it. */
	CU_ASSERT_EQUAL(dt_stack_first_dump(dump, strlen(dump)), strlen(dump));
	CU_ASSERT_EQUAL(dt_stack_first_dump("", 0), 0);
}

/* TEXT into DIR's file NAME. */
static void put_file(const char *dir, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

/*
 * What srun and dist-train why read of a step's saved files: rank 0 in
 * its own frame while 1 and 2 wait in all_reduce, rank 3 killed before it
 * wrote, rank 4 nothing saved: rank 0 is behind. A budget too small
 * leaves the evidence partial.
 */
static void test_evidence_behind(void)
{
	static const char behind[] =
		"dist-train: the stacks of rank 0 (pid 1) when SIGTERM came\n"
		"Current thread 0x1 (most recent call first):\n"
		"  File \"/jobs/end.py\", line 15 in behind\n"
		"dist-train: rank 0 on n1 ended by signal 15 (SIGTERM)\n";
	static const char waiting[] =
		"Current thread 0x1 (most recent call first):\n"
		"  File \"/usr/lib/python3/dist-packages/torch/distributed/"
		"distributed_c10d.py\", line 2501 in all_reduce\n"
		"  File \"/jobs/end.py\", line 20 in <module>\n";
	char dir[] = "/tmp/dt-evidence-XXXXXX", path[256];
	struct dt_evidence ev;
	size_t order[6];

	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	put_file(dir, "dist-train-7.0.stacks-rank-0", behind);
	put_file(dir, "dist-train-7.0.stacks-rank-1", waiting);
	put_file(dir, "dist-train-7.0.stacks-rank-2", waiting);
	put_file(dir, "dist-train-7.0.stacks-rank-3",
		 "dist-train: rank 3 on n2 ended by signal 9 (SIGKILL)\n");
	CU_ASSERT_EQUAL_FATAL(dt_evidence_read(&ev, dir, "7.0", 5, (uid_t)-1,
					       0), 0);
	CU_ASSERT_FALSE(ev.partial);
	CU_ASSERT_EQUAL(ev.nstacks, 4);
	CU_ASSERT_EQUAL(ev.ranks[0].state, DT_RANK_HAS_STACKS);
	CU_ASSERT_STRING_EQUAL(ev.ranks[0].where, "/jobs/end.py:15 in behind");
	CU_ASSERT_STRING_EQUAL(ev.ranks[0].how, "signal 15 (SIGTERM)");
	CU_ASSERT_EQUAL(ev.ranks[3].state, DT_RANK_UNANSWERED);
	CU_ASSERT_EQUAL(ev.ranks[4].state, DT_RANK_NOTHING_SAVED);
	CU_ASSERT_EQUAL_FATAL(dt_evidence_behind(&ev, order), 1);
	CU_ASSERT_EQUAL(order[0], 0);
	/* The flight recorder, where there is one, decides: none here. */
	CU_ASSERT_EQUAL(ev.ranks[1].seq, -1);
	dt_evidence_free(&ev);

	/* Another owner's files are not read; nor past the budget. */
	CU_ASSERT_EQUAL(dt_evidence_read(&ev, dir, "7.0", 5, getuid() + 1, 0),
			0);
	CU_ASSERT_EQUAL(ev.nstacks, 0);
	dt_evidence_free(&ev);
	CU_ASSERT_EQUAL(dt_evidence_read(&ev, dir, "7.0", 5, (uid_t)-1, 100),
			0);
	CU_ASSERT_TRUE(ev.partial);
	dt_evidence_free(&ev);

	/* Nobody waits in a collective: nobody is behind. */
	put_file(dir, "dist-train-7.0.stacks-rank-1", behind);
	put_file(dir, "dist-train-7.0.stacks-rank-2", behind);
	CU_ASSERT_EQUAL(dt_evidence_read(&ev, dir, "7.0", 5, (uid_t)-1, 0), 0);
	CU_ASSERT_EQUAL(dt_evidence_behind(&ev, order), 0);
	dt_evidence_free(&ev);

	for (int r = 0; r < 4; r++) {
		snprintf(path, sizeof(path), "%s/dist-train-7.0.stacks-rank-%d",
			 dir, r);
		unlink(path);
	}
	rmdir(dir);
}

/* Only a regular file, not through a link, at most MAX bytes. */
static void test_read_file_bounded(void)
{
	char dir[] = "/tmp/dt-bounded-XXXXXX", path[256], link_path[256];
	size_t len = 0;
	char *text;

	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	put_file(dir, "f", "twelve bytes");
	snprintf(path, sizeof(path), "%s/f", dir);
	text = dt_read_file_bounded(path, 12, (uid_t)-1, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	CU_ASSERT(len == 12 && !strcmp(text, "twelve bytes"));
	free(text);
	errno = 0;
	CU_ASSERT_PTR_NULL(dt_read_file_bounded(path, 11, (uid_t)-1, &len));
	CU_ASSERT_EQUAL(errno, EFBIG);
	CU_ASSERT_PTR_NULL(dt_read_file_bounded(path, 12, getuid() + 1, &len));
	CU_ASSERT_EQUAL(errno, EPERM);
	snprintf(link_path, sizeof(link_path), "%s/link", dir);
	CU_ASSERT_EQUAL_FATAL(symlink(path, link_path), 0);
	CU_ASSERT_PTR_NULL(dt_read_file_bounded(link_path, 100, (uid_t)-1,
						&len));
	unlink(link_path);
	snprintf(link_path, sizeof(link_path), "%s/fifo", dir);
	CU_ASSERT_EQUAL_FATAL(mkfifo(link_path, 0600), 0);
	CU_ASSERT_PTR_NULL(dt_read_file_bounded(link_path, 100, (uid_t)-1,
						&len));
	unlink(link_path);
	unlink(path);
	rmdir(dir);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_where_main_thread),
	UNIT_TEST(test_where_last_dump),
	UNIT_TEST(test_where_none),
	UNIT_TEST(test_group_odd_first),
	UNIT_TEST(test_group_ties_by_rank),
	UNIT_TEST(test_rank_ranges),
	UNIT_TEST(test_fr_torch),
	UNIT_TEST(test_fr_python_pickles),
	UNIT_TEST(test_fr_refused),
	UNIT_TEST(test_fr_memory_bounded),
	UNIT_TEST(test_in_collective),
	UNIT_TEST(test_timed_out),
	UNIT_TEST(test_first_dump),
	UNIT_TEST(test_json_record),
	UNIT_TEST(test_json_refused),
	UNIT_TEST(test_saved_files),
	UNIT_TEST(test_evidence_behind),
	UNIT_TEST(test_read_file_bounded),
};

UNIT_MAIN("stacks", tests)
