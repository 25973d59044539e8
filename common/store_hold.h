/*
 * Rank 0's hold on the port of torch's store, from the start barrier into
 * the program (see common/store_port.h for why). The barrier's listening
 * socket (without a barrier, one made for the purpose) gives way to a
 * socket bound to the same port that does not listen. That one is bound
 * while the listening one still holds the port (both SO_REUSEPORT, which
 * the kernel lets only sockets of the same user share), and has
 * SO_REUSEADDR only while it binds (past the port's connections in
 * TIME_WAIT): the port is never free, and no other user's socket can bind
 * it (tests/integration/hostile.sh). As it does not listen, ranks that
 * connect before the store are refused, as by a store not yet started,
 * rather than queued, to be reset when a torch that cannot take the
 * socket closes it.
 */
#ifndef DIST_TRAIN_STORE_HOLD_H
#define DIST_TRAIN_STORE_HOLD_H

#include <stdbool.h>
#include <stdint.h>

#include "envp.h"
#include "train_env.h"

/* The port socket FD is bound to, or 0. */
uint16_t dt_socket_port(int fd);

/*
 * Hold PORT for the program ARGV (ARGC words; a name without '/' is found
 * in GETENV's PATH): FROM, the barrier's listening socket on PORT, or -1
 * without a barrier, becomes the holding socket. It is kept open into the
 * program when that runs Python with the hook on its PYTHONPATH (HOOK),
 * and named in DIST_TRAIN_STORE_FD in ENV, and GUARD_LIB (the worker
 * library, or NULL) is preloaded into it, to guard the store
 * (helper/store_guard.c); else closed, and DIST_TRAIN_STORE_FD and
 * DIST_TRAIN_STORE_PEERS unset. FROM is taken either way. Returns 1 when
 * kept, 0 when not, -1 when out of memory, -2 when PORT is held by
 * another program (without a barrier: the program could not listen).
 */
int dt_store_hold(int from, uint16_t port, bool hook, const char *guard_lib,
		  int argc, char *const argv[], dt_getenv_fn getenv,
		  void *arg, struct dt_env *env);

#endif
