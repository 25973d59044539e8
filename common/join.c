#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "join.h"
#include "../common/net.h"

/* How long rank 0 may take to send its challenge on a connection. */
#define CHALLENGE_MS 5000
/*
 * Where rank 0 may have moved: how long the first port may stay silent
 * or refuse before this rank asks where rank 0 went. Rank 0 sends its
 * challenge as soon as it accepts, so a second is long.
 */
#define RELOCATE_AFTER_MS 1000
/* The first pause between two questions of where rank 0 went; it
 * doubles up to 5 s (each question that times out costs PMIx a pipe). */
#define RELOCATE_GAP_MS 250

unsigned join_retry_ms(uint32_t nodes)
{
	return nodes / 20 < 2 ? 2 : nodes / 20 > 50 ? 50 : nodes / 20;
}

int join_rank0(const struct join_target *target, const uint8_t *secret,
	       const struct dt_rdv_hello *hello, uint64_t connect_deadline_ms,
	       uint64_t reply_wait_ms, struct dt_rdv_result *res,
	       bool *from_rank0, char *err, size_t errlen)
{
	uint8_t cnonce[DT_RDV_NONCE_LEN];
	char line[DT_RDV_LINE_MAX], challenge[DT_RDV_LINE_MAX], portstr[8];
	char unproven[320];
	const char *host = target->host, *why = "no address";
	uint16_t port = target->port;
	uint64_t unanswered_since = now_ms(), relocate_at = 0;
	unsigned relocate_gap = RELOCATE_GAP_MS;
	bool elsewhere = false;	/* rank 0 may have moved */
	bool seen = false;	/* rank 0 challenged us here */
	unsigned delay = 1;
	int fd = -1, n, got;

	*from_rank0 = false;
	memset(res, 0, sizeof(*res));
	snprintf(portstr, sizeof(portstr), "%u", port);

	/*
	 * Rank 0 may not listen yet, or may have dropped this connection
	 * among strangers' before it was proven: try until the deadline.
	 */
	for (;; close(fd), fd = -1,
	     net_backoff_upto(&delay, target->retry_ms ? target->retry_ms : 50,
			      connect_deadline_ms)) {
		uint64_t challenge_by;
		uint16_t moved;

		if (target->relocate && !seen &&
		    now_ms() - unanswered_since >= RELOCATE_AFTER_MS)
			elsewhere = true;
		if (elsewhere && target->relocate) {
			uint64_t now = now_ms(), until = relocate_at <
				connect_deadline_ms ? relocate_at :
				connect_deadline_ms;
			int found;

			if (now < until)
				usleep((useconds_t)(until - now) * 1000);
			found = target->relocate(target->arg, &moved, err,
						 errlen);
			if (found < 0)
				goto fail;
			relocate_at = now_ms() + relocate_gap;
			relocate_gap = relocate_gap * 2 > 5000 ? 5000 :
				       relocate_gap * 2;
			if (found && moved != port) {
				port = moved;
				snprintf(portstr, sizeof(portstr), "%u", port);
				delay = 1;
			}
			elsewhere = false;
			unanswered_since = now_ms();
		}
		if (now_ms() >= connect_deadline_ms) {
			snprintf(err, errlen, "rank 0 (on %s) did not arrive "
				 "within %u s (%s:%u: %s): see rank 0's own "
				 "message; if it has none, give it longer with "
				 "--dist-train=timeout=SECONDS, or ask your "
				 "administrator to check that node", host,
				 target->timeout_s, host, port, why);
			return -1;
		}
		fd = net_connect(host, portstr, connect_deadline_ms, &why);
		if (fd < 0)
			continue;
		challenge_by = now_ms() + (target->relocate ?
					   RELOCATE_AFTER_MS : CHALLENGE_MS);
		if (challenge_by > connect_deadline_ms)
			challenge_by = connect_deadline_ms;
		if (net_read_line(fd, challenge_by, challenge,
			      sizeof(challenge)) < 0) {
			why = "it did not send its challenge";
			elsewhere = true;
			continue;
		}
		if (dt_rdv_challenge_ok(secret, challenge, port) < 0) {
			why = "what listens there is not this step's rank 0";
			elsewhere = true;
			continue;
		}
		if (net_random(cnonce, sizeof(cnonce)) < 0) {
			snprintf(err, errlen, "no random numbers (%s): ask "
				 "your administrator to check getrandom on this "
				 "node", strerror(errno));
			goto fail;
		}
		n = dt_rdv_hello_line(secret, cnonce, challenge, hello, line,
				      sizeof(line));
		if (n < 0) {
			snprintf(err, errlen, "this node's hello to rank 0 "
				 "could not be made (its host name is empty or "
				 "has spaces, or its ranks do not fit in a "
				 "line): run fewer tasks per node, or ask your "
				 "administrator to give the node a plain name");
			goto fail;
		}
		seen = true;
		if (!net_send_all(fd, line, (size_t)n,
				  now_ms() + CHALLENGE_MS)) {
			why = "it hung up during the hello";
			continue;
		}
		/* The answer comes once everyone is there, or at its
		 * timeout. Hanging up instead: this hello was not taken. */
		got = net_read_line(fd, now_ms() + reply_wait_ms, line,
				sizeof(line));
		if (got == -2) {
			why = "it closed the connection without an answer "
			      "(was this task started with the step's "
			      "secret?)";
			continue;
		}
		if (got < 0) {
			snprintf(err, errlen, "rank 0 at %s:%u did not answer: "
				 "see rank 0's own message; if it has none, "
				 "give it longer with "
				 "--dist-train=timeout=SECONDS", host, port);
			goto fail;
		}
		break;
	}
	snprintf(unproven, sizeof(unproven), "%s:%u answered, but not as "
		 "this step's rank 0 (it does not know the step's secret), "
		 "so another program holds rank 0's port: rerun the step, "
		 "and ask your administrator to set MpiParams=ports= in "
		 "slurm.conf so that steps get ports of their own", host,
		 port);
	if (dt_join_verdict(secret, cnonce, line, unproven, res, from_rank0, err,
			 errlen) < 0)
		goto fail;
	close(fd);
	return 0;
fail:
	close(fd);
	return -1;
}
