// Network namespaces other than this process's: made, opened, and worked
// in. A sandbox with a network namespace of its own has its DNS filter's
// listeners there (the sandbox's loopback), while the filter runs here.
//
// Work in a namespace runs on a short-lived thread that setns()es into it:
// the namespace of a thread is its own, so the rest of the process (and
// the upstream queries the filter sends) stays in the host's. Sockets made
// there keep their namespace for life, whichever thread serves them.
#ifndef SANDFENCE_SANDBOX_NETNS_H_
#define SANDFENCE_SANDBOX_NETNS_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace sandfence {

// A new network namespace with only its loopback, up; the fd holds it.
absl::StatusOr<UniqueFd> CreateNetns();

// The network namespace at `path` (/proc/PID/ns/net, /run/netns/NAME).
// Malformed when the file is not a network namespace.
absl::StatusOr<UniqueFd> OpenNetns(const std::string& path);

// Runs fn on a thread inside the namespace `netns_fd` names, and waits.
absl::Status InNetns(int netns_fd, absl::FunctionRef<absl::Status()> fn);

// In the calling thread's namespace: brings the loopback up if it is down
// (a 127/8 address can be bound only then). Rejected, with the reason, when
// it is down and cannot be brought up.
absl::Status EnsureLoopbackUp();

}  // namespace sandfence

#endif  // SANDFENCE_SANDBOX_NETNS_H_
