// The sandbox's DNS filter (issue 14): which upstreams its filtered phases
// name, its target, and the names of the phase in force.
#include "sandbox/sandbox.h"

#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "dns/name_rules.h"
#include "sandbox/sandbox_internal.h"

namespace sandfence {
namespace sandbox_internal {

absl::StatusOr<std::optional<std::vector<HostPort>>> DnsUpstreams(
    const CompiledPolicy& policy) {
  std::optional<std::vector<HostPort>> out;
  const CompiledPhase* first = nullptr;
  for (const CompiledPhase& p : policy.phases) {
    if (!p.dns_filtered) continue;
    // Every phase's names, before anything exists: a switch must not find
    // them wrong.
    if (absl::StatusOr<dns::PhaseNameRules> rules =
            dns::PhaseNameRules::Build(p.name_rules);
        !rules.ok()) {
      return Malformed(absl::StrCat("phase \"", p.name, "\": DNS names: ",
                                    rules.status().message()));
    }
    if (!out) {
      out = p.dns_upstreams;
      first = &p;
    } else if (*out != p.dns_upstreams) {
      return Rejected(absl::StrCat(
          "phases \"", first->name, "\" and \"", p.name,
          "\" filter DNS through different upstream resolvers; one DNS filter "
          "serves a sandbox, so its filtered phases must name the same ones"));
    }
  }
  return out;
}

}  // namespace sandbox_internal

absl::Status Sandbox::ServeDns(int netns_fd) {
  std::shared_ptr<RolloutRecorder> recorder = recorder_;
  std::shared_ptr<SandboxEvents> events = events_;
  absl::Status s = host_->StartDns(
      cgroup_.id, *dns_upstreams_,
      [recorder, events](const DnsQueryInfo& q) {
        if (recorder) recorder->AddDnsQuery(q);
        events->Dns(q);
      },
      netns_fd);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("DNS filter: ", s.message()));
  }
  dns_served_ = true;
  return SetDnsPhaseLocked();
}

absl::Status Sandbox::SetDnsPhaseLocked() {
  if (!dns_served_) return absl::OkStatus();
  absl::Status s = host_->SetDnsPhase(cgroup_.id, policy_.phases[phase_index_],
                                      generation_);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("DNS filter: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace sandfence
