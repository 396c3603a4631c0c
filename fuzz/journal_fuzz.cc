// Record files, as `sandfence records show` and the daemon read them: the
// journal reader (records/journal.h) and both reports (records/report.h).
// Bytes that are not a journal are read as a binary RolloutRecord (the
// daemon's merged record files), so the reports also see records that no
// journal could produce. Seeds: journals written by the recorder (the
// tests' gym rollout: complete, cut short, lossy), see make_seeds.cc.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/status.h"
#include "fuzz_support.h"
#include "records/journal.h"
#include "records/report.h"

using sandfence::fuzz::Check;

namespace {

void Report(const sandfence::v1::RolloutRecord& record) {
  const std::string text = sandfence::FormatRecordText(record);
  Check(!text.empty() && text.back() == '\n',
        "text report does not end in \\n");
  // JSON can refuse a record (a timestamp out of range): that is an error,
  // never a crash.
  (void)sandfence::FormatRecordJson(record);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  sandfence::fuzz::QuietProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<sandfence::v1::RolloutRecord> record =
      sandfence::ReadRecord(bytes);
  if (record.ok()) {
    // journal.h: a record that is not complete is lossy.
    Check(record->complete() || record->lossy(),
          "an incomplete record is not lossy");
    Report(*record);
    return 0;
  }
  Check(sandfence::RefusalOf(record.status()) == sandfence::Refusal::kMalformed,
        record.status().ToString());
  sandfence::v1::RolloutRecord merged;
  if (merged.ParseFromArray(data, static_cast<int>(size))) Report(merged);
  return 0;
}
