// Several rollout records read together, for the commands that learn from
// them (`records suggest`) and judge them (`check --against`): each record
// with the label it is shown under ([1], [2], ... and its path), and the
// facts both commands need about a record's phases.
#ifndef SANDFENCE_RECORDS_RECORD_SET_H_
#define SANDFENCE_RECORDS_RECORD_SET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sandfence/v1/record.pb.h"

namespace sandfence {

struct RecordInput {
  std::string path;  // as the user gave it
  v1::RolloutRecord record;
};

// Reads each path (ReadRecordFile). The first failure is returned as it
// came, its message naming the file: Malformed (InvalidArgument) for a file
// that is not a record, an errno error for one that cannot be read.
absl::StatusOr<std::vector<RecordInput>> ReadRecordInputs(
    const std::vector<std::string>& paths);

// The exit status for a ReadRecordInputs error: 65 not a record, 66
// unreadable (sysexits EX_DATAERR, EX_NOINPUT).
int RecordReadExitCode(const absl::Status& status);

// "[2]": how output refers to records[index].
std::string RecordTag(size_t index);

// The names of the phases that hold at least one network attempt or DNS
// query (overflow entries included), in the order they first appear in
// the records' timelines (records in the order given); names that are in
// no timeline come last, sorted.
std::vector<std::string> PhasesWithEntries(
    const std::vector<RecordInput>& records);

// Every phase name of the records' timelines, in order of first
// appearance.
std::vector<std::string> TimelinePhases(
    const std::vector<RecordInput>& records);

// The warnings a reader should see before trusting what is learned from a
// record: "r1.sfrec: lossy record: ..." for each record with any loss (its
// warnings' texts), "" when none.
std::vector<std::string> LossNotes(const std::vector<RecordInput>& records);

// `text` with every byte outside printable ASCII as '?': record fields come
// from a file, and what is printed for people (a terminal, a comment in a
// policy) must not end a line or carry escape sequences.
std::string Printable(absl::string_view text);

// The text form of a destination: "127.0.0.3:80", "[::1]:80", or a Unix
// socket's name.
std::string AttemptDestination(absl::string_view protocol,
                               absl::string_view address, uint32_t port);

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_RECORD_SET_H_
