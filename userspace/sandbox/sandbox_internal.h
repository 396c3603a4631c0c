// What the Sandbox's files share (sandbox.cc, sandbox_check.cc,
// sandbox_phases.cc, sandbox_guard.cc, sandbox_dns.cc, sandbox_record.cc).
// Private to userspace/sandbox.
#ifndef SANDFENCE_SANDBOX_SANDBOX_INTERNAL_H_
#define SANDFENCE_SANDBOX_SANDBOX_INTERNAL_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ip.h"
#include "compile/compiled_policy.h"
#include "guard/guard_types.h"
#include "sandbox/host_enforcement.h"

namespace sandfence {
namespace sandbox_internal {

// "a, b, c": the policy's phase names, for messages.
std::string PhaseNames(const CompiledPolicy& policy);

// The BPF guard a sandbox's cgroup gets (nullopt: none, confinement alone
// or off).
std::optional<GuardMode> BpfGuardMode(const GuardInfo& guard);

// The upstreams of the policy's DNS-filtered phases (nullopt: none is
// filtered). One filter serves a sandbox, so its phases must agree.
absl::StatusOr<std::optional<std::vector<HostPort>>> DnsUpstreams(
    const CompiledPolicy& policy);

}  // namespace sandbox_internal
}  // namespace sandfence

#endif  // SANDFENCE_SANDBOX_SANDBOX_INTERNAL_H_
