#include "daemon/rollout_manager.h"

#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
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
#include "guard/guard_controller.h"
#include "guard/guard_record.h"
#include "common/cgroup.h"
#include "policy/policy_loader.h"
#include "policy/rollout_endpoints.h"
#include "records/boot_clock.h"
#include "records/journal.h"
#include "resolve/resolver.h"

#ifndef SANDFENCE_VERSION
#define SANDFENCE_VERSION "unknown"
#endif

namespace sandfence {

struct RolloutManager::Rollout {
  // Serializes Start/SetPhase/End of this rollout.
  absl::Mutex mu;
  // Set once Start has finished (ok or not), under mu.
  bool started = false;
  absl::Status start_status;
  std::string request_bytes;  // deterministic: for idempotent retries
  v1::RolloutState state;     // what is persisted
  CompiledPolicy policy;
  std::optional<Cgroup> cgroup;
  std::shared_ptr<RolloutRecorder> recorder;
  // Recorders of a borrowing rollout are not routed (the owner's are).
  bool routed = false;
  bool attached = false;
  // Governed by the daemon's process guard, as sandbox guard_id.
  bool guarded = false;
  uint64_t guard_id = 0;
  // The record's enforcement of the guard (GuardEnforcementText).
  std::string guard_text;
  bool adopted = false;
  bool ended = false;

  uint64_t cgroup_id() const { return state.response().cgroup_id(); }
};

namespace {

constexpr long kCgroup2Magic = 0x63677270;

// A caller's string in a message: escaped, and cut if it is huge.
std::string Echo(absl::string_view s) {
  if (s.size() <= 64) return absl::CHexEscape(s);
  return absl::StrCat(absl::CHexEscape(s.substr(0, 64)), "... (", s.size(),
                      " bytes)");
}

bool IsIdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '-' || c == '.';
}

absl::Status MakeDirs(const std::string& path, mode_t mode) {
  std::string partial;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty()) {
      if (partial.empty()) partial = "";
      continue;
    }
    absl::StrAppend(&partial, "/", part);
    if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("create ", partial));
    }
  }
  return absl::OkStatus();
}

// Write-then-rename: a crash leaves the old state or the new, never half.
absl::Status WriteFileAtomic(const std::string& path,
                             const std::string& bytes) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  UniqueFd fd(
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) return ErrnoError(errno, absl::StrCat("create ", tmp));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, absl::StrCat("write ", tmp));
    }
    done += static_cast<size_t>(n);
  }
  if (::fdatasync(fd.get()) != 0) {
    return ErrnoError(errno, absl::StrCat("sync ", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("rename ", tmp));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(errno, absl::StrCat("open ", path));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string Deterministic(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return std::string(out.data(), static_cast<size_t>(coded.ByteCount()));
}

// Adds "(rule: ...)" context to a refusal without changing its class.
absl::Status WithContext(const absl::Status& s, absl::string_view context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

// A c-ares resolver made on first use: a policy without names needs no DNS.
class LazyResolver : public Resolver {
 public:
  explicit LazyResolver(ResolverOptions options)
      : options_(std::move(options)) {}
  absl::StatusOr<std::vector<IpAddress>> Resolve(
      absl::string_view name) override {
    if (!made_) {
      made_ = true;
      absl::StatusOr<std::unique_ptr<Resolver>> r = MakeCaresResolver(options_);
      if (r.ok()) {
        resolver_ = *std::move(r);
      } else {
        error_ = r.status();
      }
    }
    if (!resolver_) return error_;
    return resolver_->Resolve(name);
  }

 private:
  ResolverOptions options_;
  bool made_ = false;
  std::unique_ptr<Resolver> resolver_;
  absl::Status error_;
};

std::string PhaseNames(const CompiledPolicy& policy) {
  std::vector<std::string> names;
  for (const CompiledPhase& p : policy.phases) names.push_back(p.name);
  return absl::StrJoin(names, ", ");
}

int64_t NowUnixNs() { return absl::ToUnixNanos(absl::Now()); }

// What the record's enforcement says of the guard: the enforcer's name
// first, then why a phase does not get the mode it asks for (a rollout's
// mode is its initial phase's, fixed at its start).
std::string GuardEnforcementText(absl::string_view enforcer, GuardMode mode,
                                 const CompiledPolicy& policy) {
  std::vector<std::string> others;
  for (const CompiledPhase& p : policy.phases) {
    const GuardMode asked = GuardModeFromPolicy(p.guard);
    if (asked != mode) {
      others.push_back(absl::StrCat("phase \"", p.name, "\" asks for ",
                                    GuardModeName(asked)));
    }
  }
  std::string out(enforcer);
  if (mode == GuardMode::kSignal && enforcer == EnforcerName(Enforcer::kLsm)) {
    absl::StrAppend(&out,
                    "; mode signal asked, this daemon's process guard runs "
                    "lsm");
  }
  if (!others.empty()) {
    absl::StrAppend(&out, "; mode ", GuardModeName(mode),
                    " fixed at the rollout's start (",
                    absl::StrJoin(others, ", "), ": not applied)");
  }
  return out;
}

bool GuardEnforced(absl::string_view text) {
  return !text.empty() && !absl::StartsWith(text, EnforcerName(Enforcer::kOff));
}

// The time of the last write to a journal: where a dead daemon's record
// stops.
std::optional<int64_t> MtimeNs(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
         st.st_mtim.tv_nsec;
}

std::string FormatUnixNs(int64_t ns) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixNanos(ns),
                          absl::UTCTimeZone());
}

// The request's policy compiled for its sandbox: the same at a start and at
// an adoption after a restart.
absl::StatusOr<CompiledPolicy> CompileForRequest(
    const v1::PolicySet& policy_set, const v1::StartRolloutRequest& req,
    const std::vector<HostPort>& resolvers) {
  RolloutEndpoints endpoints;
  for (const std::string& m : req.endpoints().model())
    endpoints.model.push_back(m);
  for (const v1::ToolGrant& t : req.endpoints().tool())
    endpoints.tools.push_back(t);
  for (const v1::AllowRule& a : req.endpoints().allow())
    endpoints.allow.push_back(a);
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

}  // namespace

absl::Status ValidateRolloutId(absl::string_view id) {
  if (id.empty()) return Malformed("rollout_id is empty");
  if (id.size() > 128) {
    return Malformed(absl::StrCat("rollout_id is ", id.size(),
                                  " characters long; at most 128"));
  }
  if (id[0] == '.' || !std::all_of(id.begin(), id.end(), IsIdChar)) {
    return Malformed(absl::StrCat(
        "rollout_id \"", Echo(id),
        "\" may contain only letters, digits, '_', '-' and '.', and may not "
        "start with '.'"));
  }
  return absl::OkStatus();
}

RolloutManager::RolloutManager(ManagerOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<RolloutManager>> RolloutManager::Create(
    ManagerOptions options) {
  std::unique_ptr<RolloutManager> m(new RolloutManager(std::move(options)));
  for (const std::string& dir :
       {m->options_.state_dir, m->options_.records_dir}) {
    if (absl::Status s = MakeDirs(dir, 0700); !s.ok()) return s;
  }
  const std::string lock_path = absl::StrCat(m->options_.state_dir, "/.lock");
  m->lock_.reset(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!m->lock_) return ErrnoError(errno, absl::StrCat("open ", lock_path));
  if (::flock(m->lock_.get(), LOCK_EX | LOCK_NB) != 0) {
    return Unavailable(absl::StrCat("another sandfence daemon is running on ",
                                    m->options_.state_dir, " (", lock_path,
                                    " is locked)"));
  }
  m->cgroup_parent_ = m->options_.cgroup_parent;
  if (m->cgroup_parent_.empty()) {
    absl::StatusOr<std::string> mount = FindCgroup2Mount();
    if (!mount.ok()) return mount.status();
    m->cgroup_parent_ = absl::StrCat(*mount, "/sandfence");
  }
  if (::mkdir(m->cgroup_parent_.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoError(errno, absl::StrCat("create ", m->cgroup_parent_));
  }
  EgressOptions egress;
  egress.ring_bytes = m->options_.ring_bytes;
  egress.pin_dir = m->options_.pin_dir;
  absl::StatusOr<std::unique_ptr<EgressController>> controller =
      EgressController::Create(egress);
  if (!controller.ok()) return controller.status();
  m->controller_ = *std::move(controller);
  RolloutManager* self = m.get();
  absl::StatusOr<std::unique_ptr<NetEventReader>> reader =
      NetEventReader::Create(m->controller_->events_fd(),
                             [self](const NetEvent& e) { self->OnEvent(e); });
  if (!reader.ok()) return reader.status();
  absl::MutexLock lock(&m->reader_mu_);
  m->reader_ = *std::move(reader);
  return m;
}

RolloutManager::~RolloutManager() {
  stop_ = true;
  if (reader_thread_.joinable()) reader_thread_.join();
  std::vector<std::shared_ptr<Rollout>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, r] : rollouts_) all.push_back(r);
  }
  for (const std::shared_ptr<Rollout>& r : all) {
    absl::MutexLock rl(&r->mu);
    // Pinned, created sandboxes outlive this daemon: the next one adopts
    // them. Unpinned, their enforcement ends with this process, so they
    // die with it (Cgroup's destructor kills and removes them).
    if (r->cgroup && !options_.pin_dir.empty()) r->cgroup->Release();
    if (r->recorder) r->recorder->Tick().IgnoreError();
  }
}

std::string RolloutManager::StatePath(absl::string_view rollout_id) const {
  return absl::StrCat(options_.state_dir, "/", rollout_id, ".state");
}

std::string RolloutManager::FinalRecordPath(
    absl::string_view rollout_id) const {
  return absl::StrCat(options_.records_dir, "/", rollout_id, ".record.pb");
}

void RolloutManager::OnEvent(const NetEvent& e) {
  (e.denied() ? denied_ : allowed_).fetch_add(1, std::memory_order_relaxed);
  router_.OnEvent(e);
  absl::MutexLock lock(&watch_mu_);
  auto it = watchers_.find(e.sandbox);
  if (it == watchers_.end() || it->second.empty()) return;
  v1::RolloutEvent out;
  *out.mutable_time() = router_.clock().ToTimestamp(e.boot_ns);
  out.set_generation(e.generation);
  out.set_verdict(e.denied() ? v1::VERDICT_DENY : v1::VERDICT_ALLOW);
  out.set_reason(std::string(ReasonName(e.reason)));
  out.set_hook(std::string(HookName(e.hook)));
  out.set_protocol(ProtocolName(e.protocol));
  out.set_address(e.addr.ToString());
  out.set_port(e.port);
  out.set_pid(e.pid);
  out.set_tgid(e.tgid);
  out.set_command(e.comm);
  for (const Watcher& w : it->second) {
    out.set_rollout_id(w.rollout_id);
    w.sink(out);
  }
}

void RolloutManager::ReaderLoop() {
  while (!stop_) {
    {
      absl::MutexLock lock(&reader_mu_);
      absl::StatusOr<int> n = reader_->Poll(20);
      if (!n.ok()) LogError("event reader: %s", n.status().ToString());
    }
    {
      absl::MutexLock lock(&guard_mu_);
      if (guard_reader_) guard_reader_->Poll(0).IgnoreError();
    }
    router_.Tick().IgnoreError();  // errors stick in the journal
  }
}

void RolloutManager::OnGuardEvent(const sf_guard_event& e) {
  absl::MutexLock lock(&guard_route_mu_);
  auto it = guard_routes_.find(e.sandbox_id);
  if (it == guard_routes_.end()) return;  // a sandbox already unguarded
  it->second.recorder->AddGuardEntry(
      GuardEntryFromEvent(e, it->second.mono_to_unix_ns));
}

absl::StatusOr<GuardController*> RolloutManager::GuardFor(GuardMode mode) {
  if (!guard_) {
    absl::StatusOr<GuardController> made = GuardController::Create(mode);
    if (!made.ok()) return made.status();
    if (made->events_fd() >= 0) {
      absl::StatusOr<GuardEventReader> reader = GuardEventReader::Create(
          made->events_fd(),
          [this](const sf_guard_event& e) { OnGuardEvent(e); });
      if (!reader.ok()) return reader.status();
      guard_reader_.emplace(*std::move(reader));
    }
    guard_.emplace(*std::move(made));
    LogInfo("process guard loaded: %s%s", guard_->enforcer_name(),
            guard_->fallback_reason().empty()
                ? ""
                : absl::StrCat(" (lsm unavailable: ",
                               guard_->fallback_reason(), ")"));
  }
  if (mode == GuardMode::kLsm && guard_->enforcer() != Enforcer::kLsm) {
    return Rejected(absl::StrCat(
        "guard mode lsm: this daemon's process guard runs ",
        guard_->enforcer_name(),
        guard_->fallback_reason().empty()
            ? ""
            : absl::StrCat(" (lsm unavailable: ", guard_->fallback_reason(),
                           ")")));
  }
  return &*guard_;
}

absl::StatusOr<std::string> RolloutManager::Guard(Rollout* r,
                                                  const std::string& path,
                                                  uint64_t cgroup_id,
                                                  GuardMode mode) {
  if (mode == GuardMode::kOff) return std::string(EnforcerName(Enforcer::kOff));
  absl::StatusOr<CgroupRef> inspected = InspectCgroup(path);
  if (!inspected.ok()) return inspected.status();
  if (inspected->id != cgroup_id) {
    return absl::NotFoundError(
        absl::StrCat("sandbox ", path, " was replaced (cgroup id ",
                     inspected->id, ", expected ", cgroup_id, ")"));
  }
  absl::MutexLock lock(&guard_mu_);
  absl::StatusOr<GuardController*> guard = GuardFor(mode);
  if (!guard.ok()) return guard.status();
  {
    // Routed before the kernel reports anything for it.
    absl::MutexLock routes(&guard_route_mu_);
    guard_routes_[cgroup_id] =
        GuardRoute{r->recorder, MonotonicToUnixOffsetNs()};
  }
  GuardedSandbox guarded;
  guarded.cgroup_id = inspected->id;
  guarded.level = inspected->level;
  if (absl::Status s = (*guard)->AddSandbox(guarded); !s.ok()) {
    absl::MutexLock routes(&guard_route_mu_);
    guard_routes_.erase(cgroup_id);
    return s;
  }
  r->guarded = true;
  r->guard_id = cgroup_id;
  return std::string((*guard)->enforcer_name());
}

void RolloutManager::Unguard(Rollout* r) {
  if (!r->guarded) return;
  absl::MutexLock lock(&guard_mu_);
  // What the kernel queued for the sandbox reaches its record first.
  if (guard_reader_) guard_reader_->Poll(0).IgnoreError();
  if (guard_) {
    absl::StatusOr<uint64_t> lost = guard_->LostEvents(r->guard_id);
    if (lost.ok() && *lost > 0) {
      LogWarning("rollout %s: %d process-guard events lost in the kernel",
                 r->state.request().rollout_id(), *lost);
    }
    guard_->RemoveSandbox(r->guard_id).IgnoreError();
  }
  {
    absl::MutexLock routes(&guard_route_mu_);
    guard_routes_.erase(r->guard_id);
  }
  r->guarded = false;
}

std::shared_ptr<RolloutManager::Rollout> RolloutManager::Find(
    const std::string& rollout_id) {
  absl::MutexLock lock(&mu_);
  auto it = rollouts_.find(rollout_id);
  return it == rollouts_.end() ? nullptr : it->second;
}

absl::Status RolloutManager::Persist(const Rollout& r) {
  return WriteFileAtomic(StatePath(r.state.request().rollout_id()),
                         r.state.SerializeAsString());
}

absl::StatusOr<v1::StartRolloutResponse> RolloutManager::Start(
    const v1::StartRolloutRequest& request) {
  if (absl::Status s = ValidateRolloutId(request.rollout_id()); !s.ok()) {
    ++refusals_;
    return s;
  }
  if (request.ByteSizeLong() > options_.max_request_bytes) {
    ++refusals_;
    return Malformed(absl::StrCat("the request is ", request.ByteSizeLong(),
                                  " bytes; at most ",
                                  options_.max_request_bytes));
  }
  const std::string bytes = Deterministic(request);
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
  if (!s.ok()) {
    ++refusals_;
    absl::MutexLock lock(&mu_);
    rollouts_.erase(request.rollout_id());
    LogInfo("refused rollout %s: %s", request.rollout_id(), s.ToString());
    return s;
  }
  if (rollout->attached) {
    absl::MutexLock lock(&mu_);
    owner_of_[rollout->cgroup_id()] = request.rollout_id();
    guard_of_[rollout->cgroup_id()] = rollout->guard_text;
  }
  ++started_;
  LogInfo("started rollout %s in %s (phase %s%s)", request.rollout_id(),
          rollout->state.response().cgroup_path(), rollout->state.phase(),
          rollout->state.response().borrowed_from().empty()
              ? ""
              : absl::StrCat(", borrowing from ",
                             rollout->state.response().borrowed_from()));
  return rollout->state.response();
}

absl::Status RolloutManager::StartLocked(const v1::StartRolloutRequest& req,
                                         Rollout* r) {
  const std::string& id = req.rollout_id();
  if (::access(FinalRecordPath(id).c_str(), F_OK) == 0 ||
      ::access(absl::StrCat(options_.records_dir, "/", id, ".record").c_str(),
               F_OK) == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("rollout \"", id, "\" already has a record in ",
                     options_.records_dir, ": rollout ids are not reused"));
  }
  // 1. The policy set, from exactly one place.
  absl::StatusOr<v1::PolicySet> policy_set;
  switch (req.policy_case()) {
    case v1::StartRolloutRequest::kPolicySet:
      policy_set = req.policy_set();
      break;
    case v1::StartRolloutRequest::kPolicyText:
      policy_set = ParsePolicySetText(req.policy_text(), "<policy_text>");
      break;
    case v1::StartRolloutRequest::kPolicyFile: {
      const std::string& name = req.policy_file();
      if (options_.policy_dir.empty()) {
        return Rejected(
            "policy_file: this daemon has no --policy-dir; send the policy "
            "inline");
      }
      if (name.empty() || name[0] == '.' || absl::StrContains(name, '/')) {
        return Malformed(absl::StrCat("policy_file \"", Echo(name),
                                      "\" must be a plain file name"));
      }
      policy_set =
          LoadPolicySetFile(absl::StrCat(options_.policy_dir, "/", name));
      if (!policy_set.ok() &&
          RefusalOf(policy_set.status()) != Refusal::kMalformed) {
        return Malformed(absl::StrCat("policy_file \"", name,
                                      "\": ", policy_set.status().message()));
      }
      break;
    }
    case v1::StartRolloutRequest::kNetworkAccess:
      if (!v1::NetworkAccess_IsValid(req.network_access()) ||
          req.network_access() == v1::NETWORK_ACCESS_UNSPECIFIED) {
        return Malformed("network_access is unset or unknown");
      }
      policy_set = InlinePolicySet(req.network_access());
      break;
    default:
      return Malformed(
          "no policy: set policy_set, policy_text, policy_file or "
          "network_access");
  }
  if (!policy_set.ok()) return policy_set.status();

  // 2. The sandbox, and whether another open rollout governs it.
  std::optional<Cgroup> existing;
  std::string borrowed_from;
  switch (req.sandbox().kind_case()) {
    case v1::SandboxSpec::kCgroupPath: {
      const std::string& path = req.sandbox().cgroup_path();
      if (path.empty() || path[0] != '/' || absl::StrContains(path, "/../") ||
          absl::EndsWith(path, "/..")) {
        return Malformed(absl::StrCat("sandbox.cgroup_path \"", Echo(path),
                                      "\" must be an absolute path"));
      }
      struct statfs fs {};
      if (::statfs(path.c_str(), &fs) != 0 || fs.f_type != kCgroup2Magic) {
        return Malformed(absl::StrCat("sandbox.cgroup_path \"", Echo(path),
                                      "\" is not a cgroup v2 directory"));
      }
      absl::StatusOr<Cgroup> cg = Cgroup::Open(path);
      if (!cg.ok()) {
        return Malformed(absl::StrCat("sandbox.cgroup_path \"", Echo(path),
                                      "\": ", cg.status().message()));
      }
      {
        absl::MutexLock lock(&mu_);
        auto owner = owner_of_.find(cg->id());
        if (owner != owner_of_.end()) borrowed_from = owner->second;
      }
      existing = *std::move(cg);
      break;
    }
    case v1::SandboxSpec::kCreate:
      if (!req.sandbox().create()) {
        return Malformed("sandbox: set cgroup_path, or create = true");
      }
      break;
    default:
      return Malformed("sandbox: set cgroup_path, or create = true");
  }
  if (!borrowed_from.empty() && !req.borrowed()) {
    return Rejected(absl::StrCat(
        "sandbox ", existing->path(), " is part of open rollout \"",
        borrowed_from,
        "\"; another rollout may use it only as borrowed (borrowed = true) "
        "with inherit phases"));
  }

  // 3. Compile: every refusal comes back here, before anything is created
  // or attached.
  absl::StatusOr<CompiledPolicy> compiled =
      CompileForRequest(*policy_set, req, options_.resolvers);
  if (!compiled.ok()) return compiled.status();
  if (compiled->phases.empty()) return Malformed("the policy set has no phase");
  const std::string phase_name = req.initial_phase().empty()
                                     ? compiled->phases.front().name
                                     : req.initial_phase();
  const CompiledPhase* phase = compiled->FindPhase(phase_name);
  if (phase == nullptr) {
    return Malformed(absl::StrCat("initial_phase \"", Echo(phase_name),
                                  "\" is not a phase of the policy set (",
                                  PhaseNames(*compiled), ")"));
  }
  r->policy = *std::move(compiled);
  phase = r->policy.FindPhase(phase_name);

  // The process guard: the initial phase's mode, for the whole rollout.
  // Loaded (or refused: lsm where it cannot run) before anything is
  // created or attached. A borrowing rollout attaches nothing: the
  // owner's guard governs the sandbox.
  const GuardMode guard_mode = GuardModeFromPolicy(phase->guard);
  std::string owner_guard;
  if (borrowed_from.empty()) {
    if (guard_mode != GuardMode::kOff) {
      absl::MutexLock lock(&guard_mu_);
      absl::StatusOr<GuardController*> guard = GuardFor(guard_mode);
      if (!guard.ok()) {
        return WithContext(guard.status(),
                           absl::StrCat("phase \"", phase->name, "\""));
      }
    }
  } else {
    absl::MutexLock lock(&mu_);
    auto it = guard_of_.find(existing->id());
    if (it != guard_of_.end()) owner_guard = it->second;
  }

  // 4. The sandbox cgroup.
  bool created = false;
  if (existing) {
    r->cgroup = *std::move(existing);
  } else {
    // The parent is shared with `sandfence run`, which removes it when it
    // is left empty: make sure it is there.
    if (::mkdir(cgroup_parent_.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("create ", cgroup_parent_));
    }
    absl::StatusOr<Cgroup> cg =
        Cgroup::Create(absl::StrCat(cgroup_parent_, "/", id));
    if (!cg.ok()) {
      if (absl::IsAlreadyExists(cg.status()) ||
          absl::StrContains(cg.status().message(), "File exists")) {
        return Rejected(absl::StrCat("sandbox cgroup ", cgroup_parent_, "/", id,
                                     " already exists"));
      }
      return cg.status();
    }
    r->cgroup = *std::move(cg);
    created = true;
  }
  const uint64_t cgroup_id = r->cgroup->id();

  // 5. The record, then the kernel (see records/recorder.h for the order).
  const std::string journal =
      absl::StrCat(options_.records_dir, "/", id, ".record");
  RolloutInfo info;
  info.rollout_id = id;
  info.cgroup_path = r->cgroup->path();
  info.cgroup_id = cgroup_id;
  RecorderOptions ropt;
  EgressController* controller = controller_.get();
  const bool attach = borrowed_from.empty();
  if (attach) {
    ropt.counters = [controller, cgroup_id] {
      return controller->Counters(cgroup_id);
    };
    absl::StatusOr<std::shared_ptr<RolloutRecorder>> rec =
        router_.Open(journal, info, r->policy, ropt);
    if (!rec.ok()) return rec.status();
    r->recorder = *std::move(rec);
    r->routed = true;
  } else {
    absl::StatusOr<std::unique_ptr<RolloutRecorder>> rec =
        RolloutRecorder::Create(journal, info, r->policy, router_.clock(),
                                ropt);
    if (!rec.ok()) return rec.status();
    r->recorder = *std::move(rec);
  }
  auto undo_record = [&] {
    if (r->routed) {
      router_.Close(cgroup_id, {}).IgnoreError();
    } else {
      r->recorder->Finalize({}).IgnoreError();
    }
    r->recorder.reset();
    r->routed = false;
    ::unlink(journal.c_str());
  };
  if (absl::Status s = r->recorder->BeginPhase(phase->name); !s.ok()) {
    undo_record();
    return s;
  }
  uint32_t generation = 0;
  if (attach) {
    if (absl::Status s =
            controller_->AddSandbox(r->cgroup->fd(), cgroup_id, *phase);
        !s.ok()) {
      undo_record();
      if (absl::IsAlreadyExists(s)) {
        return Rejected(absl::StrCat("sandbox ", r->cgroup->path(),
                                     " is already enforced by sandfence"));
      }
      return s;
    }
    r->attached = true;
    if (absl::StatusOr<uint32_t> g = controller_->Generation(cgroup_id);
        g.ok()) {
      generation = *g;
      r->recorder->BindGeneration(generation);
    }
    absl::StatusOr<std::string> enforcer =
        Guard(r, r->cgroup->path(), cgroup_id, guard_mode);
    if (!enforcer.ok()) {
      controller_->RemoveSandbox(cgroup_id).IgnoreError();
      r->attached = false;
      undo_record();
      return WithContext(enforcer.status(), "process guard");
    }
    r->guard_text = GuardEnforcementText(*enforcer, guard_mode, r->policy);
  } else {
    r->guard_text = absl::StrCat(
        owner_guard.empty() ? "not reported" : owner_guard,
        " (the guard of rollout \"", borrowed_from,
        "\", which owns the sandbox)");
  }
  r->recorder->SetGuardEnforcement(r->guard_text);

  // 6. What a later daemon needs to adopt it.
  v1::StartRolloutResponse* resp = r->state.mutable_response();
  resp->set_rollout_id(id);
  resp->set_cgroup_path(r->cgroup->path());
  resp->set_cgroup_id(cgroup_id);
  resp->set_phase(phase->name);
  for (const CompiledPhase& p : r->policy.phases) {
    *resp->add_phase_policy() = ToPhasePolicy(p);
  }
  resp->set_policy_name(r->policy.name);
  resp->set_policy_hash(r->policy.content_hash);
  resp->set_record_path(FinalRecordPath(id));
  resp->set_borrowed_from(borrowed_from);
  resp->set_generation(generation);
  *r->state.mutable_request() = req;
  r->state.set_phase(phase->name);
  r->state.set_created_cgroup(created);
  *r->state.mutable_start_time() = UnixNsToTimestamp(NowUnixNs());
  r->state.add_journal_path(journal);
  if (absl::Status s = Persist(*r); !s.ok()) {
    // Without its state file a crash would leave the rollout enforced but
    // unadoptable: refuse now instead, retryably.
    Unguard(r);
    if (attach) controller_->RemoveSandbox(cgroup_id).IgnoreError();
    r->attached = false;
    undo_record();
    return Unavailable(
        absl::StrCat("persist the rollout state: ", s.message()));
  }
  return absl::OkStatus();
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
  if (!r->started || !r->start_status.ok() || r->ended) {
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  const CompiledPhase* phase = r->policy.FindPhase(phase_name);
  if (phase == nullptr) {
    return Malformed(absl::StrCat("phase \"", Echo(phase_name),
                                  "\" is not a phase of rollout \"", rollout_id,
                                  "\" (", PhaseNames(r->policy), ")"));
  }
  v1::SetPhaseResponse out;
  out.set_previous_phase(r->state.phase());
  out.set_phase(phase->name);
  if (phase->name == r->state.phase()) {
    // A retried switch (or a framework that says where it is): no new
    // generation, no new span.
    if (r->attached) {
      if (absl::StatusOr<uint32_t> g = controller_->Generation(r->cgroup_id());
          g.ok()) {
        out.set_generation(*g);
      }
    }
    return out;
  }
  if (absl::Status s = r->recorder->BeginPhase(phase->name); !s.ok()) return s;
  if (r->attached) {
    if (absl::Status s = controller_->SwitchPhase(r->cgroup_id(), *phase);
        !s.ok()) {
      return WithContext(s, absl::StrCat("switch to phase ", phase->name));
    }
    absl::StatusOr<uint32_t> g = controller_->Generation(r->cgroup_id());
    if (g.ok()) {
      r->recorder->BindGeneration(*g);
      out.set_generation(*g);
    }
  }
  r->state.set_phase(phase->name);
  if (absl::Status s = Persist(*r); !s.ok()) {
    LogWarning("rollout %s: persist state: %s", rollout_id, s.ToString());
  }
  ++switches_;
  LogInfo("rollout %s: phase %s -> %s (generation %d)", rollout_id,
          out.previous_phase(), out.phase(), out.generation());
  return out;
}

absl::StatusOr<v1::RolloutRecord> RolloutManager::MergedRecord(
    const Rollout& r) {
  std::vector<v1::RolloutRecord> segments;
  for (const std::string& path : r.state.journal_path()) {
    absl::StatusOr<v1::RolloutRecord> rec = ReadRecordFile(path);
    if (!rec.ok()) return rec.status();
    segments.push_back(*std::move(rec));
  }
  if (segments.empty()) return absl::InternalError("no journal");
  v1::RolloutRecord merged = segments.front();
  if (segments.size() == 1) return merged;
  // Journal k>0 continues where journal k-1 stopped when its daemon died.
  merged.clear_warning();
  for (size_t k = 0; k < segments.size(); ++k) {
    const v1::RolloutRecord& seg = segments[k];
    if (k > 0) {
      const uint32_t offset = static_cast<uint32_t>(merged.timeline_size());
      for (const v1::PhaseSpan& span : seg.timeline()) {
        *merged.add_timeline() = span;
      }
      for (v1::NetAttempt a : seg.net_attempt()) {
        a.set_phase_index(a.phase_index() + offset);
        *merged.add_net_attempt() = std::move(a);
      }
      for (v1::GuardEntry g : seg.guard_event()) {
        g.set_phase_index(g.phase_index() + offset);
        *merged.add_guard_event() = std::move(g);
      }
      v1::LossAccounting* loss = merged.mutable_loss();
      const v1::LossAccounting& l = seg.loss();
      // The kernel counters outlive the daemon: the last journal's are the
      // rollout's. The reader-side counts add up.
      loss->set_kernel_counters_read(l.kernel_counters_read());
      loss->set_kernel_allowed(l.kernel_allowed());
      loss->set_kernel_denied(l.kernel_denied());
      loss->set_kernel_allowed_unreported(l.kernel_allowed_unreported());
      loss->set_kernel_events_lost(l.kernel_events_lost());
      loss->set_events_recorded(loss->events_recorded() + l.events_recorded());
      loss->set_reader_dropped(loss->reader_dropped() + l.reader_dropped());
      loss->set_decode_errors(loss->decode_errors() + l.decode_errors());
      loss->set_unrouted_events(loss->unrouted_events() + l.unrouted_events());
      loss->set_overflowed(loss->overflowed() + l.overflowed());
      *merged.mutable_end_time() = seg.end_time();
      merged.set_complete(seg.complete());
      const std::string& guard_before = segments[k - 1].enforcement().guard();
      const std::string& guard_after = seg.enforcement().guard();
      if (guard_after != guard_before) {
        merged.mutable_enforcement()->set_guard(absl::StrCat(
            merged.enforcement().guard(), "; from journal ", k + 1, ": ",
            guard_after));
      }
      const std::string& prev = r.state.journal_path(static_cast<int>(k - 1));
      std::optional<int64_t> stopped = MtimeNs(prev);
      const int64_t adopted =
          static_cast<int>(k - 1) < r.state.adopted_time_size()
              ? TimestampToUnixNs(r.state.adopted_time(static_cast<int>(k - 1)))
              : 0;
      merged.add_warning(absl::StrCat(
          "daemon gap: the daemon writing ", prev, " stopped",
          stopped ? absl::StrCat(" after its last write at ",
                                 FormatUnixNs(*stopped))
                  : "",
          " and a new daemon adopted the rollout at ", FormatUnixNs(adopted),
          "; egress enforcement continued unchanged (pinned programs)",
          GuardEnforced(segments[k - 1].enforcement().guard())
              ? ", the process guard (not pinned) did not enforce in the gap"
              : "",
          ", events read and not yet written by the old daemon are missing, "
          "and the record continues in ",
          r.state.journal_path(static_cast<int>(k))));
    }
    for (const std::string& w : seg.warning()) {
      // A journal cut short by a dead daemon is the gap itself, said above;
      // the balance is recomputed over all journals below.
      if (k + 1 < segments.size() &&
          (absl::StrContains(w, "not finalized") ||
           absl::StrContains(w, "trailer") || absl::StrContains(w, "cut"))) {
        continue;
      }
      if (absl::StrContains(w, "balance")) continue;
      merged.add_warning(absl::StrCat("journal ", k + 1, ": ", w));
    }
  }
  EvaluateLoss(&merged);
  merged.set_lossy(true);  // a gap is never proven whole
  return merged;
}

absl::StatusOr<v1::EndRolloutResponse> RolloutManager::End(
    const std::string& rollout_id) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  std::shared_ptr<Rollout> r = Find(rollout_id);
  if (r == nullptr) {
    // A retried EndRollout (its answer was lost) gets the record again.
    absl::StatusOr<std::string> bytes = ReadFile(FinalRecordPath(rollout_id));
    v1::EndRolloutResponse again;
    if (bytes.ok() && again.mutable_record()->ParseFromString(*bytes)) {
      again.set_record_path(FinalRecordPath(rollout_id));
      return again;
    }
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  absl::MutexLock rl(&r->mu);
  if (!r->started || !r->start_status.ok() || r->ended) {
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  const uint64_t id = r->cgroup_id();
  // Processes of a created sandbox die before the hooks come off: nothing
  // in it ever runs unenforced.
  absl::Status removed;
  if (r->cgroup && r->cgroup->owned()) removed = r->cgroup->Remove();
  uint64_t decode_errors = 0;
  {
    absl::MutexLock lock(&reader_mu_);
    reader_->Drain().IgnoreError();
    decode_errors = reader_->decode_errors();
  }
  // The guard's events reach the record, then it lets the sandbox go (as
  // the egress hooks below: after its processes are gone).
  Unguard(r.get());
  FinalCounts counts;
  counts.decode_errors = decode_errors;
  if (r->attached) {
    absl::StatusOr<SandboxCounters> c = controller_->RemoveSandbox(id);
    if (c.ok()) counts.kernel = *c;
    r->attached = false;
  } else {
    counts.kernel = SandboxCounters{};  // nothing attached, nothing counted
  }
  absl::StatusOr<RecordOutcome> outcome =
      r->routed ? router_.Close(id, counts) : r->recorder->Finalize(counts);
  r->ended = true;
  ::unlink(StatePath(rollout_id).c_str());
  {
    absl::MutexLock lock(&mu_);
    rollouts_.erase(rollout_id);
    auto owner = owner_of_.find(id);
    if (owner != owner_of_.end() && owner->second == rollout_id) {
      owner_of_.erase(owner);
      guard_of_.erase(id);
    }
  }
  ++ended_;
  if (!outcome.ok()) return outcome.status();
  absl::StatusOr<v1::RolloutRecord> record = MergedRecord(*r);
  if (!record.ok()) return record.status();
  v1::EndRolloutResponse out;
  *out.mutable_record() = *record;
  for (const std::string& p : r->state.journal_path()) out.add_journal_path(p);
  out.set_record_path(FinalRecordPath(rollout_id));
  if (absl::Status s =
          WriteFileAtomic(out.record_path(), record->SerializeAsString());
      !s.ok()) {
    LogError("rollout %s: write record: %s", rollout_id, s.ToString());
  }
  if (!removed.ok()) {
    LogWarning("rollout %s: remove sandbox: %s", rollout_id,
               removed.ToString());
  }
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
    if (r->started && r->start_status.ok() && !r->ended) {
      absl::StatusOr<v1::RolloutRecord> rec = MergedRecord(*r);
      if (!rec.ok()) return rec.status();
      *out.mutable_record() = *rec;
      out.set_open(true);
      return out;
    }
  }
  absl::StatusOr<std::string> bytes = ReadFile(FinalRecordPath(rollout_id));
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

v1::ListRolloutsResponse RolloutManager::List() {
  std::vector<std::shared_ptr<Rollout>> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, r] : rollouts_) all.push_back(r);
  }
  v1::ListRolloutsResponse out;
  for (const auto& r : all) {
    absl::MutexLock rl(&r->mu);
    if (!r->started || !r->start_status.ok() || r->ended) continue;
    v1::RolloutSummary* s = out.add_rollout();
    s->set_rollout_id(r->state.request().rollout_id());
    s->set_cgroup_path(r->state.response().cgroup_path());
    s->set_cgroup_id(r->cgroup_id());
    s->set_phase(r->state.phase());
    *s->mutable_start_time() = r->state.start_time();
    s->set_borrowed_from(r->state.response().borrowed_from());
    s->set_adopted(r->adopted);
    if (r->attached) {
      if (absl::StatusOr<SandboxCounters> c =
              controller_->Counters(r->cgroup_id());
          c.ok()) {
        s->set_allowed(c->allowed);
        s->set_denied(c->denied);
      }
      if (absl::StatusOr<uint32_t> g = controller_->Generation(r->cgroup_id());
          g.ok()) {
        s->set_generation(*g);
      }
    }
  }
  std::sort(out.mutable_rollout()->begin(), out.mutable_rollout()->end(),
            [](const v1::RolloutSummary& a, const v1::RolloutSummary& b) {
              return a.rollout_id() < b.rollout_id();
            });
  return out;
}

ManagerMetrics RolloutManager::Metrics() {
  ManagerMetrics m;
  std::vector<uint64_t> ids;
  {
    absl::MutexLock lock(&mu_);
    m.rollouts_open = rollouts_.size();
    for (const auto& [cgroup_id, owner] : owner_of_) ids.push_back(cgroup_id);
  }
  for (uint64_t id : ids) {
    if (absl::StatusOr<SandboxCounters> c = controller_->Counters(id); c.ok()) {
      m.events_lost += c->events_lost;
    }
  }
  m.rollouts_started = started_;
  m.rollouts_ended = ended_;
  m.rollouts_adopted = adopted_;
  m.decisions_allowed = allowed_;
  m.decisions_denied = denied_;
  m.phase_switches = switches_;
  m.refusals = refusals_;
  {
    absl::MutexLock lock(&reader_mu_);
    m.decode_errors = reader_->decode_errors();
  }
  return m;
}

v1::HealthResponse RolloutManager::Health() {
  v1::HealthResponse h;
  h.set_version(SANDFENCE_VERSION);
  h.set_libbpf_version(
      absl::StrCat(libbpf_major_version(), ".", libbpf_minor_version()));
  utsname u{};
  if (::uname(&u) == 0) h.set_kernel_release(u.release);
  h.set_egress("cgroup-bpf");
  // What the daemon's process guard runs; before the first guarded
  // rollout loads it, what it would use (probed once: it loads and
  // attaches a program).
  std::string guard;
  {
    absl::MutexLock lock(&guard_mu_);
    if (guard_) {
      guard = std::string(guard_->enforcer_name());
      if (!guard_->fallback_reason().empty()) {
        absl::StrAppend(&guard, " (lsm unavailable: ",
                        guard_->fallback_reason(), ")");
      }
    }
  }
  if (guard.empty()) {
    static const std::string probed = [] {
      absl::Status lsm = ProbeBpfLsm();
      return lsm.ok() ? std::string("lsm")
                      : absl::StrCat("signal (lsm unavailable: ",
                                     lsm.message(), ")");
    }();
    guard = absl::StrCat(probed, "; loaded by the first guarded rollout");
  }
  h.set_guard(guard);
  if (absl::StartsWith(guard, "lsm")) h.add_kernel_feature("bpf_lsm");
  h.set_pin_dir(controller_->pin_dir());
  {
    absl::MutexLock lock(&mu_);
    h.set_open_rollouts(static_cast<uint32_t>(rollouts_.size()));
    uint32_t adopted = 0;
    for (const auto& [id, r] : rollouts_) adopted += r->adopted ? 1 : 0;
    h.set_adopted_rollouts(adopted);
  }
  h.add_kernel_feature("cgroup_sock_addr");
  h.add_kernel_feature("cgroup_skb");
  h.add_kernel_feature("ringbuf");
  if (!controller_->pin_dir().empty()) h.add_kernel_feature("bpffs_pinning");
  return h;
}

absl::StatusOr<uint64_t> RolloutManager::Watch(const std::string& rollout_id,
                                               EventSink sink) {
  if (absl::Status s = ValidateRolloutId(rollout_id); !s.ok()) return s;
  std::shared_ptr<Rollout> r = Find(rollout_id);
  if (r == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no open rollout \"", rollout_id, "\""));
  }
  uint64_t cgroup_id;
  {
    absl::MutexLock rl(&r->mu);
    if (!r->started || !r->start_status.ok() || r->ended) {
      return absl::NotFoundError(
          absl::StrCat("no open rollout \"", rollout_id, "\""));
    }
    cgroup_id = r->cgroup_id();
  }
  absl::MutexLock lock(&watch_mu_);
  const uint64_t id = next_watch_id_++;
  watchers_[cgroup_id].push_back(Watcher{id, rollout_id, std::move(sink)});
  return id;
}

bool RolloutManager::IsOpen(const std::string& rollout_id) {
  std::shared_ptr<Rollout> r = Find(rollout_id);
  if (r == nullptr) return false;
  absl::MutexLock rl(&r->mu);
  return r->started && r->start_status.ok() && !r->ended;
}

void RolloutManager::Unwatch(uint64_t watch_id) {
  absl::MutexLock lock(&watch_mu_);
  for (auto& [cg, list] : watchers_) {
    list.erase(
        std::remove_if(list.begin(), list.end(),
                       [&](const Watcher& w) { return w.id == watch_id; }),
        list.end());
  }
}

std::vector<std::string> RolloutManager::AdoptAndStart() {
  std::vector<std::string> adopted;
  std::vector<std::string> files;
  if (DIR* d = ::opendir(options_.state_dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (absl::EndsWith(e->d_name, ".state")) {
        files.push_back(absl::StrCat(options_.state_dir, "/", e->d_name));
      }
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  if (options_.pin_dir.empty() && !files.empty()) {
    // Nothing was pinned: those rollouts ended with their daemon.
    LogWarning("not pinning: dropping %d rollout states of an earlier daemon",
               files.size());
    for (const std::string& f : files) ::unlink(f.c_str());
    files.clear();
  }
  for (const std::string& f : files) {
    absl::StatusOr<std::string> bytes = ReadFile(f);
    v1::RolloutState state;
    if (!bytes.ok() || !state.ParseFromString(*bytes)) {
      LogError(
          "cannot read rollout state %s; its sandbox stays enforced "
          "(sandfence daemon --cleanup removes it)",
          f);
      continue;
    }
    const std::string id = state.request().rollout_id();
    if (absl::Status s = Adopt(std::move(state)); !s.ok()) {
      LogError("cannot adopt rollout %s: %s; its sandbox stays enforced", id,
               s.ToString());
      continue;
    }
    ++adopted_;
    adopted.push_back(id);
    LogInfo("adopted rollout %s", id);
  }
  // Pinned sandboxes that no state file names (a daemon that died between
  // attaching and persisting): leave them enforced, and say so.
  for (uint64_t cg : controller_->PinnedSandboxes()) {
    absl::MutexLock lock(&mu_);
    if (!owner_of_.contains(cg)) {
      LogWarning(
          "cgroup %d is enforced by pinned programs but belongs to no "
          "rollout; sandfence daemon --cleanup removes it",
          cg);
    }
  }
  reader_thread_ = std::thread([this] { ReaderLoop(); });
  return adopted;
}

absl::Status RolloutManager::Adopt(v1::RolloutState state) {
  const v1::StartRolloutRequest& req = state.request();
  const std::string id = req.rollout_id();
  if (absl::Status s = ValidateRolloutId(id); !s.ok()) return s;
  auto r = std::make_shared<Rollout>();
  r->request_bytes = Deterministic(req);
  // The same compile as at the start: the phases' rules to switch to.
  // (A name that resolves differently now is a known limit: see
  // docs/daemon.md.)
  absl::StatusOr<v1::PolicySet> policy_set;
  switch (req.policy_case()) {
    case v1::StartRolloutRequest::kPolicySet:
      policy_set = req.policy_set();
      break;
    case v1::StartRolloutRequest::kPolicyText:
      policy_set = ParsePolicySetText(req.policy_text(), "<policy_text>");
      break;
    case v1::StartRolloutRequest::kPolicyFile:
      policy_set = LoadPolicySetFile(
          absl::StrCat(options_.policy_dir, "/", req.policy_file()));
      break;
    case v1::StartRolloutRequest::kNetworkAccess:
      policy_set = InlinePolicySet(req.network_access());
      break;
    default:
      return Malformed("state has no policy");
  }
  if (!policy_set.ok()) return policy_set.status();
  absl::StatusOr<CompiledPolicy> compiled =
      CompileForRequest(*policy_set, req, options_.resolvers);
  if (!compiled.ok()) return compiled.status();
  r->policy = *std::move(compiled);

  const uint64_t cgroup_id = state.response().cgroup_id();
  const bool attach = state.response().borrowed_from().empty();
  absl::StatusOr<Cgroup> cg =
      state.created_cgroup() ? Cgroup::Adopt(state.response().cgroup_path())
                             : Cgroup::Open(state.response().cgroup_path());
  if (cg.ok() && cg->id() != cgroup_id) {
    cg->Release();
    cg = absl::NotFoundError("the cgroup was replaced");
  }
  uint32_t generation = 0;
  if (attach) {
    absl::StatusOr<uint32_t> g = controller_->AdoptSandbox(cgroup_id);
    if (!g.ok()) return g.status();
    generation = *g;
    r->attached = true;
  }
  if (cg.ok()) r->cgroup = *std::move(cg);

  const std::string journal = absl::StrCat(
      options_.records_dir, "/", id, ".", state.journal_path_size(), ".record");
  RolloutInfo info;
  info.rollout_id = id;
  info.cgroup_path = state.response().cgroup_path();
  info.cgroup_id = cgroup_id;
  RecorderOptions ropt;
  ropt.overwrite = true;
  if (attach) {
    EgressController* controller = controller_.get();
    ropt.counters = [controller, cgroup_id] {
      return controller->Counters(cgroup_id);
    };
    absl::StatusOr<std::shared_ptr<RolloutRecorder>> rec =
        router_.Open(journal, info, r->policy, ropt);
    if (!rec.ok()) return rec.status();
    r->recorder = *std::move(rec);
    r->routed = true;
  } else {
    absl::StatusOr<std::unique_ptr<RolloutRecorder>> rec =
        RolloutRecorder::Create(journal, info, r->policy, router_.clock(),
                                ropt);
    if (!rec.ok()) return rec.status();
    r->recorder = *std::move(rec);
  }
  r->recorder->BeginPhase(state.phase()).IgnoreError();
  if (attach) r->recorder->BindGeneration(generation);
  // The guard's programs died with the old daemon (they are not pinned):
  // the sandbox is guarded again from here on, by the initial phase's mode.
  if (attach) {
    const CompiledPhase* initial =
        r->policy.FindPhase(state.response().phase());
    if (initial == nullptr) initial = r->policy.FindPhase(state.phase());
    const GuardMode mode = initial != nullptr
                               ? GuardModeFromPolicy(initial->guard)
                               : GuardMode::kAuto;
    absl::StatusOr<std::string> enforcer =
        Guard(r.get(), state.response().cgroup_path(), cgroup_id, mode);
    if (enforcer.ok()) {
      r->guard_text = GuardEnforcementText(*enforcer, mode, r->policy);
    } else {
      LogError("rollout %s: process guard not re-added: %s", id,
               enforcer.status().ToString());
      r->guard_text = absl::StrCat(
          "off (not re-added after the daemon restart: ",
          enforcer.status().message(), ")");
    }
  } else {
    r->guard_text = absl::StrCat(
        "not reported (the guard of rollout \"",
        state.response().borrowed_from(), "\", which owns the sandbox)");
  }
  r->recorder->SetGuardEnforcement(r->guard_text);
  state.add_journal_path(journal);
  *state.add_adopted_time() = UnixNsToTimestamp(NowUnixNs());
  state.mutable_response()->set_generation(generation);
  r->state = std::move(state);
  r->started = true;
  r->adopted = true;
  if (absl::Status s = Persist(*r); !s.ok()) {
    LogWarning("rollout %s: persist state: %s", id, s.ToString());
  }
  absl::MutexLock lock(&mu_);
  if (r->attached) {
    owner_of_[cgroup_id] = id;
    guard_of_[cgroup_id] = r->guard_text;
  }
  rollouts_.emplace(id, std::move(r));
  return absl::OkStatus();
}

absl::Status RolloutManager::Cleanup(const ManagerOptions& options) {
  // Never from under a running daemon.
  const std::string lock_path = absl::StrCat(options.state_dir, "/.lock");
  UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CLOEXEC));
  if (lock && ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    return Unavailable(absl::StrCat("a sandfence daemon is running on ",
                                    options.state_dir, "; stop it first"));
  }
  absl::Status first;
  std::vector<std::string> cgroups;
  if (DIR* d = ::opendir(options.state_dir.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    ::closedir(d);
    for (const std::string& n : names) {
      const std::string path = absl::StrCat(options.state_dir, "/", n);
      absl::StatusOr<std::string> bytes = ReadFile(path);
      v1::RolloutState state;
      if (bytes.ok() && state.ParseFromString(*bytes) &&
          state.created_cgroup()) {
        cgroups.push_back(state.response().cgroup_path());
      }
      ::unlink(path.c_str());
    }
  }
  // Created sandboxes: their processes die and the cgroups go, as at
  // EndRollout, before the pins (and with them enforcement) go.
  for (const std::string& path : cgroups) {
    absl::StatusOr<Cgroup> cg = Cgroup::Adopt(path);
    if (cg.ok()) first.Update(cg->Remove());
  }
  if (!options.pin_dir.empty()) {
    first.Update(EgressController::RemovePins(options.pin_dir));
  }
  return first;
}

}  // namespace sandfence
