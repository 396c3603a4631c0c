// One synthetic rollout through the whole recording path (router, recorder,
// journal): three phases, allowed and denied attempts of several kinds, an
// event read after the phase that judged it ended, and an event for another
// sandbox; optionally DNS queries of every kind. Deterministic byte for byte,
// so its report is a golden file.
#ifndef SANDFENCE_TESTS_RECORDS_GYM_ROLLOUT_H_
#define SANDFENCE_TESTS_RECORDS_GYM_ROLLOUT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "records/recorder.h"

namespace sandfence::testing {

struct GymRun {
  bool finalize = true;  // false: stop as a crash would, after a flush
  size_t max_entries = 10000;
  // Denials the kernel counts but could not put on the ring buffer: they
  // are withheld from the recorder and reported as kernel-side loss.
  uint64_t events_lost = 0;
  uint64_t decode_errors = 0;
  bool read_counters = true;  // give the kernel counters at the end
  // Also the DNS queries a filtered agent phase would decide (kGymDns*).
  bool dns = false;
  size_t max_dns_entries = 10000;
  // The agent phase is audit only (issue 15): its denials are would-denies
  // (allowed, counted in audit_denied) and its blocked names would_block.
  bool audit_agent = false;
};

// The DNS queries of the gym rollout with dns: true, and the entries they
// fold into.
inline constexpr uint64_t kGymDnsQueries = 23;
inline constexpr int kGymDnsEntries = 7;

// What the kernel counted in the gym rollout (events_lost aside).
inline constexpr uint64_t kGymAllowed = 14;
inline constexpr uint64_t kGymAllowedUnreported = 8;
inline constexpr uint64_t kGymDenied = 1215;
inline constexpr uint64_t kGymEvents =
    kGymAllowed + kGymDenied - kGymAllowedUnreported;

// Writes the gym rollout's record to path; the outcome when finalized.
absl::StatusOr<RecordOutcome> RecordGymRollout(const std::string& path,
                                               const GymRun& run);

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_RECORDS_GYM_ROLLOUT_H_
