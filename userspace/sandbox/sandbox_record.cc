// Where a sandbox's events go: its record first, then the event stream,
// then the listeners (a watch, the daemon's counts).
#include "sandbox/sandbox.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "guard/guard_record.h"
#include "records/boot_clock.h"
#include "sandbox/sandbox_internal.h"

namespace sandfence {

using sandbox_internal::BpfGuardMode;

absl::Status Sandbox::OpenRecord(const std::string& path,
                                 const RecorderOptions& base, bool overwrite) {
  if (path.empty()) return absl::OkStatus();
  RolloutInfo info;
  info.rollout_id = rollout_id_;
  info.cgroup_path = cgroup_.path;
  info.cgroup_id = cgroup_.id;
  RecorderOptions options = base;
  options.overwrite = options.overwrite || overwrite;
  if (!borrowed_) {
    HostEnforcement* host = host_;
    const uint64_t id = cgroup_.id;
    options.counters = [host, id] { return host->EgressCounters(id); };
  }
  absl::StatusOr<std::unique_ptr<RolloutRecorder>> made =
      RolloutRecorder::Create(path, info, policy_, BootClock::Capture(),
                              options);
  if (!made.ok()) return made.status();
  recorder_ = *std::move(made);
  return absl::OkStatus();
}

uint64_t Sandbox::AddListener(SandboxListener listener) {
  absl::MutexLock lock(&listeners_mu_);
  const uint64_t id = next_listener_++;
  listeners_.emplace_back(id, std::move(listener));
  return id;
}

void Sandbox::RemoveListener(uint64_t id) {
  absl::MutexLock lock(&listeners_mu_);
  for (auto it = listeners_.begin(); it != listeners_.end(); ++it) {
    if (it->first == id) {
      listeners_.erase(it);
      return;
    }
  }
}

void Sandbox::OnNetEvent(const NetEvent& event) {
  if (recorder_) recorder_->Add(event);
  events_->Network(event);
  absl::MutexLock lock(&listeners_mu_);
  for (const auto& [id, l] : listeners_) {
    if (l.on_net) l.on_net(event);
  }
}

void Sandbox::OnGuardEvent(const sf_guard_event& event) {
  if (recorder_) {
    recorder_->AddGuardEntry(GuardEntryFromEvent(event, mono_to_unix_ns_));
  }
  if (events_->enabled()) {
    const std::optional<GuardMode> bpf = BpfGuardMode(guard_);
    events_->Guard(event, mono_to_unix_ns_,
                   std::string(GuardModeName(bpf.value_or(guard_mode_))));
  }
  absl::MutexLock lock(&listeners_mu_);
  for (const auto& [id, l] : listeners_) {
    if (l.on_guard) l.on_guard(event);
  }
}

}  // namespace sandfence
