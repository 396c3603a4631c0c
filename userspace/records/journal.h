// The record file: a journal of length-delimited RecordJournalEntry messages
// (proto/sandfence/v1/record.proto), appended while a rollout runs, and its
// reader, which rebuilds the RolloutRecord and survives a file cut short.
#ifndef SANDFENCE_RECORDS_JOURNAL_H_
#define SANDFENCE_RECORDS_JOURNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/unique_fd.h"
#include "sandfence/v1/record.pb.h"

namespace sandfence {

// RecordHeader.format of every record this build writes.
inline constexpr char kRecordFormat[] = "sandfence.rollout-record.v1";

// An entry longer than this is corruption, not a record (a folded record
// holds at most a few megabytes in its largest entry).
inline constexpr uint32_t kMaxJournalEntryBytes = 64u << 20;

// Appends entries to a record file. Entries are buffered in memory and
// reach the file at Flush(); a crash loses what was not flushed, and the
// reader then stops at the last whole entry. Not thread-safe.
class RecordJournal {
 public:
  // Creates path (mode 0640). An existing file is an error unless
  // overwrite: a record is never appended to another one.
  static absl::StatusOr<RecordJournal> Create(const std::string& path,
                                              bool overwrite = false);

  RecordJournal(RecordJournal&&) = default;
  RecordJournal& operator=(RecordJournal&&) = default;

  void Append(const v1::RecordJournalEntry& entry);
  // Writes the buffered entries (write(2)); with sync, fdatasync(2) after.
  // The first failure sticks: the journal drops everything after it and
  // every later call returns the same error.
  absl::Status Flush(bool sync);
  // Flushes (with sync) and closes the file.
  absl::Status Close();

  size_t buffered_bytes() const { return buffer_.size(); }
  uint64_t bytes_written() const { return written_; }
  bool failed() const { return !error_.ok(); }
  const absl::Status& error() const { return error_; }
  const std::string& path() const { return path_; }

 private:
  RecordJournal(std::string path, UniqueFd fd)
      : path_(std::move(path)), fd_(std::move(fd)) {}

  std::string path_;
  UniqueFd fd_;
  std::string buffer_;
  uint64_t written_ = 0;
  absl::Status error_;
};

// Rebuilds a record from journal bytes. An error only when the bytes are not
// a record at all (no header of kRecordFormat first); anything wrong after
// the header (a tail cut mid-entry, an entry that does not parse, no
// trailer) gives the record up to the last whole entry, with
// complete = false, lossy = true and warnings saying what happened.
absl::StatusOr<v1::RolloutRecord> ReadRecord(absl::string_view bytes);
// ReadRecord of a file; an unreadable file is an errno error.
absl::StatusOr<v1::RolloutRecord> ReadRecordFile(const std::string& path);

// The texts of a record's warnings, in order.
std::vector<std::string> WarningTexts(const v1::RolloutRecord& record);

// Appends a warning of a kind (code decides by kinds, never by text).
void AddWarning(v1::RolloutRecord* record, v1::WarningKind kind,
                std::string text);

// Decides record.lossy from its loss accounting and completeness, and adds
// a warning for every reason (used by the reader and the recorder alike).
void EvaluateLoss(v1::RolloutRecord* record);

// The left side of the balance in LossAccounting: what the kernel meant to
// report; the right side: where each of those events went.
uint64_t EventsToRecord(const v1::LossAccounting& loss);
uint64_t EventsAccountedFor(const v1::LossAccounting& loss);

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_JOURNAL_H_
