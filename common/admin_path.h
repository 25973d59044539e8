/*
 * The files the administrator names in plugstack.conf (helper=,
 * worker-lib= and the Python hook beside it, topology=, topology-cache=)
 * are run, preloaded or parsed for every user, as that user or as root:
 * only root may be able to change them. A path passes when it, every
 * folder above it, and every folder above what its links point to, are
 * root's and writable by neither group nor others. That refuses sticky
 * folders such as /tmp too: what is in them can vanish (a reboot, a
 * cleaner), and anyone may then make the same name.
 */
#ifndef DIST_TRAIN_ADMIN_PATH_H
#define DIST_TRAIN_ADMIN_PATH_H

#include <stdbool.h>
#include <stddef.h>

struct dt_config;

/*
 * 0 when PATH, set by SETTING (as in "helper"), passes; -1 with the
 * reason in ERR otherwise. A missing tail of PATH passes (only root can
 * make it): what uses the path says it is missing.
 */
int dt_admin_path_check(const char *setting, const char *path, char *err,
			size_t errlen);

/* dt_admin_path_check of every path CFG names. */
int dt_admin_paths_check(const struct dt_config *cfg, char *err,
			 size_t errlen);

/*
 * A descriptor of folder DIR, opened one component at a time from "/"
 * after its links are resolved, each component checked as above, so that
 * what is opened or renamed relative to it cannot be raced. MAKE: make
 * DIR (mode 755) when its parent exists. Returns the descriptor; -2 when
 * DIR is missing and not made; -1 with the reason in ERR otherwise.
 */
int dt_admin_dir_open(const char *setting, const char *dir, bool make,
		      char *err, size_t errlen);

#endif
