// The gRPC shell over RolloutManager: translates requests and statuses,
// nothing else. The refusal class of a status is its gRPC code (absl and
// gRPC share the numbering): INVALID_ARGUMENT malformed, FAILED_PRECONDITION
// rejected, UNAVAILABLE transient.
//
// The methods whose requests carry strings take their request as bytes and
// parse it here: gRPC's own parse answers a string that is not UTF-8
// (proto3 refuses those) with INTERNAL and an empty message; here it is
// INVALID_ARGUMENT naming the field.
#ifndef SANDFENCE_DAEMON_GRPC_SERVICE_H_
#define SANDFENCE_DAEMON_GRPC_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "daemon/call_pool.h"
#include "daemon/metrics_server.h"
#include "daemon/rollout_manager.h"
#include "google/protobuf/message.h"
#include "sandfence/v1/daemon.grpc.pb.h"

namespace sandfence {

// A refusal (malformed, rejected, unavailable) also carries a v1::Refusal
// in its details (daemon.proto): cause, retryable, and the phase, field and
// value the status's RefusalSubject names. Other errors carry none.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);
// The Refusal a status carries, if any.
std::optional<v1::Refusal> RefusalOfGrpc(const grpc::Status& status);
// What an UNAVAILABLE refusal suggests waiting before the next try.
inline constexpr uint32_t kRetryAfterMs = 1000;

// Parses a request's bytes into `message`. Malformed (INVALID_ARGUMENT)
// when they do not parse, naming the first string field, by its path
// ("policy_set.phase[1].name"), that is not valid UTF-8.
absl::Status ParseRequest(const std::string& bytes,
                          google::protobuf::Message* message);

using SandfenceRawBase = v1::Sandfence::WithRawCallbackMethod_StartRollout<
    v1::Sandfence::WithRawCallbackMethod_CheckRollout<
        v1::Sandfence::WithRawCallbackMethod_SetPhase<
            v1::Sandfence::WithRawCallbackMethod_EndRollout<
                v1::Sandfence::WithRawCallbackMethod_GetRecord<
                    v1::Sandfence::WithRawCallbackMethod_WatchEvents<
                        v1::Sandfence::Service>>>>>>;

class SandfenceService final : public SandfenceRawBase {
 public:
  // watch_queue: events held for one WatchEvents caller that does not
  // read fast enough; past it they are missed (and the watcher told).
  explicit SandfenceService(RolloutManager* manager,
                            size_t watch_queue = kDefaultWatchQueue)
      : manager_(manager), watch_queue_(watch_queue) {}
  static constexpr size_t kDefaultWatchQueue = 65536;

  grpc::ServerUnaryReactor* StartRollout(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CheckRollout(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SetPhase(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* EndRollout(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetRecord(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchEvents(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  grpc::Status ListRollouts(grpc::ServerContext* context,
                            const v1::ListRolloutsRequest* request,
                            v1::ListRolloutsResponse* response) override;
  grpc::Status Health(grpc::ServerContext* context,
                      const v1::HealthRequest* request,
                      v1::HealthResponse* response) override;
  grpc::Status EnterRollout(grpc::ServerContext* context,
                            const v1::EnterRolloutRequest* request,
                            v1::EnterRolloutResponse* response) override;

 private:
  RolloutManager* manager_;  // not owned
  size_t watch_queue_;
 public:
  // The pool's state, for the metrics page.
  CallMetrics call_metrics() const {
    return {pool_.in_flight(), pool_.refused(), pool_.capacity()};
  }

 private:
  // The unary rollout calls' workers (StartRollout, CheckRollout,
  // SetPhase, EndRollout, GetRecord).
  CallPool pool_;
};

}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_GRPC_SERVICE_H_
