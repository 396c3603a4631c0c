// What the rollout manager's files share: the rollout itself, and the
// request helpers (the policy source, compiling a request, the state's
// policy, caller strings in messages). Private to userspace/daemon.
#ifndef SANDFENCE_DAEMON_ROLLOUT_INTERNAL_H_
#define SANDFENCE_DAEMON_ROLLOUT_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/ip.h"
#include "compile/compiled_policy.h"
#include "daemon/rollout_manager.h"
#include "policy/policy_source.h"
#include "sandbox/sandbox.h"
#include "sandfence/v1/daemon.pb.h"

namespace sandfence {

struct RolloutManager::Rollout {
  // Serializes Start/SetPhase/End of this rollout.
  absl::Mutex mu;
  // Set once Start has finished (ok or not), under mu.
  bool started = false;
  absl::Status start_status;
  std::string request_bytes;  // deterministic: for idempotent retries
  v1::RolloutState state;     // what is saved
  std::unique_ptr<Sandbox> sandbox;
  bool adopted = false;
  bool ended = false;

  const std::string& id() const { return state.request().rollout_id(); }
  uint64_t cgroup_id() const { return state.response().cgroup_id(); }
  bool open() const { return started && start_status.ok() && !ended; }
};

class RolloutManager::OpenRollout {
 public:
  // Takes the rollout's lock (FindOpen then checks that it is open).
  explicit OpenRollout(std::shared_ptr<Rollout> rollout)
      : rollout_(std::move(rollout)) {
    rollout_->mu.Lock();
  }
  // The moved-from one holds nothing, and unlocks nothing.
  OpenRollout(OpenRollout&& other) = default;
  OpenRollout& operator=(OpenRollout&& other) = delete;
  ~OpenRollout() {
    if (rollout_) rollout_->mu.Unlock();
  }

  Rollout* operator->() const { return rollout_.get(); }
  Rollout& operator*() const { return *rollout_; }
  const std::shared_ptr<Rollout>& shared() const { return rollout_; }

 private:
  std::shared_ptr<Rollout> rollout_;
};

namespace rollout_internal {

int64_t NowUnixNs();
// The time of the last write to a journal: where a dead daemon's record
// stops.
std::optional<int64_t> MtimeNs(const std::string& path);
PolicySource SourceOf(const v1::StartRolloutRequest& req);
absl::StatusOr<CompiledPolicy> CompileForRequest(
    const v1::PolicySet& policy_set, const v1::StartRolloutRequest& req,
    const std::vector<HostPort>& resolvers);
// Whether a phase of the rollout's compiled policy is audit only.
bool PhaseIsAuditOnly(const v1::RolloutState& state, absl::string_view phase);
// The compiled policy a state file keeps (nothing is re-resolved).
absl::StatusOr<CompiledPolicy> PolicyFromState(const v1::RolloutState& s);
// The cgroup v2 directories of this process and its ancestors: never a
// sandbox (attaching there would govern the daemon, or the whole host).
std::vector<uint64_t> OwnCgroupChain();

}  // namespace rollout_internal
}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_ROLLOUT_INTERNAL_H_
