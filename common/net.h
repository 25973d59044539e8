/*
 * The socket calls the start barrier's two sides share: rank 0 listens
 * where PyTorch's store will (every address, IPv6 and IPv4), and every
 * wait has a deadline on a monotonic clock.
 */
#ifndef DIST_TRAIN_NET_H
#define DIST_TRAIN_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Milliseconds on a monotonic clock. */
uint64_t now_ms(void);

/*
 * Sleep *DELAY_MS, at most until DEADLINE, then double it up to CAP_MS:
 * what every "not there yet, try again" loop waits, so that a peer that
 * is nearly ready costs a millisecond, not a fixed period. The cap is
 * the most a try can come after the peer got ready.
 */
void net_backoff_upto(unsigned *delay_ms, unsigned cap_ms, uint64_t deadline);
/* ... up to 50 ms. */
void net_backoff(unsigned *delay_ms, uint64_t deadline);

/* Milliseconds to DEADLINE for poll(), at most a minute; 0 when past. */
int net_remaining_ms(uint64_t deadline);

/*
 * Listen on PORT on every address, as PyTorch's store will. Returns the
 * socket, or -1 with errno (EADDRINUSE: something holds the port).
 */
int net_listen(uint16_t port);

/* Whether PORT could be listened on now. */
bool net_port_is_free(uint16_t port);

/* How far past the step's ports rank 0 looks for a free one. */
#define NET_PORT_SEARCH 256

/*
 * A free port for NCCL's bootstrap root, other than RENDEZVOUS: the next
 * in the site's range LOW-HIGH after it (past it, where RENDEZVOUS lies
 * outside the range: a reserved port). 0 when none is free.
 */
uint16_t net_nccl_port(uint16_t rendezvous, uint16_t low, uint16_t high);

/*
 * A connection to HOST:PORT (any of its addresses), non-blocking, made by
 * DEADLINE; the socket, or -1 with WHY (a static string).
 */
int net_connect(const char *host, const char *port, uint64_t deadline,
		const char **why);

/* Write all of BUF before DEADLINE; false on failure. */
bool net_send_all(int fd, const char *buf, size_t len, uint64_t deadline);

/*
 * One line from FD by DEADLINE into LINE (SIZE bytes), without its '\n'.
 * Returns 0; -1 on a timeout or a line too long; -2 when the peer hung up.
 */
int net_read_line(int fd, uint64_t deadline, char *line, size_t size);

/* The numeric address of SA, IPv4-mapped IPv6 shown as IPv4. */
void net_address_text(const struct sockaddr_storage *sa, char *buf,
		      size_t len);

/* Fill BUF with LEN random bytes from the kernel; 0, or -1. */
int net_random(void *buf, size_t len);

#endif
