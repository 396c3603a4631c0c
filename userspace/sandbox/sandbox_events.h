// A sandbox's decisions as lines of the event stream (events/event.h):
// the one place that turns kernel events, DNS verdicts and phase changes
// into what collectors read. Each call renders after the decision was made
// and never blocks on the stream (events/event_stream.h).
#ifndef SANDFENCE_SANDBOX_SANDBOX_EVENTS_H_
#define SANDFENCE_SANDBOX_SANDBOX_EVENTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "egress/net_event.h"
#include "events/event_stream.h"
#include "guard/guard_abi.h"
#include "records/boot_clock.h"
#include "records/folding.h"

namespace sandfence {

class SandboxEvents {
 public:
  // stream may be null: every call is then a no-op.
  SandboxEvents(std::shared_ptr<events::EventStream> stream,
                std::string rollout_id);

  bool enabled() const { return stream_ != nullptr; }

  // The phase whose kernel generation is `generation` (events read after a
  // switch still name the phase that judged them). `from` "" at the start.
  void PhaseApplied(const std::string& from, const std::string& phase,
                    uint32_t generation);
  void Ended(const std::string& phase,
             std::vector<std::pair<std::string, uint64_t>> losses);

  void Network(const NetEvent& event);
  void Dns(const DnsQueryInfo& query);
  // A kernel guard decision; layer: "lsm" or "signal".
  void Guard(const sf_guard_event& event, int64_t monotonic_to_unix_ns,
             const std::string& layer);

 private:
  std::string PhaseOf(uint32_t generation) const;
  void Emit(events::Event& event);

  const std::shared_ptr<events::EventStream> stream_;
  const std::string rollout_id_;
  const BootClock clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, std::string> phase_of_generation_
      ABSL_GUARDED_BY(mu_);
  std::string current_phase_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandfence

#endif  // SANDFENCE_SANDBOX_SANDBOX_EVENTS_H_
