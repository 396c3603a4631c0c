#include "daemon/rollout_internal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "compile/compiler.h"
#include "policy/rollout_endpoints.h"
#include "resolve/resolver.h"

namespace sandfence {
namespace rollout_internal {

int64_t NowUnixNs() { return absl::ToUnixNanos(absl::Now()); }

// The time of the last write to a journal: where a dead daemon's record
// stops.
std::optional<int64_t> MtimeNs(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
         st.st_mtim.tv_nsec;
}

PolicySource SourceOf(const v1::StartRolloutRequest& req) {
  PolicySource source;
  switch (req.policy_case()) {
    case v1::StartRolloutRequest::kPolicySet:
      source.kind = PolicySource::Kind::kSet;
      source.set = req.policy_set();
      break;
    case v1::StartRolloutRequest::kPolicyText:
      source.kind = PolicySource::Kind::kText;
      source.text = req.policy_text();
      break;
    case v1::StartRolloutRequest::kPolicyFile:
      source.kind = PolicySource::Kind::kFile;
      source.file = req.policy_file();
      break;
    case v1::StartRolloutRequest::kNetworkAccess:
      source.kind = PolicySource::Kind::kNetworkAccess;
      source.network_access = req.network_access();
      break;
    default:
      break;
  }
  return source;
}

absl::StatusOr<CompiledPolicy> CompileForRequest(
    const v1::PolicySet& policy_set, const v1::StartRolloutRequest& req,
    const std::vector<HostPort>& resolvers) {
  RolloutEndpoints endpoints;
  for (const std::string& m : req.endpoints().model()) {
    endpoints.model.push_back(m);
  }
  for (const v1::ToolGrant& t : req.endpoints().tool()) {
    endpoints.tools.push_back(t);
  }
  for (const v1::AllowRule& a : req.endpoints().allow()) {
    endpoints.allow.push_back(a);
  }
  CompileContext context;
  context.own_netns = req.own_netns();
  context.borrowed = req.borrowed();
  ResolverOptions ropts;
  ropts.servers = resolvers;
  LazyResolver resolver(ropts);
  PolicyCompiler compiler(
      &resolver, resolvers.empty()
                     ? ReadResolvConf()
                     : absl::StatusOr<std::vector<HostPort>>(resolvers));
  return compiler.Compile(policy_set, endpoints, context);
}

bool PhaseIsAuditOnly(const v1::RolloutState& state, absl::string_view phase) {
  for (const v1::PhasePolicy& p : state.compiled_phase()) {
    if (p.name() == phase) return p.audit_only();
  }
  return false;
}

absl::StatusOr<CompiledPolicy> PolicyFromState(const v1::RolloutState& s) {
  CompiledPolicy policy;
  policy.name = s.response().policy_name();
  policy.content_hash = s.response().policy_hash();
  for (const v1::PhasePolicy& p : s.compiled_phase()) {
    absl::StatusOr<CompiledPhase> phase = FromPhasePolicy(p);
    if (!phase.ok()) return phase.status();
    policy.phases.push_back(*std::move(phase));
  }
  if (policy.phases.empty()) return Malformed("the state has no policy");
  return policy;
}

// The cgroup v2 directories of this process and its ancestors: never a
// sandbox (attaching there would govern the daemon, or the whole host).
std::vector<uint64_t> OwnCgroupChain() {
  std::vector<uint64_t> ids;
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  absl::StatusOr<std::string> mine = CgroupOfPid(::getpid());
  if (!mount.ok() || !mine.ok()) return ids;
  std::string path = absl::StrCat(*mount, *mine == "/" ? "" : *mine);
  for (;;) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) ids.push_back(st.st_ino);
    if (path.size() <= mount->size()) break;
    path = path.substr(0, path.rfind('/'));
  }
  return ids;
}

}  // namespace rollout_internal

namespace {

bool IsIdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '-' || c == '.';
}

}  // namespace

absl::Status ValidateRolloutId(absl::string_view id) {
  const auto about = [id](absl::Status s, absl::string_view reason) {
    return WithSubject(std::move(s), {"", "rollout_id", std::string(id),
                                      std::string(reason)});
  };
  if (id.empty()) return about(Malformed("rollout_id is empty"), "is empty");
  if (id.size() > 128) {
    const std::string reason =
        absl::StrCat("is ", id.size(), " characters long; at most 128");
    return about(Malformed(absl::StrCat("rollout_id ", reason)), reason);
  }
  if (id[0] == '.' || !std::all_of(id.begin(), id.end(), IsIdChar)) {
    const std::string reason =
        "may contain only letters, digits, '_', '-' and '.', and may not "
        "start with '.'";
    return about(Malformed(absl::StrCat("rollout_id \"",
                                        Echo(id), "\" ",
                                        reason)),
                 reason);
  }
  return absl::OkStatus();
}

}  // namespace sandfence
