// SPDX-License-Identifier: GPL-2.0
/*
 * Fixtures for bpf/tools/stack_check: a program whose call chain fits the
 * build's budget, and (SF_FIXTURE_CALLEE_BYTES=232) one that does not,
 * though the verifier's 512 bytes would take both. A raw_tp program calling
 * a global function; a helper fills each buffer whole, so that the whole
 * buffer is stack.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifndef SF_FIXTURE_CALLEE_BYTES
#define SF_FIXTURE_CALLEE_BYTES 64
#endif

__noinline int sf_fix_callee(int x)
{
	char buf[SF_FIXTURE_CALLEE_BYTES];

	bpf_get_current_comm(buf, sizeof(buf));
	return buf[x & 7];
}

SEC("raw_tp/sys_enter")
int sf_fix_entry(void *ctx)
{
	char buf[192];

	bpf_get_current_comm(buf, sizeof(buf));
	return sf_fix_callee(buf[1]);
}

char LICENSE[] SEC("license") = "GPL";
