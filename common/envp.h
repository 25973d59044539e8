/* Look-ups in an environment array (envp, S_JOB_ENV, environ). */
#ifndef DIST_TRAIN_ENVP_H
#define DIST_TRAIN_ENVP_H

/* A getenv over some environment: ARG says which. */
typedef const char *(*dt_getenv_fn)(const char *name, void *arg);

/* Value of NAME in ENVP, or NULL. ENVP may be NULL. */
const char *dt_envp_get(char *const *envp, const char *name);

/* dt_getenv_fn over an envp array passed as ARG. */
const char *dt_envp_getenv(const char *name, void *arg);

#endif
