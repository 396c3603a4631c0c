#include "run/sandbox_run.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <cerrno>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "common/cgroup.h"
#include "egress/spawn.h"
#include "guard/guard_controller.h"
#include "guard/guard_record.h"
#include "common/cgroup.h"

namespace sandfence {
namespace {

std::string Destination(const NetEvent& e) {
  if (e.hook == SF_HOOK_SOCK_CREATE) {
    return e.sock_type == 3 ? "raw socket"
                            : absl::StrCat("socket protocol ", e.protocol);
  }
  return HostPort{e.addr, e.port}.ToString();
}

// Folds events into what the summary shows.
class SummaryBuilder {
 public:
  void Add(const NetEvent& e) {
    const std::string proto =
        e.hook == SF_HOOK_SOCK_CREATE ? "socket" : ProtocolName(e.protocol);
    const std::string dest = Destination(e);
    if (!e.denied()) {
      allowed_.emplace(absl::StrCat(proto, " ", dest));
      return;
    }
    DeniedDestination& d = denied_[{proto, dest}];
    if (d.count++ == 0) {
      d.protocol = proto;
      d.destination = dest;
      d.first_pid = e.tgid;
      d.first_comm = e.comm;
    }
  }

  void Finish(RunSummary* out) const {
    for (const auto& [key, d] : denied_) out->denied.push_back(d);
    std::stable_sort(out->denied.begin(), out->denied.end(),
                     [](const DeniedDestination& a, const DeniedDestination& b) {
                       return a.count > b.count;
                     });
    out->allowed.assign(allowed_.begin(), allowed_.end());
  }

 private:
  std::map<std::pair<std::string, std::string>, DeniedDestination> denied_;
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
  auto make_parent = [&]() -> absl::Status {
    if (default_parent && ::mkdir(parent.c_str(), 0755) != 0 &&
        errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("create ", parent));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = make_parent(); !s.ok()) return s;

  absl::StatusOr<std::unique_ptr<EgressController>> controller =
      EgressController::Create();
  if (!controller.ok()) return controller.status();

  // The guard loads before anything exists: lsm asked for and unavailable
  // is a refusal, and nothing has started.
  const GuardMode guard_mode =
      request.guard_mode.value_or(GuardModeFromPolicy(request.phase.guard));
  absl::StatusOr<GuardController> guard = GuardController::Create(guard_mode);
  if (!guard.ok()) return guard.status();

  const std::string sandbox_path = absl::StrCat(parent, "/run-", ::getpid());
  absl::StatusOr<Cgroup> sandbox = Cgroup::Create(sandbox_path);
  if (!sandbox.ok() && absl::IsNotFound(sandbox.status()) && default_parent) {
    // Another run removed the empty parent between our mkdir and now.
    if (absl::Status s = make_parent(); !s.ok()) return s;
    sandbox = Cgroup::Create(sandbox_path);
  }
  if (!sandbox.ok()) return sandbox.status();
  std::unique_ptr<RolloutRecorder> recorder;
  if (!request.record_path.empty()) {
    if (request.policy == nullptr) {
      return absl::InvalidArgumentError("a record needs the compiled policy");
    }
    RolloutInfo info;
    info.rollout_id = request.rollout_id.empty()
                          ? absl::StrCat("run-", ::getpid())
                          : request.rollout_id;
    info.cgroup_path = sandbox->path();
    info.cgroup_id = sandbox->id();
    RecorderOptions options;
    options.overwrite = true;
    EgressController* c = controller->get();
    const uint64_t id = sandbox->id();
    options.counters = [c, id] { return c->Counters(id); };
    absl::StatusOr<std::unique_ptr<RolloutRecorder>> created =
        RolloutRecorder::Create(request.record_path, info, *request.policy,
                                BootClock::Capture(), options);
    if (!created.ok()) return created.status();
    recorder = *std::move(created);
    // The span starts before the kernel switches; see recorder.h.
    if (absl::Status s = recorder->BeginPhase(request.phase.name); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s =
          (*controller)->AddSandbox(sandbox->fd(), sandbox->id(), request.phase);
      !s.ok()) {
    return s;
  }
  if (recorder) {
    absl::StatusOr<uint32_t> generation =
        (*controller)->Generation(sandbox->id());
    if (generation.ok()) recorder->BindGeneration(*generation);
  }

  RunSummary summary;
  summary.cgroup_path = sandbox->path();
  summary.guard_enforcer = std::string(guard->enforcer_name());
  summary.guard_fallback = guard->fallback_reason();
  if (recorder) recorder->SetGuardEnforcement(summary.guard_enforcer);
  if (guard->enforcer() != Enforcer::kOff) {
    absl::StatusOr<CgroupRef> inspected =
        InspectCgroup(sandbox->path());
    if (!inspected.ok()) return inspected.status();
    GuardedSandbox guarded;
    guarded.cgroup_id = inspected->id;
    guarded.level = inspected->level;
    if (absl::Status s = guard->AddSandbox(guarded); !s.ok()) return s;
  }
  const int64_t mono_to_unix = MonotonicToUnixOffsetNs();
  std::optional<GuardEventReader> guard_reader;
  if (guard->events_fd() >= 0) {
    absl::StatusOr<GuardEventReader> r = GuardEventReader::Create(
        guard->events_fd(), [&](const sf_guard_event& e) {
          if (e.sandbox_id != sandbox->id()) return;
          v1::GuardEntry entry = GuardEntryFromEvent(e, mono_to_unix);
          summary.guard_events.push_back(
              {entry.action(), entry.what(), entry.detail(),
               entry.actor().tgid(), entry.actor().command(),
               entry.target().tgid(), entry.target().command()});
          if (recorder) recorder->AddGuardEntry(std::move(entry));
        });
    if (!r.ok()) return r.status();
    guard_reader.emplace(*std::move(r));
  }
  SummaryBuilder builder;
  absl::StatusOr<std::unique_ptr<NetEventReader>> reader =
      NetEventReader::Create((*controller)->events_fd(),
                             [&](const NetEvent& e) {
                               if (e.sandbox != sandbox->id()) return;
                               ++summary.events_read;
                               builder.Add(e);
                               if (recorder) recorder->Add(e);
                               if (request.on_event) request.on_event(e);
                             });
  if (!reader.ok()) return reader.status();

  SpawnOptions spawn;
  spawn.cgroup_fd = sandbox->fd();
  spawn.argv = request.argv;
  spawn.uid = request.uid;
  spawn.gid = request.gid;
  spawn.new_netns = request.private_netns;
  // A signal that came while we set up: the command never starts, and
  // the status is what being killed by that signal would have given.
  if (signalfd_siginfo early; ::read(sigfd.get(), &early, sizeof(early)) ==
                              static_cast<ssize_t>(sizeof(early))) {
    RunSummary interrupted;
    interrupted.cgroup_path = sandbox->path();
    interrupted.exit_status = 128 + static_cast<int>(early.ssi_signo);
    interrupted.interrupted_before_start = true;
    if (recorder) {
      FinalCounts final_counts;
      absl::StatusOr<SandboxCounters> c = (*controller)->Counters(sandbox->id());
      if (c.ok()) final_counts.kernel = *c;
      absl::StatusOr<RecordOutcome> outcome = recorder->Finalize(final_counts);
      if (outcome.ok()) interrupted.record = *std::move(outcome);
    }
    return interrupted;
  }
  absl::StatusOr<pid_t> child = SpawnInCgroup(spawn);
  if (!child.ok()) return child.status();

  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, *child, 0)));
  if (!pidfd) return ErrnoError(errno, "pidfd_open");

  // One loop: the command's exit, forwarded signals, and events.
  int signals_seen = 0;
  for (;;) {
    pollfd fds[2] = {{pidfd.get(), POLLIN, 0}, {sigfd.get(), POLLIN, 0}};
    absl::StatusOr<int> polled = (*reader)->Poll(0);
    if (!polled.ok()) return polled.status();
    if (guard_reader) guard_reader->Poll(0).IgnoreError();
    int n = ::poll(fds, 2, 50);
    if (n < 0 && errno != EINTR) return ErrnoError(errno, "poll");
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
    if (fds[0].revents & POLLIN) break;
    if (recorder) recorder->Tick().IgnoreError();  // errors stick; see below
  }
  absl::StatusOr<int> status = WaitForExit(*child);
  if (!status.ok()) return status.status();
  summary.exit_status = *status;

  // Leftover processes die before the hooks come off: nothing in the
  // sandbox ever runs unenforced.
  absl::Status removed = sandbox->Remove();
  if (absl::StatusOr<int> drained = (*reader)->Drain(); !drained.ok()) {
    return drained.status();
  }
  if (guard_reader) guard_reader->Poll(0).IgnoreError();
  if (guard->enforcer() != Enforcer::kOff) {
    summary.guard_events_lost = guard->LostEvents(sandbox->id()).value_or(0);
    guard->RemoveSandbox(sandbox->id()).IgnoreError();
  }
  absl::StatusOr<SandboxCounters> counters =
      (*controller)->RemoveSandbox(sandbox->id());
  if (counters.ok()) summary.counters = *counters;
  summary.decode_errors = (*reader)->decode_errors();
  if (recorder) {
    FinalCounts final_counts;
    if (counters.ok()) final_counts.kernel = *counters;
    final_counts.decode_errors = summary.decode_errors;
    absl::StatusOr<RecordOutcome> outcome = recorder->Finalize(final_counts);
    if (!outcome.ok()) return outcome.status();
    summary.record = *std::move(outcome);
  }
  builder.Finish(&summary);
  if (!removed.ok()) return removed;
  return summary;
}

std::string FormatRunSummary(const RunSummary& s, const CompiledPhase& phase) {
  if (s.interrupted_before_start) {
    return absl::StrFormat(
        "sandfence: interrupted by signal %d before the command started; "
        "nothing ran, everything set up was removed\n",
        s.exit_status - 128);
  }
  std::string out = absl::StrFormat(
      "sandfence: phase \"%s\" (%s), egress enforced by cgroup BPF, "
      "process guard: %s\n"
      "sandfence: exit %d; %d allowed, %d denied\n",
      phase.name, absl::AsciiStrToLower(v1::NetworkAccess_Name(phase.access)),
      s.guard_enforcer, s.exit_status, s.counters.allowed, s.counters.denied);
  if (!s.guard_fallback.empty()) {
    absl::StrAppend(&out, "sandfence: process guard fell back to signal: ",
                    s.guard_fallback, "\n");
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

}  // namespace sandfence
