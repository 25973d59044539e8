/*
 * A step's secret, 32 random bytes, as it travels from srun to the tasks
 * (in the environment, or through PMIx): 64 hex digits. What the secret
 * is for: common/rendezvous.h.
 */
#ifndef DIST_TRAIN_SECRET_H
#define DIST_TRAIN_SECRET_H

#include <stddef.h>
#include <stdint.h>

#define DT_SECRET_LEN 32
#define DT_SECRET_HEX (2 * DT_SECRET_LEN)

/* N bytes as 2 * N lowercase hex digits and a '\0'. */
void dt_hex_encode(const uint8_t *bytes, size_t n, char *out);

/* Exactly 2 * N hex digits (TEXT is LEN long) into BYTES; 0, or -1. */
int dt_hex_decode(const char *text, size_t len, uint8_t *bytes, size_t n);

/* HEX (exactly DT_SECRET_HEX hex digits) into SECRET; 0, or -1. */
int dt_secret_parse(const char *hex, uint8_t secret[DT_SECRET_LEN]);

void dt_secret_format(const uint8_t secret[DT_SECRET_LEN],
		      char hex[DT_SECRET_HEX + 1]);

#endif
