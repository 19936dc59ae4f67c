// SPDX-License-Identifier: GPL-2.0
/* Trivial programs that sit beside the load balancer.
 *
 * xdp_pass_all: the baseline bench/xdp.py compares the LB's per-packet cost against, and the program a
 *   bpf_link upgrade test swaps in.
 * xdp_count: attached to the receiving veth peers in tests, because veth delivers redirected frames
 *   only when the receiver runs XDP; it also counts what arrives, independent of the LB's own stats.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rx_count SEC(".maps");

SEC("xdp")
int xdp_pass_all(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int xdp_count(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *c = bpf_map_lookup_elem(&rx_count, &zero);

	if (c)
		(*c)++;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
