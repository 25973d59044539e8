/*
 * Whole reads and writes on a file descriptor, across short counts and
 * EINTR: shared by the plugin's record and stacks files, the machine
 * cache, and dist-train why.
 */
#ifndef DIST_TRAIN_FD_IO_H
#define DIST_TRAIN_FD_IO_H

#include <stdbool.h>
#include <stddef.h>

/* All of BUF (LEN bytes) to FD; false on an error (errno) or no room. */
bool dt_write_all(int fd, const char *buf, size_t len);

/* Up to LEN bytes from FD into BUF, until its end; how many were read. */
size_t dt_read_up_to(int fd, char *buf, size_t len);

#endif
