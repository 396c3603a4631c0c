// A rollout's start, and its dry run (Check): the request's bounds, its
// idempotent retries, the sandbox it may use (and whether it borrows it),
// the compiled policy, then the sandbox's start and the saved state.
#include "daemon/rollout_manager.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "compile/compiler.h"
#include "daemon/log.h"
#include "daemon/rollout_internal.h"
#include "daemon/state_store.h"
#include "egress/egress_abi.h"
#include "events/event.h"
#include "policy/policy_source.h"
#include "records/boot_clock.h"
#include "records/recorder.h"
#include "sandbox/netns.h"

namespace sandfence {

using rollout_internal::CompileForRequest;
using rollout_internal::NowUnixNs;
using rollout_internal::OwnCgroupChain;
using rollout_internal::SourceOf;

absl::StatusOr<CgroupRef> RolloutManager::CheckExistingCgroup(
    const std::string& path) {
  // Each refusal names the field for programs too; `reason` follows
  // "sandbox.cgroup_path "PATH" " in the message.
  const auto refuse = [&](absl::Status (*kind)(absl::string_view),
                          absl::string_view reason) {
    return WithSubject(
        kind(absl::StrCat("sandbox.cgroup_path \"", Echo(path), "\" ", reason)),
        {"", "sandbox.cgroup_path", path, std::string(reason)});
  };
  if (path.empty() || path[0] != '/' || absl::StrContains(path, "/../") ||
      absl::EndsWith(path, "/..")) {
    return refuse(Malformed, "must be an absolute path");
  }
  absl::StatusOr<CgroupRef> ref = InspectCgroup(path);
  if (!ref.ok()) {
    return WithSubject(
        Malformed(absl::StrCat("sandbox.cgroup_path \"", Echo(path),
                               "\": ", ref.status().message())),
        {"", "sandbox.cgroup_path", path, std::string(ref.status().message())});
  }
  if (ref->level == 0) {
    return refuse(Rejected,
                  "is the root cgroup: its policy would govern every process "
                  "on the host");
  }
  for (uint64_t own : OwnCgroupChain()) {
    if (own == ref->id) {
      return refuse(Rejected,
                    "holds the sandfence daemon itself: a sandbox must not "
                    "govern its enforcer");
    }
  }
  if (ref->level > SF_MAX_CGROUP_DEPTH) {
    return refuse(Rejected,
                  absl::StrCat("is at cgroup level ", ref->level,
                               "; sandfence judges sandboxes down to level ",
                               SF_MAX_CGROUP_DEPTH));
  }
  return ref;
}

absl::StatusOr<v1::StartRolloutResponse> RolloutManager::Start(
    const v1::StartRolloutRequest& request) {
  absl::StatusOr<v1::StartRolloutResponse> out = StartOrRefuse(request);
  if (!out.ok() && options_.events) {
    options_.events->Emit(events::RefusalEvent(
        request.rollout_id(), request.initial_phase(), out.status()));
  }
  return out;
}

absl::Status RolloutManager::RequestTooLarge(size_t bytes) const {
  const std::string reason = absl::StrCat(
      "is ", bytes, " bytes; at most ", options_.max_request_bytes);
  return WithSubject(Malformed(absl::StrCat("the request ", reason)),
                     {"", "request", "", reason});
}

absl::StatusOr<v1::StartRolloutResponse> RolloutManager::StartOrRefuse(
    const v1::StartRolloutRequest& request) {
  if (absl::Status s = ValidateRolloutId(request.rollout_id()); !s.ok()) {
    ++refusals_;
    return s;
  }
  if (request.ByteSizeLong() > options_.max_request_bytes) {
    ++refusals_;
    return RequestTooLarge(request.ByteSizeLong());
  }
  const std::string bytes = DeterministicBytes(request);
  std::shared_ptr<Rollout> rollout;
  bool fresh = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = rollouts_.find(request.rollout_id());
    if (it != rollouts_.end()) {
      rollout = it->second;
    } else {
      if (rollouts_.size() >= options_.max_open_rollouts) {
        ++refusals_;
        return Unavailable(absl::StrCat("this daemon already serves ",
                                        rollouts_.size(),
                                        " open rollouts (its limit)"));
      }
      rollout = std::make_shared<Rollout>();
      rollout->request_bytes = bytes;
      *rollout->state.mutable_request() = request;
      rollouts_.emplace(request.rollout_id(), rollout);
      fresh = true;
    }
  }
  absl::MutexLock rl(&rollout->mu);
  if (!fresh) {
    // A concurrent retry waits for the first start to finish.
    rollout->mu.Await(absl::Condition(&rollout->started));
    // A retry of the same request gets the same answer; anything else with
    // this id is a mistake of the caller.
    if (rollout->request_bytes != bytes) {
      ++refusals_;
      return absl::AlreadyExistsError(
          absl::StrCat("rollout \"", request.rollout_id(),
                       "\" is already open with a different request"));
    }
    if (!rollout->start_status.ok()) return rollout->start_status;
    if (rollout->ended) {
      return absl::AlreadyExistsError(
          absl::StrCat("rollout \"", request.rollout_id(), "\" has ended"));
    }
    return rollout->state.response();
  }
  absl::Status s = StartLocked(request, rollout.get());
  rollout->started = true;
  rollout->start_status = s;
  absl::MutexLock lock(&mu_);
  if (!s.ok()) {
    ++refusals_;
    rollouts_.erase(request.rollout_id());
    auto owner = owner_of_.find(rollout->cgroup_id());
    if (owner != owner_of_.end() && owner->second == request.rollout_id()) {
      owner_of_.erase(owner);
    }
    LogInfo("refused rollout %s: %s", request.rollout_id(), StatusText(s));
    return s;
  }
  Publish(*rollout);
  ++started_;
  LogInfo("started rollout %s in %s (phase %s%s)", request.rollout_id(),
          rollout->state.response().cgroup_path(), rollout->state.phase(),
          rollout->state.response().borrowed_from().empty()
              ? ""
              : absl::StrCat(", borrowing from ",
                             rollout->state.response().borrowed_from()));
  return rollout->state.response();
}

absl::StatusOr<RolloutManager::PreparedStart> RolloutManager::Prepare(
    const v1::StartRolloutRequest& req, Rollout* r) {
  const std::string& id = req.rollout_id();
  PreparedStart out;
  // 1. The policy set, from exactly one place.
  absl::StatusOr<v1::PolicySet> policy_set =
      LoadPolicySource(SourceOf(req), options_.policy_dir);
  if (!policy_set.ok()) return policy_set.status();

  // 2. The sandbox, and whether another open rollout governs it: decided
  // and (for a start) reserved in one step, so that two starts on one
  // cgroup cannot both believe they own it.
  SandboxSpec& spec = out.spec;
  spec.rollout_id = id;
  switch (req.sandbox().kind_case()) {
    case v1::SandboxSpec::kCgroupPath: {
      absl::StatusOr<CgroupRef> ref =
          CheckExistingCgroup(req.sandbox().cgroup_path());
      if (!ref.ok()) return ref.status();
      spec.cgroup_path = ref->path;
      spec.create_cgroup = false;
      if (r != nullptr) r->state.mutable_response()->set_cgroup_id(ref->id);
      absl::MutexLock lock(&mu_);
      auto owner = owner_of_.find(ref->id);
      if (owner != owner_of_.end()) {
        out.borrowed_from = owner->second;
      } else if (!req.borrowed() && r != nullptr) {
        owner_of_[ref->id] = id;
      }
      break;
    }
    case v1::SandboxSpec::kCreate:
      if (!req.sandbox().create()) {
        return WithSubject(
            Malformed("sandbox: set cgroup_path, or create = true"),
            {"", "sandbox", "", "set cgroup_path, or create = true"});
      }
      spec.cgroup_path = absl::StrCat(cgroup_parent_, "/", id);
      spec.create_cgroup = true;
      break;
    default:
      return WithSubject(
          Malformed("sandbox: set cgroup_path, or create = true"),
          {"", "sandbox", "", "set cgroup_path, or create = true"});
  }
  if (!out.borrowed_from.empty() && !req.borrowed()) {
    const std::string reason = absl::StrCat(
        "is part of open rollout \"", out.borrowed_from,
        "\"; another rollout may use it only as borrowed (borrowed = true) "
        "with inherit phases");
    return WithSubject(
        Rejected(absl::StrCat("sandbox ", spec.cgroup_path, " ", reason)),
        {"", "sandbox.cgroup_path", spec.cgroup_path, reason});
  }
  spec.borrowed = !out.borrowed_from.empty() || req.borrowed();

  // 3. Compile: every refusal comes back here, before anything is created
  // or attached.
  absl::StatusOr<CompiledPolicy> compiled =
      CompileForRequest(*policy_set, req, options_.resolvers);
  if (!compiled.ok()) return compiled.status();
  if (absl::Status s = CheckAuditAllowed(*compiled, req.allow_audit(),
                                         "allow_audit: true in the request");
      !s.ok()) {
    return s;
  }
  if (spec.borrowed) {
    std::string owner_guard = "not reported";
    if (!out.borrowed_from.empty()) {
      if (std::shared_ptr<Rollout> owner = Find(out.borrowed_from)) {
        absl::MutexLock ol(&owner->mu);
        if (owner->sandbox) owner_guard = owner->sandbox->guard_text();
      }
    }
    spec.borrowed_guard_text = absl::StrCat(
        owner_guard, " (the guard of ",
        out.borrowed_from.empty()
            ? std::string("the sandbox's owner")
            : absl::StrCat("rollout \"", out.borrowed_from, "\""),
        ", which owns the sandbox)");
  }
  spec.policy = *std::move(compiled);
  spec.initial_phase = req.initial_phase();
  spec.own_netns = req.own_netns();
  if (!req.netns_path().empty()) {
    if (!req.own_netns()) {
      const std::string reason = "is given, but own_netns is not set";
      return WithSubject(
          Malformed(absl::StrCat("netns_path \"", req.netns_path(), "\" ",
                                 reason)),
          {"", "netns_path", req.netns_path(), reason});
    }
    absl::StatusOr<UniqueFd> opened = OpenNetns(req.netns_path());
    if (!opened.ok()) {
      return WithSubject(opened.status(),
                         {"", "netns_path", req.netns_path(),
                          std::string(opened.status().message())});
    }
    out.netns = *std::move(opened);
    spec.netns_fd = out.netns.get();
  }
  return out;
}

absl::StatusOr<v1::CheckRolloutResponse> RolloutManager::Check(
    const v1::StartRolloutRequest& request) {
  if (absl::Status s = ValidateRolloutId(request.rollout_id()); !s.ok()) {
    return s;
  }
  if (request.ByteSizeLong() > options_.max_request_bytes) {
    return RequestTooLarge(request.ByteSizeLong());
  }
  absl::StatusOr<PreparedStart> prepared = Prepare(request, nullptr);
  if (!prepared.ok()) return prepared.status();
  absl::StatusOr<SandboxCheck> checked =
      Sandbox::Check(enforcement_.get(), prepared->spec);
  if (!checked.ok()) return checked.status();
  const CompiledPolicy& policy = prepared->spec.policy;
  v1::CheckRolloutResponse out;
  out.set_policy_name(policy.name);
  out.set_policy_hash(policy.content_hash);
  out.set_phase(policy.phases[checked->phase_index].name);
  for (const CompiledPhase& p : policy.phases) {
    *out.add_phase_policy() = ToPhasePolicy(p);
    if (p.audit_only) out.add_audit_only_phase(p.name);
  }
  out.set_guard(checked->guard_text);
  return out;
}

absl::Status RolloutManager::StartLocked(const v1::StartRolloutRequest& req,
                                         Rollout* r) {
  const std::string& id = req.rollout_id();
  if (::access(FinalRecordPath(id).c_str(), F_OK) == 0 ||
      ::access(JournalPath(id, 0).c_str(), F_OK) == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("rollout \"", id, "\" already has a record in ",
                     options_.records_dir, ": rollout ids are not reused"));
  }
  absl::StatusOr<PreparedStart> prepared = Prepare(req, r);
  if (!prepared.ok()) return prepared.status();
  SandboxSpec spec = std::move(prepared->spec);
  const std::string borrowed_from = prepared->borrowed_from;
  spec.record_path = JournalPath(id, 0);
  spec.events = options_.events;

  // 4. The sandbox's life starts (refusals of the guard mode come first).
  absl::StatusOr<std::unique_ptr<Sandbox>> sandbox =
      Sandbox::Start(enforcement_.get(), std::move(spec));
  if (!sandbox.ok()) return sandbox.status();
  Sandbox& sb = **sandbox;
  if (!sb.borrowed()) {
    absl::MutexLock lock(&mu_);
    owner_of_[sb.cgroup().id] = id;
  }
  CountDecisions(sb);

  // 5. What a later daemon needs to adopt it.
  v1::StartRolloutResponse* resp = r->state.mutable_response();
  resp->set_rollout_id(id);
  resp->set_cgroup_path(sb.cgroup().path);
  resp->set_cgroup_id(sb.cgroup().id);
  resp->set_phase(sb.phase());
  for (const CompiledPhase& p : sb.policy().phases) {
    *resp->add_phase_policy() = ToPhasePolicy(p);
    *r->state.add_compiled_phase() = ToPhasePolicy(p);
    if (p.audit_only) resp->add_audit_only_phase(p.name);
  }
  if (const CompiledPhase* now = sb.policy().FindPhase(sb.phase())) {
    resp->set_audit_only(now->audit_only);
  }
  resp->set_policy_name(sb.policy().name);
  resp->set_policy_hash(sb.policy().content_hash);
  resp->set_record_path(FinalRecordPath(id));
  resp->set_borrowed_from(borrowed_from);
  resp->set_generation(sb.generation());
  r->state.set_phase(sb.phase());
  r->state.set_created_cgroup(sb.created());
  r->state.set_guard_mode(std::string(GuardModeName(sb.guard_mode())));
  *r->state.mutable_start_time() = UnixNsToTimestamp(NowUnixNs());
  r->state.add_journal_path(JournalPath(id, 0));
  if (absl::Status s = store_->Save(r->state); !s.ok()) {
    // Without its state a crash would leave the rollout enforced but
    // unadoptable: refuse now instead, retryably.
    const std::string journal = JournalPath(id, 0);
    sb.End().IgnoreError();
    ::unlink(journal.c_str());
    return Unavailable(
        absl::StrCat("persist the rollout state: ", s.message()));
  }
  r->sandbox = *std::move(sandbox);
  return absl::OkStatus();
}

}  // namespace sandfence
