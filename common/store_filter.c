#include "config.h"

#include "store_filter.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

/* Keep the whole packet, or none of it. */
#define ACCEPT 0xffffffffu
#define DROP 0u

static int add_v4(struct dt_peer_set *set, uint32_t addr)
{
	uint32_t *grown;

	for (size_t i = 0; i < set->n4; i++)
		if (set->v4[i] == addr)
			return 0;
	grown = realloc(set->v4, (set->n4 + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	set->v4 = grown;
	set->v4[set->n4++] = addr;
	return 0;
}

static int add_v6(struct dt_peer_set *set, const uint8_t addr[16])
{
	uint8_t (*grown)[16];

	for (size_t i = 0; i < set->n6; i++)
		if (!memcmp(set->v6[i], addr, 16))
			return 0;
	grown = realloc(set->v6, (set->n6 + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	set->v6 = grown;
	memcpy(set->v6[set->n6++], addr, 16);
	return 0;
}

int dt_peer_set_add(struct dt_peer_set *set, const struct sockaddr *sa)
{
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;
	uint32_t v4;

	if (sa->sa_family == AF_INET)
		return add_v4(set, ntohl(((const struct sockaddr_in *)sa)
					 ->sin_addr.s_addr));
	if (sa->sa_family != AF_INET6)
		return -1;
	/* A dual-stack socket's IPv4 peers: their packets are IPv4. */
	if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
		memcpy(&v4, a6->sin6_addr.s6_addr + 12, 4);
		return add_v4(set, ntohl(v4));
	}
	return add_v6(set, a6->sin6_addr.s6_addr);
}

void dt_peer_set_free(struct dt_peer_set *set)
{
	free(set->v4);
	free(set->v6);
	memset(set, 0, sizeof(*set));
}

struct program {
	struct sock_filter *insn;
	size_t len, max;
};

static void emit(struct program *p, uint16_t code, uint8_t jt, uint8_t jf,
		 uint32_t k)
{
	if (p->len < p->max)
		p->insn[p->len] = (struct sock_filter){ code, jt, jf, k };
	p->len++;
}

/* An IPv6 source address equal to ADDR, else on to the next test. */
static void match_v6(struct program *p, const uint8_t addr[16])
{
	for (int w = 0; w < 4; w++) {
		uint32_t word;

		memcpy(&word, addr + 4 * w, 4);
		emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0,
		     (uint32_t)(SKF_NET_OFF + 8 + 4 * w));
		/* Past the rest of this test: 2 per word left, and RET. */
		emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0,
		     (uint8_t)(2 * (3 - w) + 1), ntohl(word));
	}
	emit(p, BPF_RET | BPF_K, 0, 0, ACCEPT);
}

int dt_store_filter_build(const struct dt_peer_set *set, int loopback,
			  struct sock_filter *prog, size_t max)
{
	static const uint8_t v6_loopback[16] = { [15] = 1 };
	struct program p = { prog, 0, max };
	size_t ja;

	emit(&p, BPF_LD | BPF_H | BPF_ABS, 0, 0,
	     (uint32_t)(SKF_AD_OFF + SKF_AD_PROTOCOL));
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0x86dd);
	ja = p.len;
	emit(&p, BPF_JMP | BPF_JA, 0, 0, 0);	/* to IPv6, set below */
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 0x0800);
	emit(&p, BPF_RET | BPF_K, 0, 0, DROP);

	/* IPv4: the source address, against each allowed one. */
	emit(&p, BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)(SKF_NET_OFF + 12));
	for (size_t i = 0; i < set->n4; i++) {
		emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, set->v4[i]);
		emit(&p, BPF_RET | BPF_K, 0, 0, ACCEPT);
	}
	if (loopback) {
		emit(&p, BPF_ALU | BPF_AND | BPF_K, 0, 0, 0xff000000u);
		emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0x7f000000u);
		emit(&p, BPF_RET | BPF_K, 0, 0, ACCEPT);
	}
	emit(&p, BPF_RET | BPF_K, 0, 0, DROP);

	/* IPv6. */
	if (ja < p.max)
		p.insn[ja].k = (uint32_t)(p.len - ja - 1);
	for (size_t i = 0; i < set->n6; i++)
		match_v6(&p, set->v6[i]);
	if (loopback)
		match_v6(&p, v6_loopback);
	emit(&p, BPF_RET | BPF_K, 0, 0, DROP);

	return p.len <= p.max && p.len <= DT_FILTER_MAX_INSNS ? (int)p.len :
								-1;
}
