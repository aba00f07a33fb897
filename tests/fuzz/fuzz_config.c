/* libFuzzer target: the whole configuration decoder (strict TOML + v1
 * schema) over arbitrary bytes. Any accepted document must satisfy the
 * invariants checked below; ASan/UBSan catch memory errors. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "fs/pathauth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_path(const char *p)
{
	struct lz_err err;
	if (p == NULL || lz_path_grammar(p, strlen(p), &err) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lz_config_doc *doc = NULL;
	struct lz_err err = { 0, "" };
	int r = lz_config_decode("fuzz.toml", (const char *)data, size, &doc, &err);
	if (r < 0) {
		/* Every refusal names the file and a position. */
		if (doc != NULL || strncmp(err.msg, "fuzz.toml:", 10) != 0)
			if (r != -ENOMEM)
				abort();
		return 0;
	}
	if (doc->runsc_dcache > LZ_DCACHE_MAX || doc->n_profiles > LZ_CONFIG_LIST_MAX)
		abort();
	if (doc->data_root)
		check_path(doc->data_root);
	for (size_t i = 0; i < doc->n_profiles; i++) {
		const struct lz_config_profile *p = &doc->profiles[i];
		if (!lz_config_profile_name_valid(p->name) || p->image == NULL)
			abort();
		for (size_t j = 0; j < p->n_persistent_dirs; j++) {
			check_path(p->persistent_dirs[j]);
			if (lz_config_destination_protected(p->persistent_dirs[j], true))
				abort();
		}
		for (size_t j = 0; j < p->n_volumes; j++) {
			check_path(p->volumes[j].destination);
			if (lz_config_destination_protected(p->volumes[j].destination, false))
				abort();
			if ((p->volumes[j].source == NULL) == (p->volumes[j].profile_subdir == NULL))
				abort();
		}
		for (size_t j = 0; j < p->n_allow; j++) {
			if (lz_prefix_intersects(p->allow[j].prefix, LZ_TOPOLOGY_NET))
				abort();
			for (size_t k = 0; k < p->n_deny; k++)
				if (lz_prefix_equal(p->allow[j].prefix, p->deny[k].prefix))
					abort();
		}
		for (size_t j = 0; j < p->n_rules; j++)
			check_path(p->rules[j].executable);
	}
	lz_config_doc_free(doc);
	return 0;
}
