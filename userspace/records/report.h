// `sandfence records show`: a rollout record for people (text) and for
// programs (protobuf's canonical JSON mapping). Both are deterministic for a
// given record, so they are golden-tested.
#ifndef SANDFENCE_RECORDS_REPORT_H_
#define SANDFENCE_RECORDS_REPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "sandfence/v1/record.pb.h"

namespace sandfence {

// The readable report: the rollout's metadata, the state of the record
// (complete, lossy) and its warnings, the enforcement modes, the phase
// timeline, a table of denied destinations with counts, the allowed
// destinations, the DNS queries (when there are any), guard events and the
// loss accounting. Times in the tables are relative to the rollout's start.
// Ends in '\n'.
std::string FormatRecordText(const v1::RolloutRecord& record);

// The record as canonical JSON (every field printed, defaults included, so
// that jq filters see a stable shape; 64-bit counts are strings, as the
// mapping says). Ends in '\n'.
absl::StatusOr<std::string> FormatRecordJson(const v1::RolloutRecord& record);

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_REPORT_H_
