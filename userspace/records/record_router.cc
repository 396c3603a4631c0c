// RecordRouter: one event reader's events, handed to the open rollouts'
// recorders by sandbox cgroup id.
#include "records/recorder.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sandfence {

absl::StatusOr<std::shared_ptr<RolloutRecorder>> RecordRouter::Open(
    const std::string& path, const RolloutInfo& info,
    const CompiledPolicy& policy, RecorderOptions options) {
  {
    absl::MutexLock lock(&mu_);
    if (open_.contains(info.cgroup_id)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "sandbox ", info.cgroup_id, " already has an open rollout record"));
    }
  }
  absl::StatusOr<std::unique_ptr<RolloutRecorder>> rec =
      RolloutRecorder::Create(path, info, policy, clock_, std::move(options));
  if (!rec.ok()) return rec.status();
  std::shared_ptr<RolloutRecorder> shared = *std::move(rec);
  absl::MutexLock lock(&mu_);
  auto [it, added] =
      open_.emplace(info.cgroup_id, OpenRollout{shared, unrouted_});
  if (!added) {
    return absl::AlreadyExistsError(absl::StrCat(
        "sandbox ", info.cgroup_id, " already has an open rollout record"));
  }
  return shared;
}

void RecordRouter::OnEvent(const NetEvent& event) {
  // Under the router's lock, so that Close cannot finalize a recorder while
  // an event is on its way into it.
  absl::MutexLock lock(&mu_);
  auto it = open_.find(event.sandbox);
  if (it == open_.end() || !it->second.recorder->Add(event)) ++unrouted_;
}

absl::Status RecordRouter::Tick() {
  std::vector<std::shared_ptr<RolloutRecorder>> recorders;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, o] : open_) recorders.push_back(o.recorder);
  }
  absl::Status first;
  for (auto& r : recorders) first.Update(r->Tick());
  return first;
}

absl::StatusOr<RecordOutcome> RecordRouter::Close(uint64_t cgroup_id,
                                                  FinalCounts counts) {
  OpenRollout o;
  {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(cgroup_id);
    if (it == open_.end()) {
      return absl::NotFoundError(
          absl::StrCat("sandbox ", cgroup_id, " has no open rollout record"));
    }
    o = std::move(it->second);
    open_.erase(it);
    counts.unrouted_events = unrouted_ - o.unrouted_at_open;
  }
  return o.recorder->Finalize(counts);
}

uint64_t RecordRouter::unrouted_events() const {
  absl::MutexLock lock(&mu_);
  return unrouted_;
}

size_t RecordRouter::open_rollouts() const {
  absl::MutexLock lock(&mu_);
  return open_.size();
}

}  // namespace sandfence
