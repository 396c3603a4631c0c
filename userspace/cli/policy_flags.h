// Command-line flags shared by the subcommands that compile a policy
// (`check`, and later `run`): a small flag parser, the policy flags every
// such command takes, and what they select (the policy, the resolver).
//
// A command builds a FlagParser, registers the shared policy flags with
// RegisterPolicyFlags(), registers its own (`check` adds --json; `run` will
// add --netns, --user, --record, --guard), and parses. Everything after
// "--" is handed back untouched (the command to run).
//
// Every error from this file's parsing is a usage error (exit 64) whose
// message names the flag and the value.
#ifndef SANDFENCE_CLI_POLICY_FLAGS_H_
#define SANDFENCE_CLI_POLICY_FLAGS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/exit_codes.h"
#include "common/ip.h"
#include "compile/compiled_policy.h"
#include "policy/rollout_endpoints.h"
#include "resolve/resolver.h"
#include "sandfence/v1/policy.pb.h"

namespace sandfence {

class FlagParser {
 public:
  // Called with the flag's value; an error is reported as
  // `--name "value": <message>`.
  using Handler = std::function<absl::Status(absl::string_view value)>;

  // "--name VALUE" or "--name=VALUE". A flag that is not `repeatable` may be
  // given once.
  void AddValueFlag(absl::string_view name, absl::string_view value_name,
                    absl::string_view help, Handler handler,
                    bool repeatable = false);
  // "--name"; sets *target to true.
  void AddBoolFlag(absl::string_view name, absl::string_view help,
                   bool* target);

  struct Result {
    std::vector<std::string> positionals;   // in order
    std::vector<std::string> after_dashes;  // everything after "--"
    bool saw_dashes = false;
    bool help = false;  // -h or --help was given: nothing else is checked
  };
  // `args` excludes the program and command names.
  absl::StatusOr<Result> Parse(const std::vector<std::string>& args) const;

  // One line per flag: "  --model URL        ...".
  std::string Help() const;

 private:
  struct Flag {
    std::string name;        // without "--"
    std::string value_name;  // empty for a bool flag
    std::string help;
    Handler handler;
    bool* target = nullptr;
    bool repeatable = false;
  };
  const Flag* Find(absl::string_view name) const;

  std::vector<Flag> flags_;
};

// What the shared flags say.
struct PolicyFlags {
  std::string policy_path;  // the POLICY argument; empty when absent
  std::optional<v1::NetworkAccess> network_access;  // --network-access
  std::string phase;                                // --phase
  RolloutEndpoints endpoints;       // --model, --tool, --required-tool, --allow
  CompileContext context;           // --own-netns, --borrowed
  std::vector<HostPort> resolvers;  // --resolver
  // --tools-any-port: every --tool and --required-tool opens every TCP
  // port of its host (ToolGrant.any_port, Gym's seed's host rule).
  bool tools_any_port = false;
};

// Registers --phase, --network-access, --model, --tool, --required-tool,
// --tools-any-port, --allow, --own-netns, --borrowed and --resolver, writing
// into *flags.
void RegisterPolicyFlags(FlagParser* parser, PolicyFlags* flags);

// Takes the POLICY argument (at most one positional), checks that the
// policy comes from exactly one place (a file, or --network-access), and
// applies --tools-any-port to every tool flag, wherever it was given.
absl::Status FinishPolicyFlags(const std::vector<std::string>& positionals,
                               PolicyFlags* flags);

// The policy the flags select: the file, or the inline one-phase policy of
// --network-access. Errors: Malformed for a file that does not parse; any
// other code means the file could not be read (exit kExitNoInput).
absl::StatusOr<v1::PolicySet> LoadPolicyFromFlags(const PolicyFlags& flags);

// The resolver the flags select (--resolver servers, else the host's
// resolv.conf) and the host nameservers for dns SYSTEM (the --resolver
// servers, else resolv.conf's). The c-ares channel is created on first use:
// a policy without names needs no working DNS configuration.
struct ResolverSetup {
  std::unique_ptr<Resolver> resolver;
  absl::StatusOr<std::vector<HostPort>> system_resolvers;
};
ResolverSetup MakeResolverFromFlags(const PolicyFlags& flags);

// Flag syntaxes, exposed for tests.
// --tool and --required-tool: "URL" or "NAME=URL" (NAME: letters, digits,
// '_', '-', '.').
absl::StatusOr<v1::ToolGrant> ParseToolFlag(absl::string_view text,
                                            bool required);
// --allow: HOST:PORT, HOST:FIRST-LAST, [IPv6]:PORT, each optionally followed
// by /tcp, /udp or /any (default tcp). HOST is a name, an address or a CIDR
// ("10.0.0.0/8:443", "[fd00::/8]:443/udp").
absl::StatusOr<v1::AllowRule> ParseAllowFlag(absl::string_view text);

}  // namespace sandfence

#endif  // SANDFENCE_CLI_POLICY_FLAGS_H_
