#include "records/show_command.h"

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/status.h"
#include "records/journal.h"
#include "records/report.h"
#include "records/suggest_command.h"

namespace sandfence {
namespace {

constexpr char kUsage[] =
    "usage: sandfence records show PATH [--json]\n"
    "       sandfence records suggest RECORD... [--phase NAME] [--model "
    "URL]...\n"
    "\n"
    "Prints the rollout record at PATH (written by sandfence run --record):\n"
    "the phase timeline, the denied destinations with counts, the allowed\n"
    "destinations, the DNS queries a filtered phase answered or blocked\n"
    "(folded by name, type and verdict), guard events, the enforcement modes\n"
    "and the loss accounting. --json prints the whole record in protobuf's\n"
    "canonical JSON mapping instead (64-bit counts are strings:\n"
    "jq '.count|tonumber').\n"
    "A record cut short (sandfence stopped mid-rollout) is read up to its\n"
    "last whole entry and shown with a warning.\n"
    "Exit status: 0 shown, 64 usage, 65 not a record, 66 unreadable file.\n"
    "\n"
    "suggest prints the smallest policy that would have allowed what the\n"
    "recorded rollouts did (sandfence records suggest --help).\n";

CommandOutput Usage(absl::string_view problem) {
  return {kExitUsage, "",
          absl::StrCat("sandfence records: ", problem, "\n", kUsage)};
}

}  // namespace

CommandOutput RunRecordsCommand(const std::vector<std::string>& args) {
  if (args.empty()) return Usage("a subcommand is needed");
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    return {kExitOk, kUsage, ""};
  }
  if (args[0] == "suggest") {
    return RunSuggestCommand(
        std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (args[0] != "show") {
    return Usage(absl::StrCat("unknown subcommand \"", args[0], "\""));
  }
  bool json = false;
  std::vector<std::string> paths;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--help" || a == "-h") {
      return {kExitOk, kUsage, ""};
    } else if (a.size() > 1 && a[0] == '-') {
      return Usage(absl::StrCat("unknown flag ", a));
    } else {
      paths.push_back(a);
    }
  }
  if (paths.size() != 1) return Usage("show takes exactly one PATH");

  CommandOutput out;
  absl::StatusOr<v1::RolloutRecord> record = ReadRecordFile(paths[0]);
  if (!record.ok()) {
    out.exit_code = RefusalOf(record.status()) == Refusal::kMalformed
                        ? kExitDataErr
                        : kExitNoInput;
    out.err =
        absl::StrCat("sandfence records: ", record.status().message(), "\n");
    return out;
  }
  if (json) {
    // The text report lists its warnings; JSON readers get them here too.
    for (const v1::RecordWarning& w : record->warning()) {
      absl::StrAppend(&out.err, "sandfence records: warning: ", w.text(), "\n");
    }
    absl::StatusOr<std::string> text = FormatRecordJson(*record);
    if (!text.ok()) {
      out.exit_code = kExitSoftware;
      absl::StrAppend(&out.err, "sandfence records: ", text.status().message(),
                      "\n");
      return out;
    }
    out.out = *std::move(text);
  } else {
    out.out = FormatRecordText(*record);
  }
  return out;
}

}  // namespace sandfence
