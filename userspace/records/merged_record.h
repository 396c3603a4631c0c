// The record of a rollout that outlived the sandfence process writing it:
// one journal per process that held the rollout (the first, and each
// successor that adopted it), merged into one record with every handover
// said in a typed warning.
#ifndef SANDFENCE_RECORDS_MERGED_RECORD_H_
#define SANDFENCE_RECORDS_MERGED_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sandfence/v1/record.pb.h"

namespace sandfence {

struct RecordSegment {
  std::string path;
  v1::RolloutRecord record;  // ReadRecordFile of path
  // When the process writing it stopped (the file's last write), if known.
  std::optional<int64_t> stopped_unix_ns;
  // When the next process took over (for all but the last segment).
  int64_t handed_over_unix_ns = 0;
};

// One segment: that record. Several: the timeline, attempts, DNS queries and
// guard events of all of them, the kernel's counters of the last (they outlive
// the processes), the reader-side counts summed, a WARNING_HANDOVER per
// gap, and the balance checked again over the whole. A merged record is
// lossy: nothing proves a gap whole.
v1::RolloutRecord MergeRecordSegments(const std::vector<RecordSegment>& segments);

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_MERGED_RECORD_H_
