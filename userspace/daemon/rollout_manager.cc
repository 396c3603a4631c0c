#include "daemon/rollout_manager.h"

#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "compile/compiler.h"
#include "daemon/log.h"
#include "egress/egress_abi.h"
#include "egress/net_event.h"
#include "guard/guard_record.h"
#include "policy/policy_source.h"
#include "policy/rollout_endpoints.h"
#include "records/journal.h"
#include "records/merged_record.h"
#include "resolve/resolver.h"
#include "sandbox/kernel_enforcement.h"
#include "sandbox/netns.h"
#include "sandbox/reaper.h"

#include "daemon/rollout_internal.h"

namespace sandfence {

using rollout_internal::CompileForRequest;
using rollout_internal::Echo;
using rollout_internal::MtimeNs;
using rollout_internal::NowUnixNs;
using rollout_internal::OwnCgroupChain;
using rollout_internal::PhaseIsAuditOnly;
using rollout_internal::SourceOf;

RolloutManager::RolloutManager(ManagerOptions options,
                               std::unique_ptr<HostEnforcement> enforcement,
                               std::unique_ptr<StateStore> store)
    : options_(std::move(options)),
      enforcement_(std::move(enforcement)),
      store_(std::move(store)) {}

absl::StatusOr<std::unique_ptr<RolloutManager>> RolloutManager::Create(
    ManagerOptions options) {
  // The state directory's lock first: a second daemon must fail before it
  // touches anything of the first's.
  absl::StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::Open(options.state_dir);
  if (!store.ok()) return store.status();
  absl::StatusOr<std::unique_ptr<HostEnforcement>> kernel =
      KernelEnforcementFor(options);
  if (!kernel.ok()) return kernel.status();
  std::unique_ptr<RolloutManager> m(new RolloutManager(
      std::move(options), *std::move(kernel), *std::move(store)));
  if (absl::Status s = MakeDirs(m->options_.records_dir); !s.ok()) return s;
  // Out of every guarded sandbox's reach: a root agent must not rewrite
  // the state a successor adopts, its own record, or the policies.
  for (const std::string* dir :
       {&m->options_.state_dir, &m->options_.records_dir,
        &m->options_.policy_dir}) {
    if (dir->empty() || ::access(dir->c_str(), F_OK) != 0) continue;
    if (absl::Status s = m->Protect(*dir); !s.ok()) return s;
  }
  m->cgroup_parent_ = m->options_.cgroup_parent;
  if (m->cgroup_parent_.empty()) {
    absl::StatusOr<std::string> mount = FindCgroup2Mount();
    if (!mount.ok()) return mount.status();
    m->cgroup_parent_ = absl::StrCat(*mount, "/sandfence");
  }
  return m;
}

absl::StatusOr<std::unique_ptr<HostEnforcement>>
RolloutManager::KernelEnforcementFor(const ManagerOptions& options) {
  KernelEnforcementOptions kopts;
  kopts.host.pin_root = options.pin_dir;
  kopts.host.kind = DriverKind::kDaemon;
  kopts.egress.ring_bytes = options.ring_bytes;
  absl::StatusOr<std::unique_ptr<KernelEnforcement>> kernel =
      KernelEnforcement::Create(kopts);
  if (!kernel.ok()) return kernel.status();
  return std::unique_ptr<HostEnforcement>(*std::move(kernel));
}

absl::StatusOr<std::unique_ptr<RolloutManager>> RolloutManager::CreateWith(
    ManagerOptions options, std::unique_ptr<HostEnforcement> enforcement) {
  absl::StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::Open(options.state_dir);
  if (!store.ok()) return store.status();
  std::unique_ptr<RolloutManager> m(new RolloutManager(
      std::move(options), std::move(enforcement), *std::move(store)));
  if (absl::Status s = MakeDirs(m->options_.records_dir); !s.ok()) return s;
  m->cgroup_parent_ = m->options_.cgroup_parent.empty()
                          ? "/sys/fs/cgroup/sandfence"
                          : m->options_.cgroup_parent;
  return m;
}

absl::Status RolloutManager::Protect(const std::string& path) {
  {
    absl::MutexLock lock(&own_paths_mu_);
    own_paths_.push_back(path);
  }
  absl::Status s = enforcement_->Protect(path);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("protect ", path,
                                             " from sandboxes: ", s.message()));
}

RolloutManager::~RolloutManager() {
  // Its thread calls into the rollouts: gone before them.
  supervision_.reset();
  stop_ = true;
  if (event_thread_.joinable()) event_thread_.join();
  std::vector<std::shared_ptr<Rollout>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, r] : rollouts_) all.push_back(r);
    for (auto& s : unowned_) s->Release();
  }
  // Open rollouts stay enforced for the next daemon: released, not ended.
  for (const std::shared_ptr<Rollout>& r : all) {
    absl::MutexLock rl(&r->mu);
    if (r->sandbox) r->sandbox->Release();
  }
}

std::string RolloutManager::FinalRecordPath(
    absl::string_view rollout_id) const {
  return absl::StrCat(options_.records_dir, "/", rollout_id, ".record.pb");
}

std::string RolloutManager::JournalPath(absl::string_view rollout_id,
                                        int segment) const {
  if (segment == 0) {
    return absl::StrCat(options_.records_dir, "/", rollout_id, ".record");
  }
  return absl::StrCat(options_.records_dir, "/", rollout_id, ".", segment,
                      ".record");
}

std::shared_ptr<RolloutManager::Rollout> RolloutManager::Find(
    const std::string& rollout_id) {
  absl::MutexLock lock(&mu_);
  auto it = rollouts_.find(rollout_id);
  return it == rollouts_.end() ? nullptr : it->second;
}

void RolloutManager::Publish(const Rollout& r) {
  v1::RolloutSummary s;
  s.set_rollout_id(r.id());
  s.set_cgroup_path(r.state.response().cgroup_path());
  s.set_cgroup_id(r.cgroup_id());
  s.set_phase(r.state.phase());
  *s.mutable_start_time() = r.state.start_time();
  s.set_borrowed_from(r.state.response().borrowed_from());
  s.set_adopted(r.adopted);
  s.set_generation(r.state.response().generation());
  s.set_audit_only(PhaseIsAuditOnly(r.state, r.state.phase()));
  views_[r.id()] = std::move(s);
}

bool RolloutManager::InsideSandbox(pid_t pid) {
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  absl::StatusOr<std::string> rel = CgroupOfPid(pid);
  // A caller whose cgroup cannot be read is refused: unknown is not
  // outside.
  if (!mount.ok() || !rel.ok()) return true;
  const std::vector<uint64_t> sandboxes = enforcement_->AllSandboxes();
  std::string path = absl::StrCat(*mount, *rel == "/" ? "" : *rel);
  while (path.size() > mount->size()) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 &&
        std::find(sandboxes.begin(), sandboxes.end(),
                  static_cast<uint64_t>(st.st_ino)) != sandboxes.end()) {
      return true;
    }
    path = path.substr(0, path.rfind('/'));
  }
  return false;
}

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

absl::StatusOr<v1::EnterRolloutResponse> RolloutManager::Enter(
    const std::string& rollout_id, pid_t caller) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  std::shared_ptr<Rollout> r = Find(rollout_id);
  if (r == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  std::vector<std::string> own;
  {
    absl::MutexLock lock(&own_paths_mu_);
    own = own_paths_;
  }
  absl::MutexLock rl(&r->mu);
  if (!r->open()) {
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  Sandbox& sb = *r->sandbox;
  if (sb.guard_mode() == GuardMode::kOff) {
    return Rejected(absl::StrCat(
        "rollout \"", rollout_id,
        "\" has its process guard off: nothing to confine an entering "
        "process to (start it with a guard mode)"));
  }
  const ConfinePlan plan = sb.ConfinementPlan(
      SandfenceOwnPaths(options_.pin_dir,
                        {options_.state_dir, options_.records_dir,
                         options_.policy_dir}));
  v1::EnterRolloutResponse out;
  out.set_cgroup_path(sb.cgroup().path);
  out.set_phase(sb.phase());
  out.set_allow_io_uring(!plan.deny_io_uring);
  out.set_deny_ptrace(plan.deny_ptrace);
  for (const std::string& p : plan.no_access) out.add_no_access(p);
  for (const std::string& p : own) out.add_no_access(p);
  out.set_guard(sb.guard_text());
  if (sb.recorder() != nullptr) {
    sb.recorder()->AddWarning(
        v1::WARNING_ENTERED,
        absl::StrCat("pid ", caller,
                     " entered through `sandfence enter` in phase \"",
                     sb.phase(), "\", confined by Landlock + seccomp",
                     plan.deny_io_uring ? "" : " (io_uring allowed)",
                     plan.deny_ptrace ? " (no ptrace)" : ""));
  }
  LogInfo("rollout %s: pid %d entered (phase %s)", rollout_id, caller,
          sb.phase());
  return out;
}

absl::StatusOr<v1::SetPhaseResponse> RolloutManager::SetPhase(
    const std::string& rollout_id, const std::string& phase_name) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  std::shared_ptr<Rollout> r = Find(rollout_id);
  if (r == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  absl::MutexLock rl(&r->mu);
  if (!r->open()) {
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  absl::StatusOr<PhaseChange> change = r->sandbox->SwitchPhase(phase_name);
  if (!change.ok()) return change.status();
  v1::SetPhaseResponse out;
  out.set_previous_phase(change->previous);
  out.set_phase(change->phase);
  out.set_generation(change->generation);
  for (const CutConnection& c : change->cut) *out.add_cut() = CutToProto(c);
  out.set_not_cut(change->not_cut);
  out.set_audit_only(PhaseIsAuditOnly(r->state, change->phase));
  if (!change->changed) return out;
  r->state.set_phase(change->phase);
  r->state.mutable_response()->set_generation(change->generation);
  // The kernel's entry names the phase in force: a crash before this save
  // is corrected by the successor, which believes the kernel.
  if (absl::Status s = store_->Save(r->state); !s.ok()) {
    LogWarning("rollout %s: save state: %s", rollout_id, StatusText(s));
  }
  {
    absl::MutexLock lock(&mu_);
    Publish(*r);
  }
  ++switches_;
  LogInfo("rollout %s: phase %s -> %s (generation %d)", rollout_id,
          out.previous_phase(), out.phase(), out.generation());
  return out;
}

absl::StatusOr<v1::RolloutRecord> RolloutManager::MergedRecord(
    const Rollout& r) {
  std::vector<RecordSegment> segments;
  for (int k = 0; k < r.state.journal_path_size(); ++k) {
    const std::string& path = r.state.journal_path(k);
    absl::StatusOr<v1::RolloutRecord> rec = ReadRecordFile(path);
    if (!rec.ok()) return rec.status();
    RecordSegment seg;
    seg.path = path;
    seg.record = *std::move(rec);
    seg.stopped_unix_ns = MtimeNs(path);
    if (k < r.state.adopted_time_size()) {
      seg.handed_over_unix_ns = TimestampToUnixNs(r.state.adopted_time(k));
    }
    segments.push_back(std::move(seg));
  }
  if (segments.empty()) return absl::InternalError("no journal");
  return MergeRecordSegments(segments);
}

absl::StatusOr<v1::EndRolloutResponse> RolloutManager::End(
    const std::string& rollout_id) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  std::shared_ptr<Rollout> r = Find(rollout_id);
  if (r == nullptr) {
    // A retried EndRollout (its answer was lost) gets the record again.
    absl::StatusOr<std::string> bytes =
        ReadWholeFile(FinalRecordPath(rollout_id));
    v1::EndRolloutResponse again;
    if (bytes.ok() && again.mutable_record()->ParseFromString(*bytes)) {
      again.set_record_path(FinalRecordPath(rollout_id));
      return again;
    }
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  absl::MutexLock rl(&r->mu);
  if (!r->open()) {
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  absl::StatusOr<SandboxEnd> ended = r->sandbox->End();
  r->ended = true;
  if (supervision_) supervision_->Forget(rollout_id);
  {
    // What the rollout counted stays in the metrics' sums (they are
    // counters: an end must not lower them).
    RolloutReading final;
    if (ended.ok() && ended->counters_read) {
      final.events_lost = ended->counters.events_lost;
    }
    if (r->sandbox->recorder() != nullptr) {
      final.dns = r->sandbox->recorder()->dns_stats();
    }
    totals_.Retire(rollout_id, final);
  }
  store_->Remove(rollout_id);
  // The final record is on disk before the rollout leaves the open set: a
  // caller that no longer finds it open (List, a reclaim it waits for)
  // finds its record (GetRecord), never neither.
  absl::StatusOr<v1::RolloutRecord> record =
      ended.ok() ? MergedRecord(*r) : ended.status();
  v1::EndRolloutResponse out;
  if (record.ok()) {
    if (!ended->cleanup.ok()) {
      LogWarning("rollout %s: end: %s", rollout_id,
                 StatusText(ended->cleanup));
    }
    *out.mutable_record() = *record;
    for (const std::string& p : r->state.journal_path()) {
      out.add_journal_path(p);
    }
    out.set_record_path(FinalRecordPath(rollout_id));
    if (absl::Status s =
            WriteFileAtomic(out.record_path(), record->SerializeAsString());
        !s.ok()) {
      LogError("rollout %s: write record: %s", rollout_id, StatusText(s));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    rollouts_.erase(rollout_id);
    views_.erase(rollout_id);
    auto owner = owner_of_.find(r->cgroup_id());
    if (owner != owner_of_.end() && owner->second == rollout_id) {
      owner_of_.erase(owner);
    }
  }
  ++ended_;
  if (!record.ok()) return record.status();
  LogInfo("ended rollout %s: %d attempts%s", rollout_id,
          record->net_attempt_size(), record->lossy() ? " (lossy)" : "");
  return out;
}

absl::StatusOr<v1::GetRecordResponse> RolloutManager::GetRecord(
    const std::string& rollout_id) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  v1::GetRecordResponse out;
  if (std::shared_ptr<Rollout> r = Find(rollout_id)) {
    absl::MutexLock rl(&r->mu);
    if (r->open()) {
      if (r->sandbox->recorder() != nullptr) {
        r->sandbox->recorder()->Tick().IgnoreError();
      }
      absl::StatusOr<v1::RolloutRecord> rec = MergedRecord(*r);
      if (!rec.ok()) return rec.status();
      *out.mutable_record() = *rec;
      out.set_open(true);
      return out;
    }
  }
  absl::StatusOr<std::string> bytes =
      ReadWholeFile(FinalRecordPath(rollout_id));
  if (!bytes.ok()) {
    return absl::NotFoundError(
        absl::StrCat("no rollout \"", rollout_id, "\", open or ended"));
  }
  if (!out.mutable_record()->ParseFromString(*bytes)) {
    return absl::DataLossError(
        absl::StrCat("record ", FinalRecordPath(rollout_id), " is corrupt"));
  }
  return out;
}

absl::StatusOr<uint64_t> RolloutManager::WatchLines(
    const std::string& rollout_id, LineSink sink) {
  if (!options_.events) {
    return absl::FailedPreconditionError("this daemon has no event stream");
  }
  if (!rollout_id.empty()) {
    if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
    if (!IsOpen(rollout_id)) {
      return absl::NotFoundError(
          absl::StrCat("no open rollout \"", rollout_id, "\""));
    }
  }
  return options_.events->AddWatcher(
      [rollout_id, sink = std::move(sink)](const events::Event& e,
                                           const std::string& line) {
        // Host-wide lines (the stream's own losses) go to every watcher.
        if (rollout_id.empty() || e.rollout.empty() || e.rollout == rollout_id) {
          sink(e, line);
        }
      });
}

void RolloutManager::UnwatchLines(uint64_t watch_id) {
  if (options_.events) options_.events->RemoveWatcher(watch_id);
}

}  // namespace sandfence
