/*
 * Rank 0's hold on the port of torch's store. The start barrier proves
 * rank 0 on its port; torch's TCPStore then listens on the same one. Were
 * the port let go in between, another user on the node could take it and
 * be the store every other rank connects to. So rank 0 keeps the port
 * held into a Python program (common/store_hold.h), names the socket in
 * DIST_TRAIN_STORE_FD ("FD:PORT"), and the Python hook
 * (helper/python/sitecustomize.py) hands it to the TCPStore that serves
 * that port: the port is never free. A program that is not Python, or
 * whose Python skips the hook (-E, -I, -S), might bind the port itself:
 * it gets the port free, as before. Here: the pure parts.
 */
#ifndef DIST_TRAIN_STORE_PORT_H
#define DIST_TRAIN_STORE_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envp.h"
#include "train_env.h"

#define DT_STORE_FD_ENV "DIST_TRAIN_STORE_FD"

/*
 * The port rank 0's store serves under ENV, the environment a task gets:
 * PET_RDZV_ENDPOINT's in torchrun mode (the agents' store, which the first
 * node's agent serves), else MASTER_PORT. 0 when neither is there.
 */
uint16_t dt_store_port(const struct dt_env *env);

/*
 * Whether ARGV runs Python that reads PYTHONPATH, so that the hook runs:
 * a python interpreter (python, python3, python3.11, ...) without -E, -I
 * or -S, or a script whose first line HEAD (LEN bytes, NULL when it could
 * not be read) is "#!" naming one (directly, or through env).
 */
bool dt_runs_python(int argc, char *const argv[], const char *head,
		    size_t len);

#endif
