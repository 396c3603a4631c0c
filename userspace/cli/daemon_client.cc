#include "cli/daemon_client.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "daemon/grpc_service.h"

namespace sandfence {

std::unique_ptr<v1::Sandfence::Stub> ConnectDaemon(const std::string& socket) {
  return v1::Sandfence::NewStub(grpc::CreateChannel(
      absl::StrCat("unix:", socket), grpc::InsecureChannelCredentials()));
}

absl::Status DaemonCallStatus(const grpc::Status& s, const std::string& socket,
                              absl::string_view consequence) {
  // gRPC's own transport failures say "connect"; an UNAVAILABLE the daemon
  // returned (a full map, say) is the daemon's answer and keeps its words.
  const bool unreachable =
      (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
       s.error_message().find("connect") != std::string::npos) ||
      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  if (!unreachable) return FromGrpcStatus(s);
  return Unavailable(absl::StrCat(
      "no sandfence daemon answers on ", socket, " (", s.error_message(), ")",
      consequence.empty() ? "" : ": ", consequence));
}

}  // namespace sandfence
