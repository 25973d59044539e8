/*
 * Rank 0's side of the start barrier, driven by what strangers and ranks
 * could send: the input is a script of connections opening, sending bytes
 * (garbage, or hellos proven with the right or a wrong secret), closing,
 * and time passing. The core must never believe an unproven word, count a
 * rank twice, or hold more strangers than its bound. The ranks' side reads
 * the same input as an answer from rank 0, and as the words of one that
 * was proven (a member's view among them).
 */
#include "config.h"

#include "fuzz.h"
#include "../../common/rendezvous.h"

#define WORLD 6
#define MAX_PENDING 3

static const uint8_t secret[DT_SECRET_LEN] = { 7 };
static const uint8_t wrong[DT_SECRET_LEN] = { 8 };
static const uint8_t seed[DT_RDV_NONCE_LEN] = { 1 };

struct fuzz_conn {
	bool open;
	char challenge[DT_RDV_LINE_MAX];
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dt_rdv_server_config c = {
		.world = WORLD, .secret = secret, .seed = seed, .host = "n1",
		.port = 20001, .max_pending = MAX_PENDING, .hello_ms = 100,
	};
	struct dt_rdv_server *s = dt_rdv_server_new(&c);
	struct fuzz_conn *conns;
	struct dt_rdv_reply reply;
	uint8_t cnonce[DT_RDV_NONCE_LEN] = { 0 };
	char *text = fuzz_string(data, size);
	char out[DT_RDV_LINE_MAX];
	uint64_t now = 0;
	uint32_t slots;
	size_t i = 0;

	FUZZ_ASSERT(s);
	/* Whatever arrives as an answer is refused unless rank 0 made it. */
	FUZZ_ASSERT(dt_rdv_read_answer(secret, cnonce, text, &reply) == -1);
	/* ... and as rank 0's challenge. */
	FUZZ_ASSERT(dt_rdv_challenge_ok(secret, text, 20001) == -1);
	/* A proven answer's words: taken only whole and consistent. */
	if (dt_rdv_parse_ok(text, &reply) == 0) {
		const struct dt_rdv_view *v = &reply.view;

		FUZZ_ASSERT(reply.ok && reply.address[0] && reply.port);
		FUZZ_ASSERT(!v->present ||
			    (v->local_rank < v->local_size &&
			     v->local_size <= v->world &&
			     v->node_id < v->num_nodes &&
			     v->num_nodes <= v->world && v->rank0_host[0]));
	} else {
		FUZZ_ASSERT(!reply.ok && !reply.view.present);
	}
	slots = dt_rdv_server_slots(s);
	conns = calloc(slots, sizeof(*conns));
	FUZZ_ASSERT(conns);

	while (i + 1 < size) {
		uint8_t op = data[i++], arg = data[i++];
		uint32_t id = arg % slots, evicted;
		size_t out_len, n;
		int len;

		switch (op % 7) {
		case 0:		/* a connection */
			len = dt_rdv_accept(s, now, &id, &evicted, out,
					    sizeof(out));
			FUZZ_ASSERT(len > 0 && id < slots);
			if (evicted != DT_RDV_NONE) {
				FUZZ_ASSERT(dt_rdv_rank_of(s, evicted) == -1);
				conns[evicted].open = false;
			}
			FUZZ_ASSERT(!conns[id].open);
			conns[id].open = true;
			out[len - 1] = '\0';
			FUZZ_ASSERT(dt_rdv_challenge_ok(secret, out, 20001) == 0);
			memcpy(conns[id].challenge, out, (size_t)len);
			break;
		case 1:		/* bytes from the input */
		case 2:		/* a hello, proven with the secret or not */
			if (!conns[id].open)
				break;
			if (op % 7 == 1) {
				n = size - i < data[i - 1] % 64 ?
				    size - i : data[i - 1] % 64;
				memcpy(out, data + i, n);
				i += n;
			} else {
				uint32_t ranks[2] = { arg % (WORLD + 1),
						      arg % (WORLD + 1) + 1 +
						      op / 16 };
				struct dt_rdv_hello h = {
					ranks, 1 + (op & 16 ? 1 : 0), WORLD,
					"n", true };

				len = dt_rdv_hello_line(op & 8 ? wrong : secret,
							cnonce,
							conns[id].challenge, &h,
							out, sizeof(out));
				if (len < 0)
					break;
				n = (size_t)len;
			}
			{
				int64_t before = dt_rdv_rank_of(s, id);
				uint32_t joined = dt_rdv_joined(s);
				enum dt_rdv_verdict v = dt_rdv_input(
					s, id, out, n, out, sizeof(out),
					&out_len);

				if (v == DT_RDV_JOINED) {
					FUZZ_ASSERT(before == -1);
					FUZZ_ASSERT(dt_rdv_joined(s) >
						    joined);
					/* Only a proven hello gets in. */
					FUZZ_ASSERT(op % 7 == 2 && !(op & 8));
				}
				if (v == DT_RDV_DROP || v == DT_RDV_REFUSE) {
					FUZZ_ASSERT(dt_rdv_rank_of(s, id) == -1);
					conns[id].open = false;
				}
				if (v == DT_RDV_REFUSE)
					FUZZ_ASSERT(out_len > 0 &&
						    out[out_len - 1] == '\n');
			}
			break;
		case 3:		/* a hang-up */
			dt_rdv_closed(s, id);
			conns[id].open = false;
			break;
		case 4:		/* time passes */
			now += arg;
			while ((id = dt_rdv_expired(s, now)) != DT_RDV_NONE) {
				FUZZ_ASSERT(conns[id].open);
				conns[id].open = false;
			}
			break;
		case 6:		/* a member of rank 0's node */
			if (dt_rdv_join_member(s, arg % (WORLD + 1), op & 8,
					       "n1", out, sizeof(out)) == 0 &&
			    (op & 16))
				dt_rdv_leave_member(s, arg % (WORLD + 1),
						    op & 8);
			break;
		case 5:		/* the answer, once all are there */
			if (dt_rdv_complete(s) && conns[id].open &&
			    dt_rdv_rank_of(s, id) > 0) {
				reply.ok = true;
				snprintf(reply.address, sizeof(reply.address),
					 "10.0.0.1");
				reply.port = 29500;
				FUZZ_ASSERT(dt_rdv_answer(s, id, &reply, out,
							  sizeof(out)) > 0);
			}
			break;
		}
		FUZZ_ASSERT(dt_rdv_joined(s) >= 1 && dt_rdv_joined(s) <= WORLD);
	}
	free(conns);
	dt_rdv_server_free(s);
	free(text);
	return 0;
}
