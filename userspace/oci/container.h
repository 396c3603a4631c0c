// What a container runtime tells an OCI hook about a container (its state,
// on the hook's stdin), and where that container lives on the host: its
// cgroup v2 directory and its network namespace. The runtime-neutral half
// of `sandfence oci-hook`; what the annotations ask for is the CLI's.
#ifndef SANDFENCE_OCI_CONTAINER_H_
#define SANDFENCE_OCI_CONTAINER_H_

#include <sys/types.h>

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sandfence {

// The OCI runtime spec's state (runtime-spec, "State"): what runc, crun and
// podman's hooks pass on stdin.
struct OciState {
  std::string id;
  std::string status;
  pid_t pid = 0;  // 0 once the container is gone (poststop)
  std::string bundle;
  std::map<std::string, std::string> annotations;
};

// Parses the state JSON. Malformed, naming the field, when `id` is missing
// or a field has the wrong type; unknown fields are ignored (the spec adds
// fields, runtimes add their own).
absl::StatusOr<OciState> ParseOciState(absl::string_view json);

// The annotations of the bundle's config.json: a runtime that leaves them
// out of the state (older runc) still has them there.
absl::StatusOr<std::map<std::string, std::string>> BundleAnnotations(
    const std::string& bundle);

// Where a container's processes are, seen from the host.
struct ContainerPlacement {
  std::string cgroup_path;  // absolute, under the cgroup v2 mount
  bool own_netns = false;   // a network namespace other than the hook's
  std::string netns_path;   // /proc/PID/ns/net when own_netns
};

// The cgroup and network namespace of the container whose first process is
// `pid` (the state's pid: at createRuntime it has not executed the
// container's program yet). Rejected when the container has no cgroup v2
// directory of its own (the hierarchy's root, or the hook's own cgroup:
// what crun and cgroupfs-driven runtimes give on hybrid hosts, which
// manage cgroup v1 only): enforcing there would govern the host.
absl::StatusOr<ContainerPlacement> PlaceContainer(
    pid_t pid);

}  // namespace sandfence

#endif  // SANDFENCE_OCI_CONTAINER_H_
