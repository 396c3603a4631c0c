// Probes for properties of the host, not of sandfence: a test that needs one
// asks here and says SKIPPED with the reason when the host lacks it, instead
// of failing (or passing without testing anything). Each probe runs once per
// test process and is cached.
#ifndef SANDFENCE_TESTS_SUPPORT_HOST_PROBE_H_
#define SANDFENCE_TESTS_SUPPORT_HOST_PROBE_H_

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace sandfence::testing {

// The 32-bit system call entry (int $0x80) works for a 64-bit process:
// some hypervisors fault the instruction (SIGSEGV) though the kernel has
// CONFIG_IA32_EMULATION. Probed in a child that makes one such call.
const absl::Status& HostInt80();

// io_uring can be set up by an unconfined root process (kernel.io_uring_
// disabled may forbid it; then io_uring rows would be refused by the host,
// not by sandfence, and prove nothing).
const absl::Status& HostIoUring();

// ::1 is configured on loopback (IPv6 may be disabled on the host).
const absl::Status& HostIpv6Loopback();

// Yama lets a process ptrace its own descendants (kernel.yama.ptrace_scope
// absent, 0 or 1); at 2 or 3 only CAP_SYS_PTRACE (or nobody) may, and a
// non-root test actor's ptrace is refused by Yama before sandfence sees it.
const absl::Status& HostYamaAllowsPtrace();

// The kernel has what sandfence's egress programs need: the SO_NETNS_COOKIE
// socket option (Linux 5.14+) and the bpf_loop helper (5.17+). Where it
// lacks them, sandfence refuses egress (tested as such); cases that need
// egress to run skip with this reason. Probed independently of the
// controller, so a controller that refuses a capable kernel still fails.
const absl::Status& HostKernelRunsEgress();

// The kernel has the bpf_get_current_task_btf helper (Linux 5.11+) that the
// lsm enforcer's programs call, beyond running BPF LSM at all (ProbeBpfLsm).
const absl::Status& HostKernelRunsLsmEnforcer();

// The kernel has the bpf_task_from_vpid and bpf_send_signal_task kfuncs
// (Linux 6.13+) that the signal enforcer's programs call.
const absl::Status& HostKernelRunsSignalEnforcer();

// The kernel has the cgroup connect_unix/sendmsg_unix hooks (Linux 6.7+)
// that judge a sandbox's Unix sockets; without them, phases that check Unix
// sockets are refused. Probed by loading a program for the attach type,
// independently of the controller.
const absl::Status& HostKernelHasUnixHooks();

// Something judges a sandbox's Unix sockets here: the cgroup hooks above,
// or BPF LSM's unix_stream_connect/unix_may_send where BPF LSM runs (the
// VM's 6.1). Without either, phases that check Unix sockets are refused.
const absl::Status& HostChecksUnixSockets();

}  // namespace sandfence::testing

// Skips the current test with the probe's reason when the host lacks it.
#define SANDFENCE_REQUIRE_HOST(probe)                     \
  do {                                                    \
    const absl::Status& sandfence_host_probe = (probe);   \
    if (!sandfence_host_probe.ok()) {                     \
      GTEST_SKIP() << "host lacks what this test needs: " \
                   << sandfence_host_probe.message();     \
    }                                                     \
  } while (0)

#endif  // SANDFENCE_TESTS_SUPPORT_HOST_PROBE_H_
