/* Shared layout of the XDP load balancer's maps.
 *
 * The Python control plane (predictor/actuators/xdp_libbpf.py and xdp.py) packs the same structs with
 * `struct`; any change here must be mirrored there (the sizes are asserted by tests/bpf).
 */
#ifndef GCPX_XDP_LB_H
#define GCPX_XDP_LB_H

#define LB_MAX_TARGETS 16
#define LB_LUT_SIZE 256        /* slots per table: weights are apportioned over these */
#define LB_MAX_TABLES 2        /* double buffering: the control plane writes the inactive one */
#define LB_NAME_LEN 32
#define LB_FLOW_ENTRIES 65536  /* LRU flow table used only by sticky profiles */
/* The flow-hash seed before seeds were drawn per load: used when lb_seed cannot be read, and written into
 * lb_seed when a program loaded by an older build is upgraded, so that no flow moves across the upgrade. */
#define LB_LEGACY_SEED 0x9747b28c

/* Profile flags (struct lut.flags). */
#define LB_F_OBSERVE 0x1       /* count the decision, return XDP_PASS: an in-kernel dry run */
#define LB_F_STICKY 0x2        /* consult/populate the LRU flow table so switches keep flows */

/* Extra counters after the per-target ones in lb_stats. */
#define LB_STAT_PASSED (LB_MAX_TARGETS)      /* understood but not steered (ARP, ICMP, no table) */
#define LB_STAT_UNPARSED (LB_MAX_TARGETS + 1) /* truncated or malformed frames */
#define LB_STAT_OBSERVED (LB_MAX_TARGETS + 2) /* decisions taken in observe mode (also passed) */
#define LB_STAT_SLOTS (LB_MAX_TARGETS + 3)

struct lut {
	__u32 flags;
	__u32 n_slots;                 /* 0 means "no table": everything is passed */
	__u32 weights[LB_MAX_TARGETS]; /* kept for status and for sticky flows to a drained target */
	char name[LB_NAME_LEN];
	__u32 slot[LB_LUT_SIZE];       /* slot -> target index */
};

struct counter {
	__u64 packets;
	__u64 bytes;
};

struct flow_key {
	__u32 src[4];
	__u32 dst[4];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 family;
	__u16 pad;
};

#endif
