#include "daemon/rollout_totals.h"

#include <algorithm>
#include <cstddef>

namespace sandfence {
namespace {

// Raises each field of `into` to `from`'s where `from`'s is larger.
void KeepLargest(const RolloutReading& from, RolloutReading& into) {
  into.events_lost = std::max(into.events_lost, from.events_lost);
  for (const auto& [verdict, n] : from.dns.by_verdict) {
    uint64_t& held = into.dns.by_verdict[verdict];
    held = std::max(held, n);
  }
  for (size_t b = 0; b < into.dns.latency_buckets.size(); ++b) {
    into.dns.latency_buckets[b] =
        std::max(into.dns.latency_buckets[b], from.dns.latency_buckets[b]);
  }
  into.dns.latency_count =
      std::max(into.dns.latency_count, from.dns.latency_count);
  into.dns.latency_sum_seconds =
      std::max(into.dns.latency_sum_seconds, from.dns.latency_sum_seconds);
}

}  // namespace

void AddReading(const RolloutReading& from, RolloutReading& into) {
  into.events_lost += from.events_lost;
  for (const auto& [verdict, n] : from.dns.by_verdict) {
    into.dns.by_verdict[verdict] += n;
  }
  for (size_t b = 0; b < into.dns.latency_buckets.size(); ++b) {
    into.dns.latency_buckets[b] += from.dns.latency_buckets[b];
  }
  into.dns.latency_count += from.dns.latency_count;
  into.dns.latency_sum_seconds += from.dns.latency_sum_seconds;
}

void RolloutTotals::Observe(const std::string& rollout_id,
                            const RolloutReading& reading) {
  absl::MutexLock lock(&mu_);
  KeepLargest(reading, open_[rollout_id]);
}

void RolloutTotals::Retire(const std::string& rollout_id,
                           const RolloutReading& final) {
  absl::MutexLock lock(&mu_);
  RolloutReading last;
  if (auto it = open_.find(rollout_id); it != open_.end()) {
    last = std::move(it->second);
    open_.erase(it);
  }
  KeepLargest(final, last);
  AddReading(last, retired_);
}

RolloutReading RolloutTotals::Sum() const {
  absl::MutexLock lock(&mu_);
  RolloutReading sum = retired_;
  for (const auto& [id, reading] : open_) AddReading(reading, sum);
  return sum;
}

}  // namespace sandfence
