// SPDX-License-Identifier: GPL-2.0
/*
 * Test harness for the egress decision. BPF_PROG_TEST_RUN cannot run cgroup
 * sock_addr programs, so this raw_tp program runs the very same inline
 * decision (egress_verdict.bpf.h) on an input the test writes to .bss and
 * leaves the answer there.
 */
#include "egress/egress_verdict.bpf.h"

struct sf_harness_in sf_in = {};
struct sf_decision sf_out = {};

SEC("raw_tp")
int sf_harness(void *ctx)
{
	struct sf_dest d = {
		.family = AF_INET,
		.protocol = sf_in.protocol,
		.port = sf_in.port,
		.addr = { sf_in.addr[0] },
	};

	if (sf_in.family == AF_INET6)
		sf_dest_from6(&d, sf_in.addr);
	sf_decide(&sf_in.sandbox, &d, sf_in.own_netns, &sf_out);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
