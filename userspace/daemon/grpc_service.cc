#include "daemon/grpc_service.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "daemon/log.h"
#include "events/event.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/unknown_field_set.h"
#include "records/boot_clock.h"

namespace sandfence {
namespace {

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

// Well-formed UTF-8 (no overlong forms, no surrogates, nothing past
// U+10FFFF): what proto3 demands of a string field.
bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

// The path of the first string field under `type` in `bytes` (raw wire
// format) that is not UTF-8; empty if none is found.
std::string FirstBadString(const std::string& bytes,
                           const google::protobuf::Descriptor* type,
                           const std::string& prefix, int depth,
                           std::string* value) {
  if (depth > 32) return "";
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes)) return "";
  std::vector<int> seen(static_cast<size_t>(type->field_count()), 0);
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField& f = fields.field(i);
    if (f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    const google::protobuf::FieldDescriptor* d =
        type->FindFieldByNumber(f.number());
    if (d == nullptr) continue;
    std::string name = absl::StrCat(prefix, d->name());
    if (d->is_repeated()) {
      absl::StrAppend(&name, "[", seen[static_cast<size_t>(d->index())]++, "]");
    }
    if (d->type() == google::protobuf::FieldDescriptor::TYPE_STRING) {
      if (!IsValidUtf8(f.length_delimited())) {
        *value = f.length_delimited();
        return name;
      }
    } else if (d->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) {
      std::string inner =
          FirstBadString(f.length_delimited(), d->message_type(),
                         absl::StrCat(name, "."), depth + 1, value);
      if (!inner.empty()) return inner;
    }
  }
  return "";
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  grpc::ByteBuffer copy(buffer);  // shares the slices
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!copy.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

grpc::Status Serialize(const google::protobuf::Message& m,
                       grpc::ByteBuffer* out) {
  bool own = false;
  return grpc::SerializationTraits<google::protobuf::Message>::Serialize(m, out,
                                                                         &own);
}

// A refusal because the pool is full, in the log at most every 10 s: the
// callers retry, and the operator must know the daemon is saturated.
void LogRefusedBusy(const absl::Status& s) {
  static std::atomic<int64_t> last_ms{0};
  const int64_t now = absl::ToUnixMillis(absl::Now());
  int64_t last = last_ms.load();
  if (now - last < 10000 || !last_ms.compare_exchange_strong(last, now)) {
    return;
  }
  LogWarning("refusing calls (sandfence_calls_refused_busy_total counts "
             "them): %s",
             StatusText(s));
}

// A unary call: parsed here, then served by the call pool (a callback must
// not block gRPC's threads; rollout calls may take seconds). A full pool
// answers UNAVAILABLE at once.
template <typename Request, typename Response, typename Fn>
grpc::ServerUnaryReactor* Unary(CallPool* pool,
                                grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* in,
                                grpc::ByteBuffer* out, Fn fn) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto request = std::make_shared<Request>();
  if (absl::Status s = ParseRequest(Flatten(*in), request.get()); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  absl::Status queued = pool->Submit([reactor, out, request, fn] {
    absl::StatusOr<Response> result = fn(*request);
    reactor->Finish(result.ok() ? Serialize(*result, out)
                                : ToGrpcStatus(result.status()));
  });
  if (!queued.ok()) {
    LogRefusedBusy(queued);
    reactor->Finish(ToGrpcStatus(queued));
  }
  return reactor;
}

// WatchEvents: the rollout's decisions as they come, until it ends or the
// watcher goes. One thread per watch writes, one write at a time.
class WatchReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  WatchReactor(RolloutManager* manager, size_t queue_size,
               const grpc::ByteBuffer* in)
      : manager_(manager), queue_(std::make_shared<EventQueue>(queue_size)) {
    if (absl::Status s = ParseRequest(Flatten(*in), &request_); !s.ok()) {
      Finish(ToGrpcStatus(s));
      return;
    }
    absl::StatusOr<uint64_t> id =
        request_.lines()
            ? manager_->WatchLines(
                  request_.rollout_id(),
                  [queue = queue_, ended = ended_,
                   rollout = request_.rollout_id()](const events::Event& e,
                                                    const std::string& line) {
                    v1::RolloutEvent out;
                    *out.mutable_time() = UnixNsToTimestamp(e.unix_ns);
                    out.set_rollout_id(e.rollout);
                    out.set_line(line);
                    queue->Push(out);
                    if (!rollout.empty() && e.rollout == rollout &&
                        e.kind == events::Kind::kPhase && e.ended) {
                      ended->store(true);
                    }
                  })
            : manager_->Watch(
                  request_.rollout_id(),
                  [queue = queue_](const v1::RolloutEvent& e) {
                    queue->Push(e);
                  });
    if (!id.ok()) {
      Finish(ToGrpcStatus(id.status()));
      return;
    }
    std::thread([this, id = *id] { Run(id); }).detach();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) stop_ = true;
    cv_.notify_all();
  }
  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  void OnDone() override { delete this; }

 private:
  void Run(uint64_t watch_id) {
    bool open = true;
    absl::Time closed_at = absl::InfiniteFuture();
    while (open && !Stopped()) {
      // Checked before taking, so that the events of the rollout's last
      // moments (drained at EndRollout) are still sent.
      if (!request_.lines()) {
        open = manager_->IsOpen(request_.rollout_id());
      } else if (!request_.rollout_id().empty()) {
        // Lines arrive from the stream's writer after the fact: the
        // rollout's last one (ended) closes the watch, or, should it never
        // come, two seconds after the rollout closed.
        if (!manager_->IsOpen(request_.rollout_id()) &&
            closed_at == absl::InfiniteFuture()) {
          closed_at = absl::Now();
        }
        open = !ended_->load() && absl::Now() - closed_at < absl::Seconds(2);
      }
      uint64_t missed = 0;
      std::deque<v1::RolloutEvent> events =
          queue_->Take(absl::Milliseconds(200), &missed);
      if (missed > 0) manager_->CountWatchMissed(missed);
      for (const v1::RolloutEvent& e : events) {
        if (!Write(e)) break;
      }
    }
    if (request_.lines()) {
      manager_->UnwatchLines(watch_id);
    } else {
      manager_->Unwatch(watch_id);
    }
    Finish(grpc::Status::OK);  // `this` may be gone after this
  }
  bool Stopped() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }
  // Writes one event and waits until it is sent; false once the watcher
  // is gone.
  bool Write(const v1::RolloutEvent& e) {
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) return false;
    buffer_.Clear();
    if (!Serialize(e, &buffer_).ok()) return true;
    writing_ = true;
    lock.unlock();
    StartWrite(&buffer_);
    lock.lock();
    cv_.wait(lock, [this] { return !writing_; });
    return !stop_;
  }

  RolloutManager* manager_;
  v1::WatchEventsRequest request_;
  std::shared_ptr<EventQueue> queue_;
  // Set by the line sink when the watched rollout's last line passed.
  std::shared_ptr<std::atomic<bool>> ended_ =
      std::make_shared<std::atomic<bool>>(false);
  std::mutex mu_;
  std::condition_variable cv_;
  bool writing_ = false;
  bool stop_ = false;
  grpc::ByteBuffer buffer_;
};

}  // namespace

namespace {

std::optional<v1::Refusal> RefusalFor(const absl::Status& status) {
  v1::Refusal out;
  switch (RefusalOf(status)) {
    case Refusal::kMalformed:
      out.set_cause(v1::Refusal::MALFORMED);
      break;
    case Refusal::kRejected:
      out.set_cause(v1::Refusal::REJECTED);
      break;
    case Refusal::kUnavailable:
      out.set_cause(v1::Refusal::UNAVAILABLE);
      out.set_retryable(true);
      out.set_retry_after_ms(kRetryAfterMs);
      break;
    default:
      return std::nullopt;
  }
  const RefusalSubject subject = SubjectOf(status).value_or(RefusalSubject{});
  out.set_phase(subject.phase);
  out.set_field(subject.field);
  out.set_value(subject.value);
  out.set_reason(subject.reason.empty() ? std::string(status.message())
                                        : subject.reason);
  return out;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering.
  const auto code = static_cast<grpc::StatusCode>(status.code());
  std::optional<v1::Refusal> refusal = RefusalFor(status);
  if (!refusal) return grpc::Status(code, std::string(status.message()));
  v1::RpcStatus details;
  details.set_code(static_cast<int32_t>(status.code()));
  details.set_message(std::string(status.message()));
  details.add_details()->PackFrom(*refusal);
  return grpc::Status(code, std::string(status.message()),
                      details.SerializeAsString());
}

std::optional<v1::Refusal> RefusalOfGrpc(const grpc::Status& status) {
  if (status.error_details().empty()) return std::nullopt;
  v1::RpcStatus details;
  if (!details.ParseFromString(status.error_details())) return std::nullopt;
  for (const google::protobuf::Any& any : details.details()) {
    v1::Refusal refusal;
    if (any.UnpackTo(&refusal)) return refusal;
  }
  return std::nullopt;
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()),
                   status.error_message());
  if (std::optional<v1::Refusal> r = RefusalOfGrpc(status)) {
    out = WithSubject(std::move(out),
                      {r->phase(), r->field(), r->value(), r->reason()});
  }
  return out;
}

absl::Status ParseRequest(const std::string& bytes,
                          google::protobuf::Message* message) {
  if (message->ParseFromString(bytes)) return absl::OkStatus();
  std::string value;
  const std::string field =
      FirstBadString(bytes, message->GetDescriptor(), "", 0, &value);
  message->Clear();
  if (!field.empty()) {
    return Malformed(absl::StrCat(
        field, " is not valid UTF-8 (\"",
        absl::CHexEscape(absl::string_view(value).substr(0, 64)),
        value.size() > 64 ? "...\"" : "\"", "); strings must be UTF-8"));
  }
  return Malformed(absl::StrCat("the request (", bytes.size(),
                                " bytes) does not parse as a ",
                                message->GetDescriptor()->full_name()));
}

grpc::ServerUnaryReactor* SandfenceService::StartRollout(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::StartRolloutRequest, v1::StartRolloutResponse>(
      &pool_, context, request, response,
      [m = manager_](const v1::StartRolloutRequest& r) { return m->Start(r); });
}

grpc::ServerUnaryReactor* SandfenceService::CheckRollout(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::StartRolloutRequest, v1::CheckRolloutResponse>(
      &pool_, context, request, response,
      [m = manager_](const v1::StartRolloutRequest& r) { return m->Check(r); });
}

grpc::ServerUnaryReactor* SandfenceService::SetPhase(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::SetPhaseRequest, v1::SetPhaseResponse>(
      &pool_, context, request, response,
      [m = manager_](const v1::SetPhaseRequest& r) {
        return m->SetPhase(r.rollout_id(), r.phase());
      });
}

grpc::ServerUnaryReactor* SandfenceService::EndRollout(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::EndRolloutRequest, v1::EndRolloutResponse>(
      &pool_, context, request, response,
      [m = manager_](const v1::EndRolloutRequest& r) {
        return m->End(r.rollout_id());
      });
}

grpc::ServerUnaryReactor* SandfenceService::GetRecord(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary<v1::GetRecordRequest, v1::GetRecordResponse>(
      &pool_, context, request, response,
      [m = manager_](const v1::GetRecordRequest& r) {
        return m->GetRecord(r.rollout_id());
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* SandfenceService::WatchEvents(
    grpc::CallbackServerContext*, const grpc::ByteBuffer* request) {
  return new WatchReactor(manager_, watch_queue_, request);
}

grpc::Status SandfenceService::ListRollouts(grpc::ServerContext*,
                                            const v1::ListRolloutsRequest*,
                                            v1::ListRolloutsResponse* resp) {
  *resp = manager_->List();
  return grpc::Status::OK;
}

grpc::Status SandfenceService::EnterRollout(
    grpc::ServerContext* context, const v1::EnterRolloutRequest* request,
    v1::EnterRolloutResponse* response) {
  if (!request->GetReflection()->GetUnknownFields(*request).empty()) {
    return ToGrpcStatus(Malformed("EnterRolloutRequest: unknown fields"));
  }
  (void)context;
  absl::StatusOr<v1::EnterRolloutResponse> r = manager_->Enter(
      request->rollout_id(), static_cast<pid_t>(request->pid()));
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = *std::move(r);
  return grpc::Status::OK;
}

grpc::Status SandfenceService::Health(grpc::ServerContext*,
                                      const v1::HealthRequest*,
                                      v1::HealthResponse* resp) {
  *resp = manager_->Health();
  return grpc::Status::OK;
}

}  // namespace sandfence
