/* The records the helper hands the plugin, and a worker's plan entry. */
#include "config.h"

#include "fuzz.h"
#include "../../common/binding.h"
#include "../../common/train_env.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dt_env env = { 0 }, back = { 0 };
	char err[128], *text, *entry;

	if (dt_env_deserialize((const char *)data, size, &env, err,
			       sizeof(err)) == 0) {
		size_t len = dt_env_serialize(&env, NULL, 0);
		char *buf = malloc(len + 1);

		FUZZ_ASSERT(buf);
		FUZZ_ASSERT(dt_env_serialize(&env, buf, len + 1) == len);
		FUZZ_ASSERT(dt_env_deserialize(buf, len, &back, NULL, 0) == 0);
		FUZZ_ASSERT(back.count == env.count);
		free(buf);
		dt_env_free(&back);
		dt_env_free(&env);
	}
	text = fuzz_string(data, size);
	entry = dt_worker_entry(text, size ? data[0] % 8 : 0);
	free(entry);
	free(text);
	return 0;
}
