/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The egress ABI: every struct and constant shared by the BPF programs in
 * this folder and the C++ controller. Both sides include this one header and
 * assert the sizes, so a layout change breaks the build, not the kernel.
 *
 * Byte order: addresses are network order (as the kernel hands them to
 * sock_addr programs); ports are host order.
 */
#ifndef SANDFENCE_BPF_EGRESS_ABI_H
#define SANDFENCE_BPF_EGRESS_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "host/host_abi.h"

#ifdef __cplusplus
#define SF_STATIC_ASSERT static_assert
#else
#define SF_STATIC_ASSERT _Static_assert
#endif

/*
 * How deep below the cgroup root the programs look for a sandbox: a sandbox
 * deeper than this is refused, and a task deeper than this in a sandbox is
 * denied (its ancestry cannot be judged whole).
 */
#define SF_MAX_CGROUP_DEPTH 16

/* Port ranges one CIDR entry can hold (the compiler refuses more). */
#define SF_MAX_PORT_RANGES 8
/* No rule matched / no rule applies. */
#define SF_NO_RULE 0xffffffffu

#define SF_MAX_SANDBOXES 65536
#define SF_MAX_EXACT_RULES (1u << 20)
#define SF_MAX_CIDR_RULES (1u << 18)
#define SF_SEEN_ENTRIES 65536
/*
 * sf_doomed: generations whose entries a controller has queued for deletion
 * (key: the generation; value: the driver slot of the controller). No
 * program reads it: it is the controller's journal, pinned with the set, so
 * that deletes a killed controller had queued are completed by the one that
 * forgets its dead driver. A generation is doomed only once no sandbox
 * refers to it, so completing the deletes is always safe.
 */
#define SF_DOOMED_ENTRIES 65536
/*
 * Addresses the DNS filter learned, per family: 2^18 entries (~100 bytes of
 * key and value each, allocated on use) serve, e.g., 256 sandboxes that each
 * keep a thousand live names' addresses; CollectExpired() frees them.
 */
#define SF_MAX_LEARNED (1u << 18)

/*
 * Every sandbox's DNS filter target (sf_dns_targets) lies in this reserved
 * IPv4 /16 inside loopback: 127.83.0.0/16 (host order here; "S" is 83). A
 * restricted sandbox can reach no address in it directly, so none can reach
 * another sandbox's filter and be taken for that sandbox.
 */
#define SF_DNS_FILTER_NET 0x7f530000u
#define SF_DNS_FILTER_PREFIX 16
#define SF_DNS_FILTER_MASK 0xffff0000u
/* The port the sock_addr hooks send to the filter (UDP and TCP). */
#define SF_DNS_PORT 53

/* sf_sandbox.flags */
#define SF_SB_RESTRICTED (1u << 0)   /* the allowlist applies */
#define SF_SB_OWN_LOOPBACK (1u << 1) /* a private netns may use its loopback */
#define SF_SB_AUDIT_ALLOW_ALL (1u << 2)   /* an event for every allow */
#define SF_SB_AUDIT_ALLOW_FIRST (1u << 3) /* ...for the first per destination */
/* The phase's DNS is filtered: port 53 goes to the sandbox's filter target,
 * and the addresses it learned (sf_learned4/6) open their grants. Only
 * together with SF_SB_RESTRICTED. */
#define SF_SB_DNS_FILTER (1u << 4)
/* The phase judges AF_UNIX connect/sendmsg (connect_unix, sendmsg_unix):
 * only the sandbox's own sockets and the names it lists. Only together
 * with SF_SB_RESTRICTED. */
#define SF_SB_UNIX_CHECKED (1u << 5)
/* Audit only (enforce: AUDIT): what this sandbox's phase would deny is
 * allowed and reported as SF_VERDICT_AUDIT_DENY. Relaxes this sandbox's own
 * rules only (sf_audit_relaxes): never another sandbox's deny, nor the
 * filters' range, sandfence's own sockets or a task too deep to judge.
 * Only together with SF_SB_RESTRICTED. */
#define SF_SB_AUDIT (1u << 6)
/* The rollout has an egress budget (sf_budgets): an allowed connect or
 * datagram is counted against it, and denied past it. Restricted phases
 * only; the counts carry across phases. */
#define SF_SB_BUDGET (1u << 7)
/* Every process of the sandbox connects to Unix paths through sandfence's
 * supervisor (seccomp user notification), which checks the socket the path
 * reaches and connects on the sandbox's behalf (sf_unix_brokered). The
 * hooks then never take a path for the sandbox's own by its name: no bind
 * tracker is needed. Only with SF_SB_UNIX_CHECKED. */
#define SF_SB_UNIX_BROKER (1u << 8)
/* Every process of the sandbox is in a Landlock domain that scopes
 * abstract Unix sockets (ABI 6+): the kernel refuses one bound outside the
 * domain, so an abstract name the phase does not list is the sandbox's own
 * or unreachable. Only with SF_SB_UNIX_CHECKED. */
#define SF_SB_UNIX_SCOPED (1u << 9)
/* No program reads it: the sandbox relies on the host-wide bind tracker
 * (a phase of its policy checks Unix sockets and no supervisor brokers its
 * paths). The tracker stays attached while some sandbox carries it, and
 * only then; kept in every phase, so a successor knows it too. */
#define SF_SB_UNIX_TRACKED (1u << 10)

/*
 * Value of sf_sandboxes, keyed by the sandbox cgroup's id (__u64). The map
 * is not preallocated, so an update replaces the whole element and a
 * program reading it sees the old value or the new one, never a mix.
 */
struct sf_sandbox {
	__u32 generation; /* keys the rule maps; flipped on a phase switch */
	__u32 flags;
	/* The owner's index of the phase in force: written in the same update
	 * as the generation, so the kernel is the truth about the phase. */
	__u16 phase;
	__u8 ring;   /* the owner's slot in sf_rings: where its events go */
	__u8 pad;
	__u32 reserved;
};
SF_STATIC_ASSERT(sizeof(struct sf_sandbox) == 16, "sf_sandbox layout");

/*
 * Value of sf_levels, an array of one: the shallowest cgroup level that has
 * held a sandbox since the maps were made (0: none yet). The walks start
 * there instead of at level 1: no sandbox can be above it. Only ever
 * lowered, and lowered before a sandbox at a new level is written or
 * attached, so a walk never skips a sandbox that judges it.
 */
struct sf_levels {
	__u32 shallowest;
	__u32 pad;
};
SF_STATIC_ASSERT(sizeof(struct sf_levels) == 8, "sf_levels layout");

/* Value of sf_counters, keyed by the sandbox cgroup's id. */
struct sf_counters {
	__u64 allowed;
	__u64 denied;
	__u64 events_lost; /* ring-buffer reserve failures */
	/*
	 * Allows the audit setting chose not to report (first-per-destination
	 * repeats, or none): allowed + denied - allowed_unreported events were
	 * meant for the ring buffer, so records can check nothing went missing.
	 */
	__u64 allowed_unreported;
	/* Of the allowed: attempts an audit-only phase would have denied (each
	 * one reported as SF_VERDICT_AUDIT_DENY). */
	__u64 audit_denied;
};
SF_STATIC_ASSERT(sizeof(struct sf_counters) == 40, "sf_counters layout");

/* sf_exact4: one (protocol, address, port) per entry. */
struct sf_exact4_key {
	__u32 generation;
	__u8 protocol; /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 pad;
	__u16 port;
	__u32 addr;
};
SF_STATIC_ASSERT(sizeof(struct sf_exact4_key) == 12, "sf_exact4_key layout");

struct sf_exact6_key {
	__u32 generation;
	__u8 protocol;
	__u8 pad;
	__u16 port;
	__u8 addr[16];
};
SF_STATIC_ASSERT(sizeof(struct sf_exact6_key) == 24, "sf_exact6_key layout");

/* Value of the exact maps: which compiled rule allowed it. */
struct sf_rule_ref {
	__u32 rule_id;
};
SF_STATIC_ASSERT(sizeof(struct sf_rule_ref) == 4, "sf_rule_ref layout");

/*
 * LPM keys. The prefix covers generation, protocol and pad (64 bits) and
 * then the address prefix, so a lookup never crosses a generation or a
 * protocol: prefixlen = SF_LPM_FIXED_BITS + address prefix length.
 */
#define SF_LPM_FIXED_BITS 64
struct sf_cidr4_key {
	__u32 prefixlen;
	__u32 generation;
	__u8 protocol;
	__u8 pad[3];
	__u32 addr;
};
SF_STATIC_ASSERT(sizeof(struct sf_cidr4_key) == 16, "sf_cidr4_key layout");

struct sf_cidr6_key {
	__u32 prefixlen;
	__u32 generation;
	__u8 protocol;
	__u8 pad[3];
	__u8 addr[16];
};
SF_STATIC_ASSERT(sizeof(struct sf_cidr6_key) == 28, "sf_cidr6_key layout");

struct sf_port_range {
	__u16 first;
	__u16 last;
	__u32 rule_id;
};

/*
 * Value of the LPM maps. The longest prefix wins in an LPM trie, so each
 * entry carries the port ranges of every shorter prefix that contains it
 * (the controller merges them): the one lookup is the whole answer.
 */
struct sf_cidr_value {
	__u32 nranges;
	__u32 pad;
	struct sf_port_range ranges[SF_MAX_PORT_RANGES];
};
SF_STATIC_ASSERT(sizeof(struct sf_cidr_value) == 8 + 8 * SF_MAX_PORT_RANGES,
		 "sf_cidr_value layout");

/*
 * Value of sf_dns_targets, keyed by the sandbox cgroup's id (__u64): where
 * its DNS queries go. Per sandbox, not per phase: a phase switch keeps it.
 */
struct sf_dns_target {
	__u32 addr; /* IPv4, network order, inside SF_DNS_FILTER_NET */
	__u16 port; /* host order */
	__u16 pad;
};
SF_STATIC_ASSERT(sizeof(struct sf_dns_target) == 8, "sf_dns_target layout");

/*
 * sf_learned4/6: an address the DNS filter let a sandbox resolve, valid in
 * one generation (a phase switch drops them with the rules) until it
 * expires. Like the exact keys but without the port: the value holds the
 * ports of the grants the name opened.
 */
struct sf_learned4_key {
	__u32 generation;
	__u8 protocol;
	__u8 pad[3];
	__u32 addr;
};
SF_STATIC_ASSERT(sizeof(struct sf_learned4_key) == 12,
		 "sf_learned4_key layout");

struct sf_learned6_key {
	__u32 generation;
	__u8 protocol;
	__u8 pad[3];
	__u8 addr[16];
};
SF_STATIC_ASSERT(sizeof(struct sf_learned6_key) == 24,
		 "sf_learned6_key layout");

struct sf_learned_value {
	/* CLOCK_BOOTTIME (bpf_ktime_get_boot_ns): judged absent from then on */
	__u64 expires_ns;
	__u32 nranges;
	__u32 pad;
	struct sf_port_range ranges[SF_MAX_PORT_RANGES];
};
SF_STATIC_ASSERT(sizeof(struct sf_learned_value) == 16 + 8 * SF_MAX_PORT_RANGES,
		 "sf_learned_value layout");

/*
 * Per socket (sk storage sf_dns_orig): the destination a redirected socket
 * asked for and the target it was sent to instead, so that recvmsg and
 * getpeername show the client the server it expects.
 */
struct sf_dns_orig {
	__u32 addr[4];     /* as the hook saw it: IPv4 in addr[0] */
	__u16 port;        /* host order */
	__u8 family;       /* AF_INET (connect4/sendmsg4) or AF_INET6 */
	/*
	 * Runs of the same hook still to come in the call that redirected:
	 * a task in nested sandboxes runs the hook once per sandbox's link,
	 * and the later runs see the target, not port 53.
	 */
	__u8 reruns;
	__u32 target_addr; /* network order */
	__u16 target_port; /* host order */
	__u16 pad2;
};
SF_STATIC_ASSERT(sizeof(struct sf_dns_orig) == 28, "sf_dns_orig layout");

/*
 * AF_UNIX names: a path ("/run/x.sock", its bytes up to the first NUL) or
 * an abstract name (the bytes after the leading NUL, abstract = 1). Bytes
 * past len are zero, so the key hashes the name alone.
 */
#define SF_UNIX_NAME_MAX 108 /* sizeof(sockaddr_un.sun_path) */
#define SF_MAX_UNIX_RULES 65536
#define SF_MAX_UNIX_PROTECTED 64
/* Names bound inside sandboxes (LRU: an evicted one is denied). */
#define SF_MAX_UNIX_BOUND 65536
/* Connects the supervisor is making on a sandbox's behalf
 * (sf_unix_brokered: socket cookie -> the supervisor thread's pid_tgid). */
#define SF_MAX_UNIX_BROKERED 1024

/*
 * The key of the name maps. A path is its bytes (len 0: a path ends at its
 * first NUL, and the bytes after it are zero); an abstract name is the
 * bytes after its leading NUL, exactly len of them (it may hold NULs). The
 * rest of name[] is zero, so equal names are equal keys whatever address
 * length the caller gave. A path with bytes after its NUL matches nothing,
 * so it is denied (it could only be a disguise).
 * - sf_unix_rules: scope = the phase's generation (names it lists);
 * - sf_unix_protected: scope = 0 (names no sandbox reaches);
 * - sf_unix_bound: who bound a name last (the bind tracker sees every
 *   AF_UNIX bind on the host). Abstract names live per network namespace,
 *   so their scope is its cookie; paths live in the file system (scope 0);
 * - sf_unix_seen: allows already reported (scope = sandbox, aux =
 *   generation).
 */
struct sf_unix_key {
	__u64 scope;
	__u32 aux;
	__u16 len;
	__u8 abstract;
	__u8 pad;
	char name[SF_UNIX_NAME_MAX];
	__u8 pad2[4];
};
SF_STATIC_ASSERT(sizeof(struct sf_unix_key) == 128, "sf_unix_key layout");

/*
 * sf_unix_verify, keyed by the client socket's cookie: a connect that the
 * hook allowed only because the sandbox bound the path, to be checked at
 * the system call's exit against the socket it reached.
 */
struct sf_unix_pending {
	__u64 sandbox;	  /* the deepest sandbox that allowed it as its own */
	__u32 level;	  /* that sandbox's cgroup level */
	__u32 generation; /* its generation then */
	__u8 ring;
	__u8 pad[7];
};
SF_STATIC_ASSERT(sizeof(struct sf_unix_pending) == 24,
		 "sf_unix_pending layout");

/* The binder's cgroup ancestry (ids[0] at level 1), as sf_walk.ids. */
struct sf_unix_binder {
	__u64 ids[SF_MAX_CGROUP_DEPTH];
};
SF_STATIC_ASSERT(sizeof(struct sf_unix_binder) == 8 * SF_MAX_CGROUP_DEPTH,
		 "sf_unix_binder layout");

/* Key of sf_seen: allowed destinations already reported (FIRST mode). */
struct sf_seen_key {
	__u64 sandbox;
	__u32 generation;
	__u8 protocol;
	__u8 family;
	__u16 port;
	__u8 addr[16];
};
SF_STATIC_ASSERT(sizeof(struct sf_seen_key) == 32, "sf_seen_key layout");

/*
 * Egress budgets (issue 40): what a rollout may send through what its
 * phases allow, counted in the kernel per sandbox, across phases.
 * SF_MAX_BUDGET_DESTS destinations are counted host-wide, at most
 * SF_BUDGET_DESTS_PER_SANDBOX of them for one sandbox: a sandbox past that
 * sends to no new destination (fail closed), and never crowds out another.
 */
#define SF_MAX_BUDGET_DESTS (1u << 16)
#define SF_BUDGET_DESTS_PER_SANDBOX 1024

/*
 * Value of sf_budgets, keyed by the sandbox cgroup's id. The controller
 * writes the limits once, when it adds the sandbox; the programs count in
 * place with atomics, reserving before they admit (a count never passes
 * its limit, whatever the CPUs race). 0 in a limit: none.
 */
struct sf_budget {
	__u64 max_connections;
	__u64 max_bytes;      /* payload bytes sent, every destination */
	__u64 max_dest_bytes; /* payload bytes sent to one address */
	__u64 connections;    /* sockets whose connect was allowed */
	__u64 bytes;          /* payload bytes admitted */
	__u64 dropped_packets; /* packets dropped past a byte budget */
	__u64 dropped_bytes;
	/* Addresses with a count in sf_budget_dests (64 bits: the programs
	 * are built for every BPF CPU version, which has 64-bit atomics). */
	__u64 dests;
	__u32 reported; /* SF_BUDGET_REPORTED_* already recorded */
	__u32 pad;
};
SF_STATIC_ASSERT(sizeof(struct sf_budget) == 72, "sf_budget layout");

/* Which overruns a sandbox's ring has been told of (once each). */
#define SF_BUDGET_REPORTED_BYTES (1u << 0)
#define SF_BUDGET_REPORTED_DEST_BYTES (1u << 1)
#define SF_BUDGET_REPORTED_DESTS (1u << 2)

/* Key of sf_budget_dests: bytes sent by one sandbox to one address. */
struct sf_budget_dest_key {
	__u64 sandbox;
	__u32 addr[4]; /* as in sf_dest: network order, IPv4 in addr[0] */
};
SF_STATIC_ASSERT(sizeof(struct sf_budget_dest_key) == 24,
		 "sf_budget_dest_key layout");

/* On a socket a budgeted sandbox's hook allowed: whose budget its packets
 * spend, and whether its connection was counted. */
struct sf_budget_sock {
	__u64 sandbox;
	__u32 counted; /* the connection is counted (nested hooks run again) */
	__u32 pad;
};
SF_STATIC_ASSERT(sizeof(struct sf_budget_sock) == 16,
		 "sf_budget_sock layout");

/* Event records on the sf_events ring buffer. */
enum sf_event_type {
	SF_EVENT_NET = 1,
	SF_EVENT_UNIX = 2, /* struct sf_unix_event */
};

enum sf_hook {
	SF_HOOK_CONNECT4 = 1,
	SF_HOOK_CONNECT6 = 2,
	SF_HOOK_SENDMSG4 = 3,
	SF_HOOK_SENDMSG6 = 4,
	SF_HOOK_SOCK_CREATE = 5,
	SF_HOOK_SKB_EGRESS = 6,
	SF_HOOK_CONNECT_UNIX = 7,
	SF_HOOK_SENDMSG_UNIX = 8,
	/* The BPF LSM enforcer of Unix sockets (kernels before 6.7). */
	SF_HOOK_UNIX_STREAM_CONNECT = 9,
	SF_HOOK_UNIX_MAY_SEND = 10,
	/* Not BPF: the socket-family supervisor (userspace/confine/
	 * socket_supervisor.h), a seccomp listener. socket() and socketpair()
	 * (protocol: the family asked for; 0 for the 32-bit socketcall);
	 * io_uring_setup(). */
	SF_HOOK_SOCKET = 11,
	SF_HOOK_IO_URING_SETUP = 12,
};

enum sf_verdict {
	SF_VERDICT_ALLOW = 1,
	SF_VERDICT_DENY = 2,
	/* allowed by an audit-only sandbox (SF_SB_AUDIT) that would have
	 * denied it: the reason is the denial's, as under SF_VERDICT_DENY */
	SF_VERDICT_AUDIT_DENY = 3,
};

enum sf_reason {
	SF_REASON_RULE = 1,          /* allowed by rule_id */
	SF_REASON_NO_RULE = 2,       /* restricted and no rule matched */
	SF_REASON_UNRESTRICTED = 3,  /* the sandbox's phase is inherit */
	SF_REASON_OWN_LOOPBACK = 4,  /* loopback of the sandbox's own netns */
	SF_REASON_NO_SANDBOX = 5,    /* hook ran but no sandbox is known */
	SF_REASON_SOCKET_TYPE = 6,   /* raw socket in a restricted sandbox */
	SF_REASON_PROTOCOL = 7,      /* not TCP or UDP in a restricted sandbox */
	/* the task sits deeper than SF_MAX_CGROUP_DEPTH: not judged whole */
	SF_REASON_TOO_DEEP = 8,
	/* allowed: a DNS query sent to the sandbox's DNS filter instead */
	SF_REASON_DNS_REDIRECT = 9,
	/* allowed: an address the DNS filter learned (rule_id: its grant) */
	SF_REASON_LEARNED = 10,
	/* denied: an address in SF_DNS_FILTER_NET (the filters' range) */
	SF_REASON_DNS_FILTER_RANGE = 11,
	/* denied: DNS is filtered but the sandbox has no filter target */
	SF_REASON_DNS_NO_TARGET = 12,
	/* denied: an unconnected IPv6 datagram to port 53 cannot be sent to
	 * the (IPv4) filter: the kernel refuses a mapped rewrite in sendmsg6 */
	SF_REASON_DNS_UNREDIRECTABLE = 13,
	/* allowed: a Unix socket name the phase lists */
	SF_REASON_UNIX_LISTED = 14,
	/* allowed: a Unix socket name bound last inside the same sandbox */
	SF_REASON_UNIX_OWN = 15,
	/* denied: a name no sandbox may reach (sandfence's own sockets) */
	SF_REASON_UNIX_PROTECTED = 16,
	/* allowed: the phase does not judge Unix sockets (unix UNCHECKED) */
	SF_REASON_UNIX_UNCHECKED = 17,
	/* denied after the fact: a connect allowed to a path the sandbox bound
	 * reached a socket outside it (the name was swapped, e.g. for a
	 * symbolic link); the process is killed before it returns */
	SF_REASON_UNIX_PEER_OUTSIDE = 18,
	/* denied: a socket family no hook judges (vsock, packet, ...) */
	SF_REASON_FAMILY = 19,
	/* denied: io_uring, whose IORING_OP_SOCKET makes sockets of any
	 * family without socket() */
	SF_REASON_IO_URING = 20,
	/* denied: a path the sandbox bound, where the socket reached cannot
	 * be checked before it is used: an addressed datagram (delivered
	 * before any check could see where), or a connect from a socket
	 * another process could hold (shared by fork, dup, SCM_RIGHTS or a
	 * shared descriptor table) when the connector is killed */
	SF_REASON_UNIX_UNVERIFIABLE = 21,
	/* denied: the rollout's egress budget (sf_budget) is spent: its
	 * connections, its bytes in all, the bytes to this address, or the
	 * number of addresses it may count */
	SF_REASON_BUDGET_CONNECTIONS = 22,
	SF_REASON_BUDGET_BYTES = 23,
	SF_REASON_BUDGET_DEST_BYTES = 24,
	SF_REASON_BUDGET_DESTS = 25,
	/* allowed: a path whose socket is held inside the sandbox, connected
	 * by sandfence's supervisor on the sandbox's behalf (SF_SB_UNIX_BROKER) */
	SF_REASON_UNIX_OWN_SOCKET = 26,
	/* allowed: an abstract name the phase does not list, in a sandbox whose
	 * Landlock domain refuses those bound outside it (SF_SB_UNIX_SCOPED) */
	SF_REASON_UNIX_SCOPED = 27,
	/* denied: a path that leads to a socket held outside the sandbox, by
	 * a name the phase does not list; refused by sandfence's supervisor
	 * before anything is reached (never sent by a program) */
	SF_REASON_UNIX_OUTSIDE_SOCKET = 28,
};

struct sf_net_event {
	__u16 type; /* SF_EVENT_NET */
	__u8 hook;
	__u8 verdict;
	__u8 reason;
	__u8 protocol;  /* IPPROTO_*, or the socket's protocol at creation */
	__u8 family;    /* AF_INET (also for IPv4-mapped IPv6) or AF_INET6 */
	__u8 sock_type; /* SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, ... */
	__u16 port;
	__u16 pad;
	__u32 rule_id;
	__u32 generation;
	__u32 pid; /* thread id */
	__u32 tgid;
	__u32 uid;
	__u32 gid;
	__u64 boot_ns;  /* bpf_ktime_get_boot_ns() */
	__u64 sandbox;  /* cgroup id of the sandbox that judged */
	__u64 cgroup;   /* cgroup id of the task (may be nested deeper) */
	__u8 addr[16];  /* IPv4 in the first 4 bytes */
	char comm[16];
};
SF_STATIC_ASSERT(sizeof(struct sf_net_event) == 96, "sf_net_event layout");

/*
 * A Unix-socket decision (connect_unix, sendmsg_unix): the net event with
 * family AF_UNIX, port 0 and no address, followed by the name.
 */
struct sf_unix_event {
	struct sf_net_event net; /* net.type = SF_EVENT_UNIX */
	__u16 len;
	__u8 abstract;
	__u8 pad[5];
	char name[SF_UNIX_NAME_MAX];
	__u8 pad2[4];
};
SF_STATIC_ASSERT(sizeof(struct sf_unix_event) == 96 + 8 + 112,
		 "sf_unix_event layout");

/* One sandbox's verdict on one destination (egress_verdict.bpf.h). */
struct sf_decision {
	__u8 verdict;
	__u8 reason;
	__u16 pad;
	__u32 rule_id;
};
SF_STATIC_ASSERT(sizeof(struct sf_decision) == 8, "sf_decision layout");

/* Input of the raw_tp test harness (egress_harness.bpf.c). */
struct sf_harness_in {
	struct sf_sandbox sandbox;
	__u8 family;   /* AF_INET or AF_INET6, as the hook saw it */
	__u8 protocol;
	__u8 own_netns;
	__u8 pad;
	__u16 port;
	__u16 pad2;
	__u32 addr[4]; /* as in sockaddr: IPv6 may be v4-mapped */
};
SF_STATIC_ASSERT(sizeof(struct sf_harness_in) == 40, "sf_harness_in layout");

/*
 * Connections cut at a phase switch (egress_cut.bpf.c). The reading thread
 * asks (sf_cut_req, keyed by its thread id: several processes share the
 * programs) and the iterator writes one sf_cut_entry per socket it
 * destroyed, or would have (destroy_err < 0 when the kernel refused).
 */
struct sf_cut_request {
	__u64 sandbox; /* the sandbox whose phase changed: its cgroup id */
	__u32 level;   /* its cgroup's level */
	__u32 pad;
};
SF_STATIC_ASSERT(sizeof(struct sf_cut_request) == 16, "sf_cut_request layout");

struct sf_cut_entry {
	__u64 sandbox;     /* the sandbox whose rules deny the peer */
	__u32 addr[4];     /* the peer; IPv4 in addr[0], network order */
	__u16 port;        /* host order */
	__u8 family;
	__u8 protocol;
	__u8 reason;       /* enum sf_reason of the denial */
	__u8 state;        /* the socket's TCP state (UDP: 1, connected) */
	__u16 pad;
	__s32 destroy_err; /* bpf_sock_destroy's result: 0 cut */
	__u32 pad2;
};
SF_STATIC_ASSERT(sizeof(struct sf_cut_entry) == 40, "sf_cut_entry layout");

#endif /* SANDFENCE_BPF_EGRESS_ABI_H */
