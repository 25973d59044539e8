/* Which network interface reaches an address. */
#ifndef DIST_TRAIN_NETIF_H
#define DIST_TRAIN_NETIF_H

#include <stddef.h>

/*
 * Name of the interface this host sends from to reach ADDRESS (numeric
 * IPv4 or IPv6), e.g. "ib0". Returns 0, or -1 when it cannot tell.
 */
int dt_netif_towards(const char *address, char *name, size_t len);

/* HOST's first address, numeric, into ADDRESS; 0, or -1. */
int dt_resolve_host(const char *host, char *address, size_t len);

/*
 * The same for HOST, a name or an address: its first address. Returns 0,
 * or -1 when HOST does not resolve or no interface reaches it.
 */
int dt_netif_towards_host(const char *host, char *name, size_t len);

#endif
