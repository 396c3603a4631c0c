// SPDX-License-Identifier: GPL-2.0
/*
 * The smallest program the build can produce: proves that clang, bpftool's
 * skeleton generation and the C++ side fit together, and serves as a
 * "can this kernel load BPF at all" probe.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__u64 sf_probe_runs = 0;

SEC("raw_tp")
int sf_probe(void *ctx)
{
	__sync_fetch_and_add(&sf_probe_runs, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
