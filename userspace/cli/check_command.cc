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
    "flags:\n";

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

  std::vector<std::string> args(argv + 1, argv + argc);
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
  std::string out = json ? FormatCompiledPolicyJson(*compiled)
                         : FormatCompiledPolicyText(*compiled);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? kExitOk : kExitSoftware;
}

}  // namespace sandfence
