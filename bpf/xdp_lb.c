// SPDX-License-Identifier: GPL-2.0
/* XDP load balancer with switchable weighted profiles: pre-built slot tables, one atomic switch.
 *
 * Every frame is parsed with explicit bounds checks; TCP/UDP over IPv4/IPv6 (and their fragments,
 * hashed on L3 only because later fragments carry no ports) is steered by
 * lut[active].slot[hash % n_slots] into a devmap of targets. Anything else is XDP_PASS, never
 * XDP_DROP: a load balancer must not black-hole traffic it does not understand.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "xdp_lb.h"

#define ETH_P_8021Q_ 0x8100
#define ETH_P_8021AD_ 0x88A8
#define MAX_VLAN_TAGS 2
#define MAX_V6_EXT_HDRS 4
#define IP_MF_ 0x2000
#define IP_OFFSET_ 0x1FFF

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LB_MAX_TABLES);
	__type(key, __u32);
	__type(value, struct lut);
} lb_luts SEC(".maps");

/* One aligned u32: the profile switch is a single map update, so readers see old or new. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lb_active SEC(".maps");

/* The kernel forces BPF_F_RDONLY_PROG on devmaps, so libbpf 1.1's pin-reuse check rejects this map:
 * the control plane reuses pinned maps with bpf_map__reuse_fd instead. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, LB_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u32);
} lb_targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LB_STAT_SLOTS);
	__type(key, __u32);
	__type(value, struct counter);
} lb_stats SEC(".maps");

/* Seed of the flow hash, one u32 drawn from os.urandom by the control plane at each load (before the
 * program is attached) and pinned with the other maps. An upgrade reuses the pinned map, so every flow
 * hashes the same for the whole life of one load; two loads (and two nodes) hash differently, so nobody
 * can precompute 5-tuples that all land on one target. Read-only for the program. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_RDONLY_PROG);
	__type(key, __u32);
	__type(value, __u32);
} lb_seed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LB_FLOW_ENTRIES);
	__type(key, struct flow_key);
	__type(value, __u32);
} lb_flows SEC(".maps");

struct hdr_cursor {
	void *pos;
};

static __always_inline __u32 rotl32(__u32 x, int r)
{
	return (x << r) | (x >> (32 - r));
}

/* murmur3 word step: plain FNV-1a modulo a small table follows port parity, so every word is mixed. */
static __always_inline __u32 mix_word(__u32 h, __u32 k)
{
	k *= 0xcc9e2d51;
	k = rotl32(k, 15);
	k *= 0x1b873593;
	h ^= k;
	h = rotl32(h, 13);
	return h * 5 + 0xe6546b64;
}

static __always_inline __u32 fmix32(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

static __always_inline __u32 flow_hash(const struct flow_key *k, __u32 seed)
{
	__u32 h = seed;
	int i;

#pragma unroll
	for (i = 0; i < 4; i++)
		h = mix_word(h, k->src[i]);
#pragma unroll
	for (i = 0; i < 4; i++)
		h = mix_word(h, k->dst[i]);
	h = mix_word(h, ((__u32)k->sport << 16) | k->dport);
	h = mix_word(h, ((__u32)k->family << 8) | k->proto);
	return fmix32(h);
}

static __always_inline void count(__u32 idx, __u64 bytes)
{
	struct counter *c = bpf_map_lookup_elem(&lb_stats, &idx);

	if (c) {
		c->packets++;
		c->bytes += bytes;
	}
}

/* Fills ports for TCP/UDP; returns 0 when they were read, -1 when the header is truncated. */
static __always_inline int parse_ports(void *pos, void *end, struct flow_key *k)
{
	if (k->proto == IPPROTO_TCP) {
		struct tcphdr *th = pos;

		if ((void *)(th + 1) > end)
			return -1;
		k->sport = bpf_ntohs(th->source);
		k->dport = bpf_ntohs(th->dest);
		return 0;
	}
	if (k->proto == IPPROTO_UDP) {
		struct udphdr *uh = pos;

		if ((void *)(uh + 1) > end)
			return -1;
		k->sport = bpf_ntohs(uh->source);
		k->dport = bpf_ntohs(uh->dest);
		return 0;
	}
	return -1;
}

enum parse_result { PARSE_STEER, PARSE_PASS, PARSE_BAD };

static __always_inline enum parse_result parse_ipv4(void *pos, void *end, struct flow_key *k)
{
	struct iphdr *iph = pos;
	__u32 hlen;

	if ((void *)(iph + 1) > end)
		return PARSE_BAD;
	if (iph->version != 4 || iph->ihl < 5)
		return PARSE_BAD;
	hlen = iph->ihl * 4;
	if (pos + hlen > end) /* options must be present in full */
		return PARSE_BAD;
	k->family = 4;
	k->proto = iph->protocol;
	k->src[0] = iph->saddr;
	k->dst[0] = iph->daddr;
	if (k->proto != IPPROTO_TCP && k->proto != IPPROTO_UDP)
		return PARSE_PASS;
	if (iph->frag_off & bpf_htons(IP_MF_ | IP_OFFSET_))
		return PARSE_STEER; /* L3-only hash: every fragment of a datagram lands together */
	return parse_ports(pos + hlen, end, k) == 0 ? PARSE_STEER : PARSE_BAD;
}

static __always_inline enum parse_result parse_ipv6(void *pos, void *end, struct flow_key *k)
{
	struct ipv6hdr *ip6 = pos;
	__u8 next;
	int i;

	if ((void *)(ip6 + 1) > end)
		return PARSE_BAD;
	if (ip6->version != 6)
		return PARSE_BAD;
	k->family = 6;
	__builtin_memcpy(k->src, &ip6->saddr, 16);
	__builtin_memcpy(k->dst, &ip6->daddr, 16);
	next = ip6->nexthdr;
	pos = ip6 + 1;

#pragma unroll
	for (i = 0; i < MAX_V6_EXT_HDRS; i++) {
		if (next == IPPROTO_HOPOPTS || next == IPPROTO_ROUTING || next == IPPROTO_DSTOPTS) {
			__u8 *ext = pos;

			if ((void *)(ext + 2) > end)
				return PARSE_BAD;
			next = ext[0];
			pos += (ext[1] + 1) * 8;
			continue;
		}
		if (next == IPPROTO_FRAGMENT) {
			__u8 *frag = pos;

			if ((void *)(frag + 8) > end)
				return PARSE_BAD;
			k->proto = frag[0];
			/* Any fragment: L3-only hash, like IPv4 (the first one's ports are not repeated). */
			return (k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP) ? PARSE_STEER : PARSE_PASS;
		}
		break;
	}
	k->proto = next;
	if (next != IPPROTO_TCP && next != IPPROTO_UDP)
		return PARSE_PASS; /* ICMPv6 (neighbour discovery!) and anything else go to the stack */
	return parse_ports(pos, end, k) == 0 ? PARSE_STEER : PARSE_BAD;
}

static __always_inline enum parse_result parse(struct xdp_md *ctx, struct flow_key *k)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *pos;
	__u16 proto;
	int i;

	if ((void *)(eth + 1) > end)
		return PARSE_BAD;
	proto = eth->h_proto;
	pos = eth + 1;

#pragma unroll
	for (i = 0; i < MAX_VLAN_TAGS; i++) {
		if (proto != bpf_htons(ETH_P_8021Q_) && proto != bpf_htons(ETH_P_8021AD_))
			break;
		if (pos + 4 > end)
			return PARSE_BAD;
		proto = *(__u16 *)(pos + 2);
		pos += 4;
	}
	if (proto == bpf_htons(ETH_P_IP))
		return parse_ipv4(pos, end, k);
	if (proto == bpf_htons(ETH_P_IPV6))
		return parse_ipv6(pos, end, k);
	if (proto == bpf_htons(ETH_P_8021Q_) || proto == bpf_htons(ETH_P_8021AD_))
		return PARSE_BAD; /* more tags than we parse */
	return PARSE_PASS;      /* ARP, LLDP, ... */
}

SEC("xdp")
int xdp_lb(struct xdp_md *ctx)
{
	__u64 bytes = (__u64)(ctx->data_end - ctx->data);
	struct flow_key key = {};
	enum parse_result res;
	struct lut *lut;
	__u32 zero = 0, *active, *sticky, *seed, target, pos;

	res = parse(ctx, &key);
	if (res == PARSE_BAD) {
		count(LB_STAT_UNPARSED, bytes);
		return XDP_PASS;
	}
	if (res == PARSE_PASS)
		goto pass;

	active = bpf_map_lookup_elem(&lb_active, &zero);
	if (!active)
		goto pass;
	lut = bpf_map_lookup_elem(&lb_luts, active);
	if (!lut || lut->n_slots == 0 || lut->n_slots > LB_LUT_SIZE)
		goto pass;

	if (lut->flags & LB_F_STICKY) {
		sticky = bpf_map_lookup_elem(&lb_flows, &key);
		if (sticky) {
			target = *sticky;
			asm volatile("" : "+r"(target));
			/* A flow pinned to a target the new profile drains is re-hashed on purpose. */
			if (target < LB_MAX_TARGETS && lut->weights[target] > 0)
				goto decided;
		}
	}

	seed = bpf_map_lookup_elem(&lb_seed, &zero);
	pos = flow_hash(&key, seed ? *seed : LB_LEGACY_SEED) % lut->n_slots;
	/* clang proves pos < n_slots and drops the check below; hide pos so the verifier sees it. */
	asm volatile("" : "+r"(pos));
	if (pos >= LB_LUT_SIZE)
		goto pass;
	target = lut->slot[pos];
	if (target >= LB_MAX_TARGETS)
		goto pass;
	if (lut->flags & LB_F_STICKY)
		bpf_map_update_elem(&lb_flows, &key, &target, BPF_ANY);

decided:
	count(target, bytes);
	if (lut->flags & LB_F_OBSERVE) {
		count(LB_STAT_OBSERVED, bytes);
		return XDP_PASS;
	}
	/* An empty devmap slot falls back to XDP_PASS (the low bits of flags). */
	return bpf_redirect_map(&lb_targets, target, XDP_PASS);

pass:
	count(LB_STAT_PASSED, bytes);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
