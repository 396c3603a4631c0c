// A container's sandfence annotations, read as the StartRollout request
// they ask for: the same words as `sandfence run`'s flags, written in the
// container's config (podman --annotation, a pod's metadata.annotations).
//
//   sandfence.dev/network-access  inherit | model_only | model_and_tools
//   sandfence.dev/policy          a policy file in the daemon's --policy-dir
//                                 (exactly one of these two)
//   sandfence.dev/model           URL[,URL...]   the model server(s)
//   sandfence.dev/tool            [NAME=]URL[,...]  optional tool grants
//   sandfence.dev/required-tool   [NAME=]URL[,...]  required tool grants
//   sandfence.dev/allow           HOST:PORT[/tcp|/udp|/any][,...]
//   sandfence.dev/rollout-id      default: the container's id
//   sandfence.dev/phase           the phase to start in (default: the first)
#ifndef SANDFENCE_CLI_OCI_ANNOTATIONS_H_
#define SANDFENCE_CLI_OCI_ANNOTATIONS_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "oci/container.h"
#include "sandfence/v1/daemon.pb.h"

namespace sandfence {

inline constexpr char kAnnotationPrefix[] = "sandfence.dev/";

// Whether any annotation asks for sandfence (a container without one is
// not the hook's business).
bool HasSandfenceAnnotations(const std::map<std::string, std::string>& a);

// Whether the container is a pod's infrastructure ("pause") container:
// CRI-O and containerd give it the pod's annotations too, and it must not
// take the pod's rollout (its id, say) before the pod's own containers.
bool IsPodInfraContainer(const std::map<std::string, std::string>& a);

// The rollout id the annotations give the container (its own id if they
// name none).
std::string RolloutIdOf(const std::map<std::string, std::string>& a,
                        const std::string& container_id);

// The request that puts the container (at `placement`) under its
// annotations' policy. Malformed, naming the annotation and its value, for
// an unknown sandfence.dev/ key, a bad value, or neither or both of
// network-access and policy.
absl::StatusOr<v1::StartRolloutRequest> StartRequestFromAnnotations(
    const std::map<std::string, std::string>& a,
    const std::string& container_id, const ContainerPlacement& placement);

}  // namespace sandfence

#endif  // SANDFENCE_CLI_OCI_ANNOTATIONS_H_
