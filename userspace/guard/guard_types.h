// The process guard's vocabulary: modes a policy asks for, the enforcer
// that runs, and the events the kernel reports, decoded for records.
#ifndef SANDFENCE_GUARD_GUARD_TYPES_H_
#define SANDFENCE_GUARD_GUARD_TYPES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "guard/guard_abi.h"

namespace sandfence {

// What a policy (or `sandfence run --guard`) asks for.
enum class GuardMode {
  kAuto,      // lsm; else landlock for processes sandfence starts; else
              // signal; else refuse
  kLsm,       // lsm or refuse (exit 78)
  kSignal,    // the tp_btf + SIGKILL fallback, even where lsm would load
  kOff,       // no process guard
  kLandlock,  // Landlock + seccomp on the processes sandfence starts, or
              // refuse
};

// What actually runs; every record names it.
enum class Enforcer {
  kOff,
  kLsm,       // BPF LSM programs on the host, for the sandbox's cgroup
  kSignal,    // tracepoints + SIGKILL on the host, for the sandbox's cgroup
  kLandlock,  // Landlock + seccomp in each process sandfence starts
};

// "auto", "lsm", "signal", "landlock", "off"; anything else is Malformed.
absl::StatusOr<GuardMode> ParseGuardMode(absl::string_view text);
absl::string_view GuardModeName(GuardMode mode);
absl::string_view EnforcerName(Enforcer enforcer);

// Names of the ABI's enum values as records spell them ("ptrace_attach",
// "killed", "environ", ...); "unknown" for a value this build does not know.
absl::string_view GuardWhatName(uint32_t what);
absl::string_view GuardActionName(uint32_t action);
absl::string_view GuardEnforcerName(uint32_t enforcer);
absl::string_view ProcClassName(uint32_t proc_class);

// One line for logs and test failures: who did what to whom, and the outcome.
std::string DescribeGuardEvent(const sf_guard_event& event);

}  // namespace sandfence

#endif  // SANDFENCE_GUARD_GUARD_TYPES_H_
