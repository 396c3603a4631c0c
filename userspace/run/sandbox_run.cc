#include "run/sandbox_run.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <tuple>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "compile/compiler.h"
#include "egress/spawn.h"
#include "guard/guard_record.h"
#include "sandbox/kernel_enforcement.h"
#include "sandbox/netns.h"
#include "sandbox/reaper.h"
#include "confine/landlock.h"
#include "confine/seccomp_filter.h"
#include "common/json.h"
#include "confine/socket_supervisor.h"
#include "sandbox/sandbox.h"
#include "sandbox/socket_attempts.h"

namespace sandfence {
namespace {

// What the command's init detaches, deepest first: the special file
// systems (DefaultNoWriteFsTypes) mounted outside /proc and /sys, and every
// bpffs (sandfence's pins: nothing in a sandbox needs to see them, and
// Landlock has no right for chmod or chown). An unreadable mount table
// detaches nothing (the confinement then fences them off).
std::vector<std::string> SpecialMountsToDetach() {
  std::vector<std::string> out;
  absl::StatusOr<std::vector<confine::MountEntry>> mounts =
      confine::ReadMountInfo();
  if (!mounts.ok()) return out;
  for (std::string& m :
       confine::MountPointsOfTypes(*mounts, DefaultNoWriteFsTypes())) {
    if (m == "/proc" || m == "/sys" || absl::StartsWith(m, "/proc/") ||
        absl::StartsWith(m, "/sys/")) {
      continue;
    }
    out.push_back(std::move(m));
  }
  for (std::string& m : confine::MountPointsOfTypes(*mounts, {"bpf"})) {
    if (std::find(out.begin(), out.end(), m) == out.end()) {
      out.push_back(std::move(m));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) {
              return a.size() > b.size();
            });
  return out;
}

std::string Destination(const NetEvent& e) {
  if (e.is_unix()) return e.unix_name->ToString();
  if (e.hook == SF_HOOK_SOCK_CREATE) {
    return e.sock_type == 3 ? "raw socket"
                            : absl::StrCat("socket protocol ", e.protocol);
  }
  if (e.hook == SF_HOOK_SOCKET) return "socket creation";
  if (e.hook == SF_HOOK_IO_URING_SETUP) return "io_uring_setup";
  return HostPort{e.addr, e.port}.ToString();
}

// Folds events into what the summary shows.
class SummaryBuilder {
 public:
  void Add(const NetEvent& e) {
    const std::string proto =
        e.hook == SF_HOOK_SOCK_CREATE ? "socket" : AttemptProtocol(e);
    const std::string dest = Destination(e);
    if (!e.denied() && !e.would_deny()) {
      allowed_.emplace(absl::StrCat(proto, " ", dest));
      return;
    }
    DeniedDestination& d =
        (e.would_deny() ? would_deny_ : denied_)[{proto, dest}];
    if (d.count++ == 0) {
      d.protocol = proto;
      d.destination = dest;
      d.first_pid = e.tgid;
      d.first_comm = e.comm;
    }
  }

  void Finish(RunSummary* out) const {
    auto by_count = [](const DeniedDestination& a, const DeniedDestination& b) {
      return a.count > b.count;
    };
    for (const auto& [key, d] : denied_) out->denied.push_back(d);
    std::stable_sort(out->denied.begin(), out->denied.end(), by_count);
    for (const auto& [key, d] : would_deny_) out->would_deny.push_back(d);
    std::stable_sort(out->would_deny.begin(), out->would_deny.end(), by_count);
    out->allowed.assign(allowed_.begin(), allowed_.end());
  }

 private:
  std::map<std::pair<std::string, std::string>, DeniedDestination> denied_,
      would_deny_;
  std::set<std::string> allowed_;
};

// Blocks the signals we forward, for the life of the run, and restores the
// mask after.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set_, s);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~BlockedSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  const sigset_t& set() const { return set_; }

 private:
  sigset_t set_, old_;
};

}  // namespace

absl::StatusOr<RunSummary> RunInSandbox(const RunRequest& request) {
  if (::geteuid() != 0) {
    return absl::PermissionDeniedError(
        "sandfence run needs root: it loads BPF programs and creates "
        "cgroups (run it with sudo)");
  }
  // Signals wait from the start: loading the programs takes a moment, and
  // a SIGTERM then must unwind (remove what exists) rather than kill us.
  BlockedSignals blocked;
  UniqueFd sigfd(::signalfd(-1, &blocked.set(), SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd) return ErrnoError(errno, "signalfd");
  if (request.record_path.empty() == false && request.policy == nullptr) {
    return absl::InvalidArgumentError("a record needs the compiled policy");
  }
  {
    CompiledPolicy running;
    running.name = request.policy ? request.policy->name : "inline";
    running.phases = {request.phase};
    if (absl::Status s =
            CheckAuditAllowed(running, request.allow_audit, "--allow-audit");
        !s.ok()) {
      return s;
    }
  }

  std::string parent = request.cgroup_parent;
  const bool default_parent = parent.empty();
  if (default_parent) {
    absl::StatusOr<std::string> mount = FindCgroup2Mount();
    if (!mount.ok()) return mount.status();
    parent = absl::StrCat(*mount, "/sandfence");
  }
  // The shared default parent goes when the last run using it ends (rmdir
  // fails, harmlessly, while another run or the daemon has a sandbox in it).
  // Declared before the sandbox, so it is removed after it.
  absl::Cleanup remove_parent = [&] {
    if (default_parent) ::rmdir(parent.c_str());
  };

  KernelEnforcementOptions options;
  options.host.pin_root = request.pin_root;
  options.host.kind = DriverKind::kRun;
  // The command's Unix paths go through this process's supervisor
  // (confine/unix_broker.h): no program on the host's system calls.
  options.egress.unix_bind_tracker = false;
  absl::StatusOr<std::unique_ptr<KernelEnforcement>> host =
      KernelEnforcement::Create(options);
  if (!host.ok()) return host.status();

  RunSummary summary;
  // What dead runs left behind dies before anything of ours starts.
  ReapReport reaped = ReapDeadRuns(**host);
  summary.reaped = reaped.reaped;
  summary.reap_errors = reaped.errors;

  // A private network namespace is made before the sandbox starts: its DNS
  // filter's listeners go there, and the command then joins it.
  UniqueFd netns;
  if (request.private_netns) {
    absl::StatusOr<UniqueFd> made = CreateNetns();
    if (!made.ok()) {
      return absl::Status(
          made.status().code(),
          absl::StrCat("the sandbox's private network namespace: ",
                       made.status().message()));
    }
    netns = *std::move(made);
  }

  auto make_spec = [&] {
    SandboxSpec spec;
    spec.own_netns = request.private_netns;
    spec.netns_fd = netns.get();
    spec.rollout_id = request.rollout_id.empty()
                          ? absl::StrCat("run-", ::getpid())
                          : request.rollout_id;
    spec.cgroup_path = absl::StrCat(parent, "/run-", ::getpid());
    spec.create_cgroup = true;
    if (request.policy != nullptr) {
      spec.policy = *request.policy;
    } else {
      spec.policy.name = "inline";
      spec.policy.phases.push_back(request.phase);
    }
    spec.initial_phase = request.phase.name;
    spec.guard_mode =
        request.guard_mode.value_or(GuardModeFromPolicy(request.phase.guard));
    spec.spawns = true;
    spec.record_path = request.record_path;
    spec.record_options.overwrite = true;
    spec.events = request.events;
    return spec;
  };
  absl::StatusOr<std::unique_ptr<Sandbox>> sandbox =
      Sandbox::Start(host->get(), make_spec());
  if (!sandbox.ok() && absl::IsNotFound(sandbox.status()) && default_parent) {
    // Another run removed the empty parent in the meantime: once more.
    sandbox = Sandbox::Start(host->get(), make_spec());
  }
  if (!sandbox.ok()) return sandbox.status();
  Sandbox& sb = **sandbox;

  summary.cgroup_path = sb.cgroup().path;
  summary.guard_enforcer = GuardLabel(sb.guard());
  summary.guard_fallback = sb.guard().fallback_reason;
  const int64_t mono_to_unix = MonotonicToUnixOffsetNs();
  SummaryBuilder builder;
  sb.AddListener(SandboxListener{
      [&](const NetEvent& e) {
        ++summary.events_read;
        builder.Add(e);
        if (request.on_event) request.on_event(e);
      },
      [&](const sf_guard_event& e) {
        v1::GuardEntry entry = GuardEntryFromEvent(e, mono_to_unix);
        summary.guard_events.push_back(
            {entry.action(), entry.what(), entry.detail(),
             entry.actor().tgid(), entry.actor().command(),
             entry.target().tgid(), entry.target().command()});
      }});

  // Ends the sandbox and fills the summary from what it reports.
  auto end = [&]() -> absl::Status {
    absl::StatusOr<SandboxEnd> ended = sb.End();
    if (!ended.ok()) return ended.status();
    summary.counters = ended->counters;
    summary.decode_errors =
        ended->hub.net_decode_errors + ended->hub.guard_decode_errors;
    summary.guard_events_lost = ended->guard_events_lost;
    summary.record = ended->record;
    builder.Finish(&summary);
    return ended->cleanup;
  };

  // A signal that came while we set up: the command never starts, and
  // the status is what being killed by that signal would have given.
  if (signalfd_siginfo early; ::read(sigfd.get(), &early, sizeof(early)) ==
                              static_cast<ssize_t>(sizeof(early))) {
    summary.exit_status = 128 + static_cast<int>(early.ssi_signo);
    summary.interrupted_before_start = true;
    if (absl::Status s = end(); !s.ok()) return s;
    return summary;
  }

  // Landlock + seccomp for the command, built before it starts: it is
  // never started without what the guard promised.
  std::optional<PreparedConfinement> confinement;
  std::vector<std::string> detach_mounts;
  std::vector<std::string> hide_paths;
  if (sb.guard().confined) {
    // The record file stays outside the plan: hiding one file would take
    // from the command every right directly in its directory (often /tmp).
    // A record that must be out of reach goes under sandfence's records
    // directory, which is.
    ConfinePlan plan = sb.ConfinementPlan(SandfenceOwnPaths(request.pin_root));
    // The command's init mounts a /proc of its own PID namespace after
    // the rules were planned: the command gets the rights /proc has.
    plan.fresh_mounts = {"/proc"};
    // Special file systems mounted elsewhere (a procfs under /tmp) are
    // detached in the command's mount namespace instead of fenced off.
    plan.detached_mounts = SpecialMountsToDetach();
    detach_mounts = plan.detached_mounts;
    // sandfence's own directories (the daemon's socket, state, records)
    // become empty read-only directories there: not even chmod, which
    // Landlock has no right for, or a connect to the socket reaches them.
    for (const std::string& own : SandfenceOwnPaths("")) {
      struct stat st {};
      if (::stat(own.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        hide_paths.push_back(own);
      }
    }
    absl::StatusOr<PreparedConfinement> prepared = PrepareConfinement(plan);
    if (!prepared.ok()) {
      end().IgnoreError();
      return absl::Status(prepared.status().code(),
                          absl::StrCat("process guard (landlock): ",
                                       prepared.status().message()));
    }
    confinement.emplace(*std::move(prepared));
    summary.guard_layers = DescribeConfinement(*confinement);
    sb.NoteConfinement(summary.guard_layers);
  }

  // Every process of the sandbox descends from the command: all connect
  // through the supervisor, all are in its Landlock domain.
  EgressController& egress = (*host)->egress();
  const bool broker =
      egress.unix_enforcer() == EgressController::UnixEnforcer::kCgroupHooks;
  UnixTraits traits;
  traits.broker = broker;
  traits.abstract_scoped =
      confinement &&
      (confinement->scoped() & confine::kScopeAbstractUnixSocket) != 0;
  if (absl::Status s = egress.SetUnixTraits(sb.cgroup().id, traits); !s.ok()) {
    end().IgnoreError();
    return s;
  }
  confine::UnixBrokerHooks broker_hooks{
      sb.cgroup().path,
      [&egress](uint64_t cookie, uint64_t pid_tgid) {
        return egress.AllowBrokeredConnect(cookie, pid_tgid);
      },
      [&egress](uint64_t cookie) { egress.ForgetBrokeredConnect(cookie); },
      ListedUnixPaths(sb.current_phase())};

  SpawnOptions spawn;
  spawn.cgroup_fd = (*host)->CgroupFd(sb.cgroup().id);
  spawn.confinement = confinement ? &*confinement : nullptr;
  spawn.detach_mounts = detach_mounts;
  spawn.hide_paths = hide_paths;
  spawn.argv = request.argv;
  spawn.uid = request.uid;
  spawn.gid = request.gid;
  spawn.netns_fd = netns.get();
  // Out of the command's reach: it cannot see, so cannot signal, this
  // process (whatever the guard does), and dies with it.
  spawn.pid_namespace = true;
  // Socket families no hook judges (vsock, packet, ...) and io_uring: this
  // loop answers them by the phase (sandbox/socket_attempts.h).
  const std::vector<sock_filter> socket_filter =
      confine::BuildSocketFamilyFilter();
  if (socket_filter.empty()) {
    end().IgnoreError();
    return absl::InternalError("the socket-family filter does not assemble");
  }
  UniqueFd socket_listener;
  spawn.socket_filter = &socket_filter;
  spawn.socket_listener = &socket_listener;
  absl::StatusOr<pid_t> child = SpawnInCgroup(spawn);
  if (!child.ok()) {
    end().IgnoreError();
    return child.status();
  }
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, *child, 0)));
  if (!pidfd) {
    const int err = errno;
    end().IgnoreError();
    return ErrnoError(err, "pidfd_open");
  }

  // The mount namespace the command started in (its own: run makes one):
  // there it can mount nothing.
  {
    struct stat mnt {};
    if (::stat(absl::StrCat("/proc/", *child, "/ns/mnt").c_str(), &mnt) ==
        0) {
      broker_hooks.home_mount_ns = mnt.st_ino;
    }
  }
  const confine::UnixBroker unix_broker(std::move(broker_hooks));
  confine::SocketSupervisor supervisor(std::move(socket_listener));
  auto answer_socket_call = [&]() -> absl::Status {
    const CompiledPhase& phase = sb.current_phase();
    const std::optional<sf_verdict> verdict = SocketFamilyVerdict(phase);
    // Paths are brokered where the phase enforces its Unix checks.
    const bool brokered = broker && verdict == SF_VERDICT_DENY &&
                          phase.unix_checked;
    absl::StatusOr<std::optional<confine::SocketAttempt>> a =
        supervisor.AnswerOne(verdict == SF_VERDICT_DENY,
                             brokered ? &unix_broker : nullptr,
                             phase.guard_allow_io_uring);
    if (!a.ok()) return a.status();
    if (*a && verdict) {
      const NetEvent e = SocketAttemptEvent(**a, *verdict, sb.cgroup().id,
                                            sb.generation());
      sb.AddSupervisedEvent(e);
      // No kernel counter holds these: the summary's counts add them.
      ++(e.denied() ? summary.supervised_denied : summary.supervised_allowed);
    }
    return absl::OkStatus();
  };

  // One loop: the command's exit, forwarded signals, events, and the
  // socket calls waiting for an answer.
  int signals_seen = 0;
  for (;;) {
    absl::StatusOr<int> polled = (*host)->PollEvents(0);
    if (!polled.ok()) {
      // The command is killed with its sandbox: nothing runs unrecorded.
      end().IgnoreError();
      return polled.status();
    }
    pollfd fds[3] = {{pidfd.get(), POLLIN, 0},
                     {sigfd.get(), POLLIN, 0},
                     {supervisor.fd(), POLLIN, 0}};
    int n = ::poll(fds, 3, 50);
    if (n < 0 && errno != EINTR) {
      const int err = errno;
      end().IgnoreError();
      return ErrnoError(err, "poll");
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      while (::read(sigfd.get(), &info, sizeof(info)) == sizeof(info)) {
        if (++signals_seen == 1) {
          ::kill(*child, static_cast<int>(info.ssi_signo));
        } else {
          ::kill(*child, SIGKILL);
        }
      }
    }
    if (fds[2].revents & POLLIN) {
      if (absl::Status s = answer_socket_call(); !s.ok()) {
        end().IgnoreError();
        return s;
      }
    }
    if (fds[0].revents & POLLIN) break;
    if (sb.recorder() != nullptr) sb.recorder()->Tick().IgnoreError();
  }
  absl::StatusOr<int> status = WaitForExit(*child);
  if (!status.ok()) {
    end().IgnoreError();
    return status.status();
  }
  summary.exit_status = *status;
  if (absl::Status s = end(); !s.ok()) return s;
  return summary;
}

std::string FormatRunBanner(const CompiledPhase& phase) {
  if (!phase.audit_only) return "";
  return absl::StrFormat(
      "sandfence: AUDIT ONLY: phase \"%s\" (enforce: AUDIT) denies nothing; "
      "what it would deny is let through and listed when the command ends\n",
      phase.name);
}

std::string FormatRunSummary(const RunSummary& s, const CompiledPhase& phase) {
  if (s.interrupted_before_start) {
    return absl::StrFormat(
        "sandfence: interrupted by signal %d before the command started; "
        "nothing ran, everything set up was removed\n",
        s.exit_status - 128);
  }
  std::string out;
  // First, so that no one reads an audit run as an enforced one.
  if (phase.audit_only) {
    absl::StrAppendFormat(
        &out,
        "sandfence: AUDIT ONLY (nothing denied): phase \"%s\" has enforce: "
        "AUDIT; %d %s would have been denied\n",
        phase.name, s.counters.audit_denied,
        s.counters.audit_denied == 1 ? "attempt" : "attempts");
  }
  absl::StrAppendFormat(
      &out,
      "sandfence: phase \"%s\" (%s), egress %s by cgroup BPF, "
      "process guard: %s\n"
      "sandfence: exit %d; %d allowed, %d denied%s\n",
      phase.name, absl::AsciiStrToLower(v1::NetworkAccess_Name(phase.access)),
      phase.audit_only ? "audited (not enforced)" : "enforced",
      s.guard_enforcer, s.exit_status,
      s.counters.allowed + s.supervised_allowed,
      s.counters.denied + s.supervised_denied,
      phase.audit_only
          ? absl::StrFormat(" (%d of the allowed would have been denied)",
                            s.counters.audit_denied)
          : "");
  if (phase.restricted() && phase.unix_unchecked) {
    absl::StrAppend(&out,
                    "sandfence: Unix sockets unchecked (unix { mode: "
                    "UNCHECKED }): every Unix socket the command can open is "
                    "reachable\n");
  }
  for (uint64_t id : s.reaped) {
    absl::StrAppendFormat(
        &out, "sandfence: ended the sandbox a dead run left (cgroup %d): "
              "its processes killed, its hooks and cgroup removed\n",
        id);
  }
  for (const std::string& e : s.reap_errors) {
    absl::StrAppend(&out, "sandfence: could not end a dead run's sandbox: ", e,
                    "\n");
  }
  if (!s.guard_fallback.empty()) {
    absl::StrAppend(&out, "sandfence: process guard ", s.guard_enforcer,
                    ", not lsm: ", s.guard_fallback, "\n");
  }
  // What Landlock + seccomp could not promise on this kernel, in one line
  // (what the policy chose to allow is not a gap; the record keeps all).
  std::vector<std::string> gaps;
  for (const ConfineGuarantee& g : s.guard_layers) {
    if (!g.holds && g.id != ConfineGuaranteeId::kNoPtraceInside &&
        g.id != ConfineGuaranteeId::kNoIoUring) {
      gaps.push_back(g.what);
    }
  }
  if (!gaps.empty()) {
    absl::StrAppend(&out, "sandfence: landlock+seccomp cannot hold here: ",
                    absl::StrJoin(gaps, "; "),
                    " (`sandfence check` says why)\n");
  }
  if (!s.guard_events.empty()) {
    // Folded by what was done by which command: `ps aux` audits three
    // files of every process, which would otherwise be hundreds of lines.
    // Stops (killed, denied) come first; the record keeps every event.
    struct Fold {
      const GuardSummaryLine* first;
      uint64_t count = 0;
    };
    std::map<std::tuple<bool, std::string, std::string, std::string,
                        std::string>,
             Fold>
        folds;
    for (const GuardSummaryLine& g : s.guard_events) {
      Fold& f = folds[{g.action == "audited", g.action, g.what, g.detail,
                       g.actor_comm}];
      if (f.count++ == 0) f.first = &g;
    }
    absl::StrAppend(&out, "sandfence: process guard:\n");
    for (const auto& [key, f] : folds) {
      const GuardSummaryLine& g = *f.first;
      absl::StrAppendFormat(
          &out, "  %-8s %-14s %-10s %6dx  pid %d (%s) -> pid %d (%s)%s\n",
          g.action, g.what, g.detail, f.count, g.actor_pid, g.actor_comm,
          g.target_pid, g.target_comm, f.count > 1 ? " first" : "");
    }
  }
  if (s.guard_events_lost > 0) {
    absl::StrAppendFormat(&out, "sandfence: %d guard events lost\n",
                          s.guard_events_lost);
  }
  if (!s.allowed.empty()) {
    absl::StrAppend(&out, "sandfence: allowed: ", absl::StrJoin(s.allowed, ", "),
                    "\n");
  }
  if (!s.denied.empty()) {
    absl::StrAppend(&out, "sandfence: denied:\n");
    for (const DeniedDestination& d : s.denied) {
      absl::StrAppendFormat(&out, "  %-6s %-28s %6dx  pid %d (%s)\n",
                            d.protocol, d.destination, d.count, d.first_pid,
                            d.first_comm);
    }
  }
  if (!s.would_deny.empty()) {
    absl::StrAppend(&out, "sandfence: would deny (audit only, let through):\n");
    for (const DeniedDestination& d : s.would_deny) {
      absl::StrAppendFormat(&out, "  %-6s %-28s %6dx  pid %d (%s)\n",
                            d.protocol, d.destination, d.count, d.first_pid,
                            d.first_comm);
    }
  }
  if (s.record) {
    absl::StrAppendFormat(&out, "sandfence: record: %d entries, %d bytes%s\n",
                          s.record->entries, s.record->bytes,
                          s.record->lossy ? " (lossy: see records show)" : "");
    for (const std::string& w : s.record->warnings) {
      absl::StrAppend(&out, "sandfence: record: ", w, "\n");
    }
  }
  if (s.counters.events_lost > 0 || s.decode_errors > 0) {
    absl::StrAppendFormat(
        &out,
        "sandfence: %d events lost in the kernel, %d undecodable: the denied "
        "list may be incomplete (the counts above are exact)\n",
        s.counters.events_lost, s.decode_errors);
  }
  return out;
}

namespace {

std::string DestinationsJson(const std::vector<DeniedDestination>& list) {
  std::vector<std::string> out;
  for (const DeniedDestination& d : list) {
    out.push_back(JsonObject()
                      .Str("protocol", d.protocol)
                      .Str("destination", d.destination)
                      .Num("count", d.count)
                      .NonZero("first_pid", d.first_pid)
                      .Str("first_comm", d.first_comm)
                      .Done());
  }
  return JsonArray(out);
}

}  // namespace

std::string FormatRunSummaryJson(const RunSummary& s,
                                 const CompiledPhase& phase) {
  JsonObject o;
  o.Num("exit_status", static_cast<uint64_t>(s.exit_status))
      .Bool("interrupted_before_start", s.interrupted_before_start)
      .Str("cgroup_path", s.cgroup_path)
      .Always("phase", phase.name)
      .Always("network_access",
              absl::AsciiStrToLower(v1::NetworkAccess_Name(phase.access)))
      .Bool("audit_only", phase.audit_only)
      .Bool("unix_unchecked", phase.restricted() && phase.unix_unchecked)
      .Raw("counters", JsonObject()
                           .Num("allowed",
                                s.counters.allowed + s.supervised_allowed)
                           .Num("denied",
                                s.counters.denied + s.supervised_denied)
                           .Num("events_lost", s.counters.events_lost)
                           .Num("allowed_unreported",
                                s.counters.allowed_unreported)
                           .Num("audit_denied", s.counters.audit_denied)
                           .Done())
      .Num("events_read", s.events_read)
      .Num("decode_errors", s.decode_errors)
      .Raw("denied", DestinationsJson(s.denied))
      .Raw("would_deny", DestinationsJson(s.would_deny));
  std::vector<std::string> allowed;
  for (const std::string& a : s.allowed) allowed.push_back(JsonQuote(a));
  o.Raw("allowed", JsonArray(allowed));
  std::vector<std::string> layers, guard_events;
  for (const ConfineGuarantee& g : s.guard_layers) {
    layers.push_back(JsonObject()
                         .Str("what", g.what)
                         .Bool("holds", g.holds)
                         .Str("layer", g.layer)
                         .Done());
  }
  for (const GuardSummaryLine& g : s.guard_events) {
    guard_events.push_back(JsonObject()
                               .Str("action", g.action)
                               .Str("what", g.what)
                               .Str("detail", g.detail)
                               .NonZero("actor_pid", g.actor_pid)
                               .Str("actor_comm", g.actor_comm)
                               .NonZero("target_pid", g.target_pid)
                               .Str("target_comm", g.target_comm)
                               .Done());
  }
  o.Raw("guard", JsonObject()
                     .Str("enforcer", s.guard_enforcer)
                     .Str("fallback", s.guard_fallback)
                     .Raw("layers", JsonArray(layers))
                     .Raw("events", JsonArray(guard_events))
                     .Num("events_lost", s.guard_events_lost)
                     .Done());
  if (s.record) {
    std::vector<std::string> warnings;
    for (const std::string& w : s.record->warnings) {
      warnings.push_back(JsonQuote(w));
    }
    o.Raw("record", JsonObject()
                        .Bool("lossy", s.record->lossy)
                        .Num("entries", s.record->entries)
                        .Num("dns_entries", s.record->dns_entries)
                        .Num("bytes", s.record->bytes)
                        .Raw("warnings", JsonArray(warnings))
                        .Done());
  }
  std::vector<std::string> reaped;
  for (uint64_t id : s.reaped) reaped.push_back(absl::StrCat(id));
  o.Raw("reaped_cgroups", JsonArray(reaped));
  return o.Done() + "\n";
}

}  // namespace sandfence
