/*
 * dist-train settings [--user|--site] [--format=text|markdown|roff|conf]:
 * the plugin's table of settings (common/settings.c), as a user reads it,
 * or as the README, the man page and the plugstack.conf snippet carry it
 * (tests/settings-docs.sh makes those from this output and fails on any
 * difference).
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "../common/settings.h"

enum format { FORMAT_TEXT, FORMAT_MARKDOWN, FORMAT_ROFF, FORMAT_CONF };

#define USAGE DT_NAME " settings [--user|--site] " \
	"[--format=text|markdown|roff|conf]"

/* TEXT with each '|' as '\|', which a markdown table cell needs. */
static void put_markdown(const char *text)
{
	for (; *text; text++) {
		if (*text == '|')
			putchar('\\');
		putchar(*text);
	}
}

/* TEXT with roff's escapes: '-' as '\-', '\' as '\e'. */
static void put_roff(const char *text)
{
	for (; *text; text++) {
		if (*text == '-')
			fputs("\\-", stdout);
		else if (*text == '\\')
			fputs("\\e", stdout);
		else
			putchar(*text);
	}
}

/* TEXT on lines of at most 72 columns, each starting with PREFIX. */
static void put_wrapped(const char *prefix, const char *text)
{
	const int width = 72;
	int column = 0;

	while (*text) {
		int word = (int)strcspn(text, " ");

		if (column && column + 1 + word > width) {
			putchar('\n');
			column = 0;
		}
		if (!column)
			column = printf("%s", prefix);
		else
			column += printf(" ");
		column += printf("%.*s", word, text);
		text += word;
		text += strspn(text, " ");
	}
	putchar('\n');
}

/* Whether row INFO belongs in the list asked for. */
static bool wanted(const struct dt_setting_info *info, bool site)
{
	return site ? info->site && !info->user : info->user;
}

/*
 * The user settings that a site may also set, as one line of syntax: in
 * the site's lists they are one row, "defaults of the same settings".
 */
static void site_defaults_row(enum format format)
{
	struct dt_setting_info info;
	bool first = true;

	switch (format) {
	case FORMAT_MARKDOWN: fputs("| ", stdout); break;
	case FORMAT_ROFF: fputs(".TP\n.B ", stdout); break;
	case FORMAT_CONF: fputs("#   ", stdout); break;
	case FORMAT_TEXT: fputs("  ", stdout); break;
	}
	for (size_t i = 0; dt_setting_describe(i, &info) == 0; i++) {
		if (!info.site || !info.user)
			continue;
		fputs(first ? "" : ", ", stdout);
		first = false;
		if (format == FORMAT_MARKDOWN)
			printf("`%s`", info.name);
		else if (format == FORMAT_ROFF)
			put_roff(info.name);
		else
			fputs(info.name, stdout);
	}
	switch (format) {
	case FORMAT_MARKDOWN:
		puts(" | as for users | the site's defaults of the user "
		     "settings of the same names |");
		break;
	case FORMAT_ROFF:
		puts("\nThe site's defaults of the user settings of the same "
		     "names.");
		break;
	case FORMAT_CONF:
		puts("\n#       the site's defaults of the user settings of "
		     "the same names");
		break;
	case FORMAT_TEXT:
		puts("\n      the site's defaults of the user settings of the "
		     "same names");
		break;
	}
}

static void print_table(bool site, enum format format)
{
	struct dt_setting_info info;

	if (format == FORMAT_MARKDOWN)
		printf("| %s | default | meaning |\n|---|---|---|\n",
		       site ? "plugstack.conf argument" : "setting");
	for (size_t i = 0; dt_setting_describe(i, &info) == 0; i++) {
		if (!wanted(&info, site))
			continue;
		switch (format) {
		case FORMAT_MARKDOWN:
			fputs("| `", stdout);
			put_markdown(info.syntax);
			fputs("` | ", stdout);
			put_markdown(info.default_text);
			fputs(" | ", stdout);
			put_markdown(info.summary);
			puts(" |");
			break;
		case FORMAT_ROFF:
			fputs(".TP\n.B ", stdout);
			put_roff(info.syntax);
			putchar('\n');
			put_roff(info.summary);
			fputs(". Default: ", stdout);
			put_roff(info.default_text);
			puts(".");
			break;
		case FORMAT_CONF:
			printf("#   %s [%s]\n", info.syntax,
			       info.default_text);
			put_wrapped("#       ", info.summary);
			break;
		case FORMAT_TEXT:
			printf("  %-24s default: %s\n", info.syntax,
			       info.default_text);
			put_wrapped("      ", info.summary);
			break;
		}
	}
	if (site)
		site_defaults_row(format);
}

static int parse_format(const char *text, enum format *out)
{
	static const char *const names[] = { "text", "markdown", "roff",
					     "conf" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(text, names[i])) {
			*out = (enum format)i;
			return 0;
		}
	}
	return -1;
}

int cmd_settings(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "user", no_argument, NULL, 'u' },
		{ "site", no_argument, NULL, 'S' },
		{ "format", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum format format = FORMAT_TEXT;
	bool user = false, site = false;
	int c;

	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'u': user = true; break;
		case 'S': site = true; break;
		case 'f':
			if (parse_format(optarg, &format) < 0) {
				helper_error("--format=%s: expected text, "
					     "markdown, roff or conf", optarg);
				return 2;
			}
			break;
		case 'h':
			printf("usage: %s\n\nThe settings of --dist-train "
			       "(--user) and the plugstack.conf arguments "
			       "only a site gives (--site); both without "
			       "either.\n", USAGE);
			return 0;
		default:
			helper_error("usage: %s", USAGE);
			return 2;
		}
	}
	if (optind < argc) {
		helper_error("unexpected argument '%s': remove it; usage: %s",
			     argv[optind], USAGE);
		return 2;
	}
	if (!user && !site) {
		if (format != FORMAT_TEXT) {
			helper_error("--format=markdown, roff and conf print "
				     "one table: add --user or --site");
			return 2;
		}
		user = site = true;
	}
	if (user) {
		if (format == FORMAT_TEXT)
			puts("--dist-train=SETTING[,SETTING...] (the last "
			     "one wins):");
		print_table(false, format);
	}
	if (site) {
		if (format == FORMAT_TEXT)
			printf("%splugstack.conf arguments (KEY=VALUE after "
			       "the plugin's path), for administrators:\n",
			       user ? "\n" : "");
		print_table(true, format);
	}
	return 0;
}
