#include "config.h"

#include <string.h>

#include "secret.h"

void dt_hex_encode(const uint8_t *bytes, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 15];
	}
	out[2 * n] = '\0';
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int dt_hex_decode(const char *text, size_t len, uint8_t *bytes, size_t n)
{
	if (len != 2 * n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		bytes[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int dt_secret_parse(const char *hex, uint8_t secret[DT_SECRET_LEN])
{
	if (!hex)
		return -1;
	return dt_hex_decode(hex, strnlen(hex, DT_SECRET_HEX + 1), secret,
			     DT_SECRET_LEN);
}

void dt_secret_format(const uint8_t secret[DT_SECRET_LEN],
		      char hex[DT_SECRET_HEX + 1])
{
	dt_hex_encode(secret, DT_SECRET_LEN, hex);
}
