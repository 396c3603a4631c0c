// A gRPC client of the daemon that tests run inside a sandbox, as a root
// agent would: it makes one call and exits with the call's gRPC status
// code (0 when it succeeded), printing "code N: message".
//
//   daemon_reach_client SOCKET set-phase ROLLOUT PHASE
//   daemon_reach_client SOCKET end ROLLOUT
//   daemon_reach_client SOCKET health
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "sandfence/v1/daemon.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s SOCKET set-phase ID PHASE | end ID | health\n",
                 argv[0]);
    return 100;
  }
  const std::string socket = argv[1];
  const std::string method = argv[2];
  std::unique_ptr<sandfence::v1::Sandfence::Stub> stub =
      sandfence::v1::Sandfence::NewStub(grpc::CreateChannel(
          "unix:" + socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::Status status;
  if (method == "set-phase" && argc == 5) {
    sandfence::v1::SetPhaseRequest req;
    req.set_rollout_id(argv[3]);
    req.set_phase(argv[4]);
    sandfence::v1::SetPhaseResponse resp;
    status = stub->SetPhase(&ctx, req, &resp);
  } else if (method == "end" && argc == 4) {
    sandfence::v1::EndRolloutRequest req;
    req.set_rollout_id(argv[3]);
    sandfence::v1::EndRolloutResponse resp;
    status = stub->EndRollout(&ctx, req, &resp);
  } else if (method == "health" && argc == 3) {
    sandfence::v1::HealthResponse resp;
    status = stub->Health(&ctx, {}, &resp);
  } else {
    std::fprintf(stderr, "unknown call %s\n", method.c_str());
    return 100;
  }
  std::printf("code %d: %s\n", static_cast<int>(status.error_code()),
              status.error_message().c_str());
  std::fflush(stdout);
  return static_cast<int>(status.error_code());
}
