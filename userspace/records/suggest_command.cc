#include "records/suggest_command.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "records/record_set.h"
#include "records/suggest.h"

namespace sandfence {

const char kSuggestUsage[] =
    "usage: sandfence records suggest RECORD... [--phase NAME] [--model URL]"
    "...\n"
    "\n"
    "Prints the smallest policy (a PolicySet in protobuf text format, with\n"
    "comments) that would have allowed what the recorded rollouts did, per\n"
    "phase: their destinations under the DNS names their answers gave (a\n"
    "wildcard only for two or more sibling names), else by address; their\n"
    "Unix socket names; the model server from the records' own rules.\n"
    "Allowed and denied attempts both count. Check it against the same\n"
    "records with: sandfence check POLICY --against RECORD...\n"
    "\n"
    "  --phase NAME  only this phase\n"
    "  --model URL   the model server (repeatable), instead of the records'\n"
    "                own (records of inherit runs have none)\n"
    "\n"
    "Exit status: 0 printed, 64 usage, 65 not a record, 66 unreadable file.\n";

namespace {

CommandOutput Usage(absl::string_view problem) {
  return {kExitUsage, "",
          absl::StrCat("sandfence records suggest: ", problem, "\n",
                       kSuggestUsage)};
}

}  // namespace

CommandOutput RunSuggestCommand(const std::vector<std::string>& args) {
  SuggestOptions options;
  std::vector<std::string> paths;
  bool phase_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") return {kExitOk, kSuggestUsage, ""};
    std::string flag = a;
    std::string value;
    bool has_value = false;
    if (const size_t eq = a.find('=');
        absl::StartsWith(a, "--") && eq != std::string::npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    if (flag == "--phase" || flag == "--model") {
      if (!has_value) {
        if (i + 1 >= args.size())
          return Usage(absl::StrCat(flag, " needs a value"));
        value = args[++i];
      }
      if (value.empty()) return Usage(absl::StrCat(flag, " needs a value"));
      if (flag == "--phase") {
        if (phase_given) return Usage("--phase may be given once");
        phase_given = true;
        options.only_phase = value;
      } else {
        options.models.push_back(value);
      }
    } else if (a.size() > 1 && a[0] == '-') {
      return Usage(absl::StrCat("unknown flag ", a));
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty()) return Usage("at least one RECORD is needed");

  CommandOutput out;
  absl::StatusOr<std::vector<RecordInput>> records = ReadRecordInputs(paths);
  if (!records.ok()) {
    out.exit_code = RecordReadExitCode(records.status());
    out.err = absl::StrCat(
        "sandfence records suggest: ", records.status().message(), "\n");
    return out;
  }
  absl::StatusOr<std::string> text = SuggestPolicy(*records, options);
  if (!text.ok()) return Usage(text.status().message());
  for (const std::string& note : LossNotes(*records)) {
    absl::StrAppend(&out.err, "sandfence records suggest: warning: ", note,
                    "\n");
  }
  out.out = *std::move(text);
  return out;
}

}  // namespace sandfence
