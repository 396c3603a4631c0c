// The gRPC shell over RolloutManager: translates requests and statuses,
// nothing else. The refusal class of a status is its gRPC code (absl and
// gRPC share the numbering): INVALID_ARGUMENT malformed, FAILED_PRECONDITION
// rejected, UNAVAILABLE transient.
#ifndef SANDFENCE_DAEMON_GRPC_SERVICE_H_
#define SANDFENCE_DAEMON_GRPC_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "daemon/rollout_manager.h"
#include "sandfence/v1/daemon.grpc.pb.h"

namespace sandfence {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

class SandfenceService final : public v1::Sandfence::Service {
 public:
  // watch_queue: events held for one WatchEvents caller that does not
  // read fast enough; past it they are missed (and the watcher told).
  explicit SandfenceService(RolloutManager* manager,
                            size_t watch_queue = kDefaultWatchQueue)
      : manager_(manager), watch_queue_(watch_queue) {}
  static constexpr size_t kDefaultWatchQueue = 65536;

  grpc::Status StartRollout(grpc::ServerContext* context,
                            const v1::StartRolloutRequest* request,
                            v1::StartRolloutResponse* response) override;
  grpc::Status SetPhase(grpc::ServerContext* context,
                        const v1::SetPhaseRequest* request,
                        v1::SetPhaseResponse* response) override;
  grpc::Status EndRollout(grpc::ServerContext* context,
                          const v1::EndRolloutRequest* request,
                          v1::EndRolloutResponse* response) override;
  grpc::Status GetRecord(grpc::ServerContext* context,
                         const v1::GetRecordRequest* request,
                         v1::GetRecordResponse* response) override;
  grpc::Status ListRollouts(grpc::ServerContext* context,
                            const v1::ListRolloutsRequest* request,
                            v1::ListRolloutsResponse* response) override;
  grpc::Status WatchEvents(
      grpc::ServerContext* context, const v1::WatchEventsRequest* request,
      grpc::ServerWriter<v1::RolloutEvent>* writer) override;
  grpc::Status Health(grpc::ServerContext* context,
                      const v1::HealthRequest* request,
                      v1::HealthResponse* response) override;

 private:
  RolloutManager* manager_;  // not owned
  size_t watch_queue_;
};

}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_GRPC_SERVICE_H_
