#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "member.h"
#include "net.h"

/* A member tries its leader's socket again at most this late. */
#define NODE_RETRY_MS 2

socklen_t dt_node_address(const char *name, struct sockaddr_un *a)
{
	size_t len = strlen(name);

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path + 1, name, len);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

int dt_join_verdict(const uint8_t *secret, const uint8_t *cnonce,
		    const char *line, const char *unproven,
		    struct dt_rdv_result *res, bool *from_rank0, char *err,
		    size_t errlen)
{
	struct dt_rdv_reply reply;

	if (dt_rdv_read_answer(secret, cnonce, line, &reply) < 0) {
		snprintf(err, errlen, "%s", unproven);
		return -1;
	}
	if (!reply.ok) {
		/* Rank 0 reports it (or, to a member, its leader). */
		*from_rank0 = true;
		snprintf(err, errlen, "%s", reply.message);
		return -1;
	}
	snprintf(res->address, sizeof(res->address), "%s", reply.address);
	res->port = reply.port;
	res->nccl_port = reply.nccl_port;
	res->nccl_check = reply.nccl_check;
	res->view = reply.view;
	return 0;
}

int dt_member_join(const char *name, const uint8_t *secret, uint32_t rank,
		   bool nccl_ok, uint64_t connect_deadline_ms,
		   uint64_t reply_wait_ms, struct dt_rdv_result *res,
		   bool *from_rank0, char *err, size_t errlen)
{
	struct sockaddr_un a;
	socklen_t alen = dt_node_address(name, &a);
	uint8_t cnonce[DT_RDV_NONCE_LEN];
	char line[DT_RDV_LINE_MAX];
	unsigned delay = 1;
	int fd = -1, n, got, rc = -1;

	*from_rank0 = false;
	memset(res, 0, sizeof(*res));
	/* The leader may not be listening yet. */
	while (fd < 0) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&a, alen) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		if (now_ms() >= connect_deadline_ms) {
			/* Rank 0 names this node's ranks as missing; every
			 * member saying so too would only repeat it. */
			*from_rank0 = true;
			snprintf(err, errlen, "this node's local rank 0 did not "
				 "start its bootstrap in time: see its own "
				 "message, or give it longer with "
				 "--dist-train=timeout=SECONDS");
			return -1;
		}
		/* Local, and the leader waits for every member: soon. */
		net_backoff_upto(&delay, NODE_RETRY_MS, connect_deadline_ms);
	}
	if (net_random(cnonce, sizeof(cnonce)) < 0 ||
	    (n = dt_rdv_member_line(rank, nccl_ok, cnonce, line,
				    sizeof(line))) < 0 ||
	    !net_send_all(fd, line, (size_t)n, now_ms() + 5000)) {
		snprintf(err, errlen, "lost this node's local rank 0: see its "
			 "own message, which says why");
		goto out;
	}
	got = net_read_line(fd, now_ms() + reply_wait_ms, line, sizeof(line));
	if (got == -2) {
		/* Its leader says why, or rank 0 does. */
		*from_rank0 = true;
		snprintf(err, errlen, "this node's local rank 0 left: see its "
			 "own message, which says why");
		goto out;
	}
	if (got < 0) {
		snprintf(err, errlen, "this node's local rank 0 did not "
			 "answer: see its own message; if it has none, give it "
			 "longer with --dist-train=timeout=SECONDS");
		goto out;
	}
	if (dt_join_verdict(secret, cnonce, line, "this node's socket answered, "
			 "but not with the step's secret: rerun the step, and "
			 "report it to your administrator if it recurs", res,
			 from_rank0, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	close(fd);
	return rc;
}
