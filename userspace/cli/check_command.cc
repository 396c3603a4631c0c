#include "cli/check_command.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/policy_flags.h"
#include "common/json.h"
#include "common/status.h"
#include "compile/compiler.h"
#include "compile/format.h"
#include "confine/confine.h"
#include "host/bpf_lsm.h"
#include "host/host_state.h"
#include "records/record_set.h"
#include "records/replay.h"
#include "sandbox/sandbox.h"

namespace sandfence {
namespace {

constexpr char kUsage[] =
    "usage: sandfence check [POLICY] [flags]\n"
    "\n"
    "Compiles POLICY (a PolicySet in protobuf text format), or the inline\n"
    "policy of --network-access, and prints the rules of each phase, the\n"
    "grants that were dropped and why, or why the policy is refused.\n"
    "Exit status: 0 valid, 64 usage, 65 malformed, 66 unreadable file,\n"
    "75 unavailable (retry may help), 78 rejected (cannot be enforced).\n"
    "\n"
    "With --guard it then says which layer of the process guard holds each\n"
    "guarantee on this host for the processes sandfence starts (run,\n"
    "enter: Landlock + seccomp, applied for the policy's phases), and what\n"
    "the daemon's rollouts of processes it did not start get.\n"
    "\n"
    "With --against RECORD... it replays what the recorded rollouts did\n"
    "(every network attempt and DNS query, per phase) against the compiled\n"
    "policy and prints what it would deny, with counts and records. Exit\n"
    "status then: 0 it would deny nothing, 1 it would deny some; 65 also for\n"
    "a file that is not a record, 66 for one that cannot be read.\n"
    "\n"
    "flags:\n";

// Exit status of --against when the policy would deny something.
constexpr int kExitWouldDeny = 1;

// "--against A B C" -> "--against A --against B --against C": the records
// follow the flag (up to the next flag); the flag parser takes one value.
std::vector<std::string> ExpandAgainst(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  bool in_against = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.insert(out.end(), args.begin() + i, args.end());
      break;
    }
    if (a == "--against") {
      out.push_back(a);
      if (i + 1 < args.size()) out.push_back(args[++i]);
      in_against = true;
      continue;
    }
    if (in_against && !a.empty() && a[0] != '-') {
      out.push_back("--against");
      out.push_back(a);
      continue;
    }
    in_against = a.rfind("--against=", 0) == 0;
    out.push_back(a);
  }
  return out;
}

// `check --guard`: each layer of the process guard as this host has it,
// probed by loading or applying it, and what Landlock + seccomp would hold
// for the policy's phases (the strictest of them: fixed for a process's
// life).
std::string FormatGuardReport(const CompiledPolicy& policy) {
  std::string out = "process guard on this host:\n";
  absl::StatusOr<ConfineSupport> confine = ProbeConfinement();
  const bool can_confine = confine.ok() && confine->usable();
  const absl::Status lsm = ProbeBpfLsm();
  absl::StrAppend(&out, "  lsm       ",
                  lsm.ok() ? "runs"
                           : absl::StrCat("unavailable: ", lsm.message()),
                  "\n");
  absl::StrAppend(
      &out, "  landlock  ",
      can_confine
          ? absl::StrCat("Landlock ABI ", confine->landlock_abi, " + seccomp")
          : absl::StrCat("unavailable: ", confine.ok()
                                              ? confine->Usable().message()
                                              : confine.status().message()),
      "\n");
  absl::StrAppend(
      &out, "  run and enter get: ",
      lsm.ok() && can_confine ? "lsm and landlock"
      : can_confine           ? "landlock"
      : lsm.ok()              ? "lsm"
                              : "signal where it loads (weaker), else refused",
      "; daemon rollouts of processes sandfence did not start get: ",
      lsm.ok() ? "lsm" : "signal where it loads, else refused",
      " (or landlock through `sandfence enter`)\n");
  const ConfinePlan plan =
      ConfinePlanForPhases(policy, 0, SandfenceOwnPaths(kDefaultPinRoot));
  absl::StrAppend(&out, "landlock + seccomp for this policy (io_uring ",
                  plan.deny_io_uring ? "refused" : "allowed", ", ptrace ",
                  plan.deny_ptrace ? "refused" : "inside the sandbox only",
                  "):\n");
  for (const ConfineGuarantee& g : DescribeConfinement(
           plan, can_confine ? confine->landlock_abi : 0)) {
    absl::StrAppendFormat(&out, "  %-6s %s  [%s]\n",
                          g.holds ? "holds" : "NOT", g.what, g.layer);
  }
  absl::StrAppend(&out,
                  "  (fixed for the process's life: a later phase that "
                  "allows more does not widen it; Landlock and seccomp "
                  "refusals are the kernel's and are not recorded)\n");
  return out;
}

void PrintRefusal(const absl::Status& status, bool json, int code) {
  std::string refusal(RefusalName(RefusalOf(status)));
  if (code == kExitNoInput) refusal = "no_input";
  absl::FPrintF(stderr, "sandfence check: %s: %s\n", refusal, status.message());
  if (json) {
    absl::PrintF(
        "{\"error\": {\"refusal\": %s, \"message\": %s, "
        "\"exit_code\": %d}}\n",
        JsonQuote(refusal), JsonQuote(status.message()), code);
  }
}

}  // namespace

int CheckCommand(int argc, char** argv) {
  PolicyFlags flags;
  bool json = false;
  FlagParser parser;
  RegisterPolicyFlags(&parser, &flags);
  parser.AddBoolFlag("json", "print JSON instead of text", &json);
  bool guard = false;
  parser.AddBoolFlag("guard",
                     "also say which layer of the process guard holds each "
                     "guarantee on this host (text only)",
                     &guard);
  std::vector<std::string> against;
  parser.AddValueFlag(
      "against", "RECORD...",
      "replay these rollout records against the policy (the records follow "
      "the flag; POLICY comes before it)",
      [&against](absl::string_view path) {
        if (path.empty()) return Malformed("a record path is needed");
        against.emplace_back(path);
        return absl::OkStatus();
      },
      /*repeatable=*/true);

  std::vector<std::string> args =
      ExpandAgainst(std::vector<std::string>(argv + 1, argv + argc));
  absl::StatusOr<FlagParser::Result> parsed = parser.Parse(args);
  if (parsed.ok() && parsed->help) {
    absl::PrintF("%s%s", kUsage, parser.Help());
    return kExitOk;
  }
  absl::Status usage = parsed.status();
  if (usage.ok() && parsed->saw_dashes) {
    usage = Malformed("\"--\" and a command belong to sandfence run");
  }
  if (usage.ok()) usage = FinishPolicyFlags(parsed->positionals, &flags);
  if (!usage.ok()) {
    absl::FPrintF(stderr,
                  "sandfence check: usage: %s\n"
                  "(sandfence check --help lists the flags)\n",
                  usage.message());
    return kExitUsage;
  }

  absl::StatusOr<v1::PolicySet> policy = LoadPolicyFromFlags(flags);
  if (!policy.ok()) {
    int code = RefusalOf(policy.status()) == Refusal::kMalformed ? kExitDataErr
                                                                 : kExitNoInput;
    PrintRefusal(policy.status(), json, code);
    return code;
  }
  if (!flags.phase.empty()) {
    std::vector<std::string> names;
    for (const v1::Phase& phase : policy->phase())
      names.push_back(phase.name());
    if (std::find(names.begin(), names.end(), flags.phase) == names.end()) {
      absl::FPrintF(stderr,
                    "sandfence check: usage: --phase \"%s\": the policy has "
                    "no such phase (it has: %s)\n",
                    flags.phase, absl::StrJoin(names, ", "));
      return kExitUsage;
    }
  }

  // Records before names are resolved: a bad record costs no DNS query.
  std::vector<RecordInput> records;
  if (!against.empty()) {
    absl::StatusOr<std::vector<RecordInput>> read = ReadRecordInputs(against);
    if (!read.ok()) {
      const int code = RecordReadExitCode(read.status());
      PrintRefusal(read.status(), json, code);
      return code;
    }
    records = *std::move(read);
    std::vector<std::string> names;
    for (const v1::Phase& phase : policy->phase()) {
      names.push_back(phase.name());
    }
    if (absl::Status s = CheckReplayPhases(names, records, flags.phase);
        !s.ok()) {
      absl::FPrintF(stderr, "sandfence check: usage: %s\n", s.message());
      return kExitUsage;
    }
  }

  ResolverSetup setup = MakeResolverFromFlags(flags);
  PolicyCompiler compiler(setup.resolver.get(),
                          std::move(setup.system_resolvers));
  absl::StatusOr<CompiledPolicy> compiled =
      compiler.Compile(*policy, flags.endpoints, flags.context, flags.phase);
  if (!compiled.ok()) {
    int code = ExitCodeFor(compiled.status());
    PrintRefusal(compiled.status(), json, code);
    return code;
  }
  int code = kExitOk;
  std::string out;
  if (!records.empty()) {
    absl::StatusOr<ReplayReport> report = ReplayRecords(*compiled, records);
    if (!report.ok()) {
      code = ExitCodeFor(report.status());
      PrintRefusal(report.status(), json, code);
      return code;
    }
    for (const std::string& note : report->notes) {
      absl::FPrintF(stderr, "sandfence check: warning: %s\n", note);
    }
    for (const CompiledPhase& phase : compiled->phases) {
      if (!phase.audit_only) continue;
      absl::FPrintF(stderr,
                    "sandfence check: note: phase \"%s\" is AUDIT ONLY "
                    "(enforce: AUDIT): replayed as if it were enforced\n",
                    phase.name);
    }
    out = json ? FormatReplayJson(*report, records)
               : FormatReplayText(*report, records);
    if (!report->denied.empty()) code = kExitWouldDeny;
  } else {
    out = json ? FormatCompiledPolicyJson(*compiled)
               : FormatCompiledPolicyText(*compiled);
    if (guard && !json) absl::StrAppend(&out, "\n", FormatGuardReport(*compiled));
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? code : kExitSoftware;
}

}  // namespace sandfence
