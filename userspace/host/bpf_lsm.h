// Whether this kernel runs BPF LSM programs: the guard's lsm enforcer and
// the Unix socket checks of kernels without cgroup connect_unix (before
// 6.7) both need it.
#ifndef SANDFENCE_USERSPACE_HOST_BPF_LSM_H_
#define SANDFENCE_USERSPACE_HOST_BPF_LSM_H_

#include "absl/status/status.h"

namespace sandfence {

// What to do when BPF LSM does not run, for error messages.
inline constexpr char kLsmAdvice[] =
    "boot the kernel with bpf in its LSM list (lsm=...,bpf on the command "
    "line, or CONFIG_LSM including bpf; needs CONFIG_BPF_LSM=y)";

// Whether BPF LSM programs run on this kernel, found by loading and
// attaching one and watching it run for an open() of ours (never by reading
// /sys/kernel/security/lsm). OK if it ran; otherwise Unavailable, or
// PermissionDenied without the privileges to load BPF, with the reason.
absl::Status ProbeBpfLsm();

}  // namespace sandfence

#endif  // SANDFENCE_USERSPACE_HOST_BPF_LSM_H_
