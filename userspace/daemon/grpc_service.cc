#include "daemon/grpc_service.h"

#include <deque>
#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/status.h"

namespace sandfence {
namespace {

template <typename T>
grpc::Status Reply(const absl::StatusOr<T>& result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *result;
  return grpc::Status::OK;
}

// Events for one watcher: filled on the reader thread, which must never
// block, so a slow watcher loses events (counted) instead.
class EventQueue {
 public:
  explicit EventQueue(size_t max) : max_(max) {}
  void Push(const v1::RolloutEvent& e) {
    absl::MutexLock lock(&mu_);
    if (events_.size() >= max_) {
      ++dropped_;
      return;
    }
    events_.push_back(e);
  }
  // The events queued, the first of them telling how many were missed
  // before it; and how many that was.
  std::deque<v1::RolloutEvent> Take(absl::Duration wait, uint64_t* missed) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::deque<v1::RolloutEvent>* q) { return !q->empty(); },
            &events_),
        wait);
    *missed = 0;
    if (!events_.empty() && dropped_ > 0) {
      events_.front().set_missed(dropped_);
      *missed = std::exchange(dropped_, 0);
    }
    return std::exchange(events_, {});
  }

 private:
  const size_t max_;
  absl::Mutex mu_;
  std::deque<v1::RolloutEvent> events_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

grpc::Status SandfenceService::StartRollout(grpc::ServerContext*,
                                            const v1::StartRolloutRequest* req,
                                            v1::StartRolloutResponse* resp) {
  return Reply(manager_->Start(*req), resp);
}

grpc::Status SandfenceService::SetPhase(grpc::ServerContext*,
                                        const v1::SetPhaseRequest* req,
                                        v1::SetPhaseResponse* resp) {
  return Reply(manager_->SetPhase(req->rollout_id(), req->phase()), resp);
}

grpc::Status SandfenceService::EndRollout(grpc::ServerContext*,
                                          const v1::EndRolloutRequest* req,
                                          v1::EndRolloutResponse* resp) {
  return Reply(manager_->End(req->rollout_id()), resp);
}

grpc::Status SandfenceService::GetRecord(grpc::ServerContext*,
                                         const v1::GetRecordRequest* req,
                                         v1::GetRecordResponse* resp) {
  return Reply(manager_->GetRecord(req->rollout_id()), resp);
}

grpc::Status SandfenceService::ListRollouts(grpc::ServerContext*,
                                            const v1::ListRolloutsRequest*,
                                            v1::ListRolloutsResponse* resp) {
  *resp = manager_->List();
  return grpc::Status::OK;
}

grpc::Status SandfenceService::WatchEvents(
    grpc::ServerContext* context, const v1::WatchEventsRequest* req,
    grpc::ServerWriter<v1::RolloutEvent>* writer) {
  auto queue = std::make_shared<EventQueue>(watch_queue_);
  absl::StatusOr<uint64_t> id =
      manager_->Watch(req->rollout_id(),
                      [queue](const v1::RolloutEvent& e) { queue->Push(e); });
  if (!id.ok()) return ToGrpcStatus(id.status());
  bool open = true;
  while (open && !context->IsCancelled()) {
    // Checked before taking, so that the events of the rollout's last
    // moments (drained at EndRollout) are still sent.
    open = manager_->IsOpen(req->rollout_id());
    uint64_t missed = 0;
    std::deque<v1::RolloutEvent> events =
        queue->Take(absl::Milliseconds(200), &missed);
    if (missed > 0) manager_->CountWatchMissed(missed);
    for (const v1::RolloutEvent& e : events) {
      if (!writer->Write(e)) {
        open = false;
        break;
      }
    }
  }
  manager_->Unwatch(*id);
  return grpc::Status::OK;
}

grpc::Status SandfenceService::Health(grpc::ServerContext*,
                                      const v1::HealthRequest*,
                                      v1::HealthResponse* resp) {
  *resp = manager_->Health();
  return grpc::Status::OK;
}

}  // namespace sandfence
