// Counters summed over every rollout a daemon has served, for its metrics.
// A Prometheus counter must never go down, but a sum over the open rollouts
// does when one ends (issue 38): each open rollout's latest reading is kept,
// and when the rollout ends its final reading moves into a running total.
#ifndef SANDFENCE_DAEMON_ROLLOUT_TOTALS_H_
#define SANDFENCE_DAEMON_ROLLOUT_TOTALS_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "records/recorder.h"

namespace sandfence {

// What one rollout has counted so far.
struct RolloutReading {
  uint64_t events_lost = 0;  // kernel-side (ring buffer reserve failures)
  DnsQueryStats dns;         // its DNS filter's queries (none: empty)
};

// Adds `from` to `into`, field by field.
void AddReading(const RolloutReading& from, RolloutReading& into);

// Thread-safe. Each field of a rollout keeps the largest value observed, so
// that a reading that failed (zeros) or arrived late never lowers a sum;
// the sources (kernel counters, the recorder's DNS counts) only grow while
// a rollout is open. The caller serializes a rollout's Observe with its
// Retire (the rollout's own lock), so nothing is observed after its end.
class RolloutTotals {
 public:
  // The rollout is open and has counted `reading` so far.
  void Observe(const std::string& rollout_id, const RolloutReading& reading);
  // The rollout ended having counted `final` (zeros where it could not be
  // read: the last observation stands); it stays in the sum.
  void Retire(const std::string& rollout_id, const RolloutReading& final);
  // Every rollout's counts: the ended, plus the open as last observed.
  RolloutReading Sum() const;

 private:
  mutable absl::Mutex mu_;
  RolloutReading retired_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, RolloutReading> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_ROLLOUT_TOTALS_H_
