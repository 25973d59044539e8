/*
 * The dist-train command's subcommands, one file each; main.c dispatches.
 * Each returns the process's exit status and prints its own errors,
 * prefixed with "dist-train: ".
 */
#ifndef DIST_TRAIN_COMMANDS_H
#define DIST_TRAIN_COMMANDS_H

#define DT_NAME "dist-train"

int cmd_hostnames(int argc, char **argv);
int cmd_bootstrap(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_settings(int argc, char **argv);
int cmd_stacks(int argc, char **argv);
int cmd_why(int argc, char **argv);

/* "dist-train: error: " + message on stderr. */
void helper_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
