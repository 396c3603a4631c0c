#include "fuzz_support.h"

#include <cstdio>
#include <cstdlib>
#include <map>

#include "absl/hash/hash.h"
#include "common/status.h"
#include "compile/compiler.h"
#include "compile/format.h"
#include "compile/rules.h"
#include "google/protobuf/stubs/logging.h"

namespace sandfence::fuzz {
namespace {

IpAddress Addr(absl::string_view text) {
  std::optional<IpAddress> a = IpAddress::Parse(text);
  Check(a.has_value(), text);
  return *a;
}

// The names the seeds use, with the answers the golden tests give them.
const std::map<std::string, std::vector<std::string>, std::less<>>& Table() {
  static const auto* table =
      new std::map<std::string, std::vector<std::string>, std::less<>>{
          {"model.internal", {"10.1.2.3"}},
          {"search.internal", {"10.1.2.10", "fd00::10"}},
          {"tools.internal", {"10.1.2.20"}},
          {"pypi.org", {"151.101.0.223", "2a04:4e42::223"}},
          {"files.pythonhosted.org", {"151.101.1.63"}},
          {"loop.internal", {"127.0.0.1"}},
          {"zero.internal", {"0.0.0.0", "10.9.9.9"}},
      };
  return *table;
}

}  // namespace

void Check(bool ok, absl::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "sandfence fuzz check failed: %.*s\n",
               static_cast<int>(what.size()), what.data());
  std::abort();
}

void QuietProtobufLogs() { google::protobuf::SetLogHandler(nullptr); }

absl::StatusOr<std::vector<IpAddress>> FuzzResolver::Resolve(
    absl::string_view name) {
  if (auto it = Table().find(name); it != Table().end()) {
    std::vector<IpAddress> out;
    for (const std::string& a : it->second) out.push_back(Addr(a));
    return out;
  }
  // Every other name: one of the outcomes a real resolver can give, picked
  // by the name so that a crash input reproduces.
  const size_t h = absl::HashOf(name);
  switch (h % 9) {
    case 0:
      return std::vector<IpAddress>{Addr("192.0.2.7")};
    case 1:
      return std::vector<IpAddress>{Addr("198.51.100.1"), Addr("2001:db8::7")};
    case 2:
      return std::vector<IpAddress>{Addr("127.0.0.1"), Addr("::1")};
    case 3:
      return std::vector<IpAddress>{Addr("0.0.0.0"), Addr("::")};
    case 4:
      return std::vector<IpAddress>{Addr("::ffff:127.0.0.2"),
                                    Addr("::ffff:203.0.113.9")};
    case 5:
      return std::vector<IpAddress>{};
    case 6:
      return Rejected(absl::StrCat("name \"", name, "\" does not exist"));
    case 7:
      return Unavailable(absl::StrCat("timeout resolving \"", name, "\""));
    default:
      return std::vector<IpAddress>{Addr("10.0.0.1"), Addr("10.0.0.1"),
                                    Addr("fd00::1")};
  }
}

namespace {

bool IsHostLoopback(const IpPrefix& dest) {
  static const IpPrefix kLoop4 = *IpPrefix::Parse("127.0.0.0/8");
  static const IpPrefix kLoop6 = *IpPrefix::Parse("::1/128");
  return kLoop4.Contains(dest) || kLoop6.Contains(dest);
}

void CheckPhase(const CompiledPhase& phase, const v1::PolicySet& policy,
                const CompileContext& context) {
  const v1::Phase* source = nullptr;
  for (const v1::Phase& p : policy.phase()) {
    if (p.name() == phase.name) source = &p;
  }
  Check(source != nullptr, "a compiled phase has a name the policy lacks");
  if (!phase.restricted()) {
    Check(phase.rules.empty(), "an inherit phase has rules");
    return;
  }
  const bool own_loopback = source->loopback() == v1::LOOPBACK_RULES_ONLY;
  for (size_t i = 0; i < phase.rules.size(); ++i) {
    const Rule& r = phase.rules[i];
    Check(r.port_first >= 1 && r.port_first <= r.port_last,
          "a rule's port range is empty or includes port 0");
    Check(!(r.dest.is_host() && r.dest.address().IsUnspecified()),
          "a rule allows the unspecified address");
    if (context.own_netns && (!own_loopback || r.source == RuleSource::kModel ||
                              r.source == RuleSource::kTool)) {
      Check(!IsHostLoopback(r.dest),
            "a rule allows the host's loopback from a private namespace");
    }
    if (i > 0) {
      Check(RuleLess(phase.rules[i - 1], r), "rules are not sorted");
    }
    for (size_t j = 0; j < phase.rules.size(); ++j) {
      Check(i == j || !RuleCovers(phase.rules[j], r),
            "a rule is covered by another (not merged)");
    }
  }
}

void CheckRefusal(const absl::Status& status) {
  const Refusal refusal = RefusalOf(status);
  Check(refusal == Refusal::kMalformed || refusal == Refusal::kRejected ||
            refusal == Refusal::kUnavailable,
        absl::StrCat("a compile failed with an unclassified status: ",
                     status.ToString()));
  Check(!status.message().empty(), "a refusal without a message");
}

}  // namespace

void CompileAndCheck(const v1::PolicySet& policy,
                     const RolloutEndpoints& endpoints) {
  const absl::StatusOr<std::vector<HostPort>> system_resolvers[] = {
      std::vector<HostPort>{{Addr("10.0.0.2"), 53},
                            {Addr("127.0.0.53"), 53},
                            {Addr("::ffff:0.0.0.0"), 53}},
      Unavailable("/etc/resolv.conf: no such file (fuzz)"),
  };
  const CompileContext contexts[] = {
      {.own_netns = false, .borrowed = false},
      {.own_netns = true, .borrowed = false},
      {.own_netns = false, .borrowed = true},
  };
  for (const auto& system : system_resolvers) {
    for (const CompileContext& context : contexts) {
      FuzzResolver resolver;
      PolicyCompiler compiler(&resolver, system);
      absl::StatusOr<CompiledPolicy> compiled =
          compiler.Compile(policy, endpoints, context);
      if (!compiled.ok()) {
        CheckRefusal(compiled.status());
        continue;
      }
      Check(compiled->content_hash.size() == 64, "content hash is not sha256");
      const v1::PolicySet effective = ApplyRolloutEndpoints(policy, endpoints);
      for (const CompiledPhase& phase : compiled->phases) {
        CheckPhase(phase, effective, context);
      }
      Check(!FormatCompiledPolicyText(*compiled).empty(), "empty text form");
      Check(!FormatCompiledPolicyJson(*compiled).empty(), "empty JSON form");
    }
  }
}

}  // namespace sandfence::fuzz
