#include "records/record_set.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/exit_codes.h"
#include "common/status.h"
#include "records/journal.h"

namespace sandfence {
namespace {

void AddOnce(const std::string& name, std::vector<std::string>* names) {
  if (std::find(names->begin(), names->end(), name) == names->end()) {
    names->push_back(name);
  }
}

}  // namespace

absl::StatusOr<std::vector<RecordInput>> ReadRecordInputs(
    const std::vector<std::string>& paths) {
  std::vector<RecordInput> out;
  for (const std::string& path : paths) {
    absl::StatusOr<v1::RolloutRecord> record = ReadRecordFile(path);
    if (!record.ok()) return record.status();
    out.push_back(RecordInput{path, *std::move(record)});
  }
  return out;
}

int RecordReadExitCode(const absl::Status& status) {
  return RefusalOf(status) == Refusal::kMalformed ? kExitDataErr : kExitNoInput;
}

std::string RecordTag(size_t index) {
  return absl::StrCat("[", index + 1, "]");
}

std::vector<std::string> TimelinePhases(
    const std::vector<RecordInput>& records) {
  std::vector<std::string> names;
  for (const RecordInput& in : records) {
    for (const v1::PhaseSpan& span : in.record.timeline()) {
      AddOnce(span.name(), &names);
    }
  }
  return names;
}

std::vector<std::string> PhasesWithEntries(
    const std::vector<RecordInput>& records) {
  std::set<std::string> used;
  for (const RecordInput& in : records) {
    for (const v1::NetAttempt& a : in.record.net_attempt())
      used.insert(a.phase());
    for (const v1::DnsQuery& q : in.record.dns_query()) used.insert(q.phase());
  }
  std::vector<std::string> out;
  for (const std::string& name : TimelinePhases(records)) {
    if (used.erase(name) > 0) out.push_back(name);
  }
  out.insert(out.end(), used.begin(), used.end());
  return out;
}

std::vector<std::string> LossNotes(const std::vector<RecordInput>& records) {
  std::vector<std::string> notes;
  for (const RecordInput& in : records) {
    if (!in.record.lossy()) continue;
    std::vector<std::string> texts;
    for (const v1::RecordWarning& w : in.record.warning()) {
      texts.push_back(w.text());
    }
    notes.push_back(Printable(absl::StrCat(
        in.path, ": lossy record",
        texts.empty() ? "" : absl::StrCat(": ", absl::StrJoin(texts, "; ")),
        " (what it lost is judged by nothing here)")));
  }
  return notes;
}

std::string Printable(absl::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

std::string AttemptDestination(absl::string_view protocol,
                               absl::string_view address, uint32_t port) {
  if (protocol == "unix") return std::string(address);
  if (address.find(':') != absl::string_view::npos) {
    return absl::StrCat("[", address, "]:", port);
  }
  return absl::StrCat(address, ":", port);
}

}  // namespace sandfence
