// The command line's side of the daemon's gRPC socket: one way to reach it
// and one way to tell "no daemon answered" from the daemon's own refusals,
// for every subcommand that calls it (daemon_command, oci_hook_command).
#ifndef SANDFENCE_USERSPACE_CLI_DAEMON_CLIENT_H_
#define SANDFENCE_USERSPACE_CLI_DAEMON_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "sandfence/v1/daemon.grpc.pb.h"

namespace sandfence {

std::unique_ptr<v1::Sandfence::Stub> ConnectDaemon(const std::string& socket);

// The call's status. A daemon that is not there (no connection, or no
// answer before the deadline) is Unavailable, retryable, and said plainly,
// with `consequence` appended; anything the daemon itself answered keeps
// its own code and message.
absl::Status DaemonCallStatus(const grpc::Status& s, const std::string& socket,
                              absl::string_view consequence = "");

}  // namespace sandfence

#endif  // SANDFENCE_USERSPACE_CLI_DAEMON_CLIENT_H_
