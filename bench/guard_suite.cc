// Guard cost, for the processes it does not govern (issue 13) and for those
// it does (issue 18). The process
// guard is one set of programs per host: in signal mode tp_btf programs at
// every system call's entry and exit (and at fork and signal delivery); in
// lsm mode programs at LSM hooks. Either way every process on the host runs
// them, sandboxed or not, once any sandbox is guarded. This suite measures
// what a process outside every guarded sandbox pays: a worker in a cgroup of
// its own times system calls with no guard loaded (the baseline) and with
// the guard attached for one guarded sandbox, and a worker inside that
// sandbox times the same calls, the three in rotating order each round;
// then the kernel's own run time per program run. The landlock layer
// (issue 32) has no host-wide program: its rows are a caller confined the
// way `sandfence run` confines its command, and a caller outside beside a
// confined process. The Unix socket checks (issue 33) likewise: a sandbox
// whose Unix paths go through run's supervisor adds nothing on the host,
// where the bind tracker (kept for the daemon's sandboxes) is a program on
// every system call's exit: a caller outside beside each.
#include <signal.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/allowlist.h"
#include "bench/fillers.h"
#include "bench/host.h"
#include "bench/suites.h"
#include "bench/worker.h"
#include "common/cgroup.h"
#include "confine/confine.h"
#include "egress/egress_controller.h"
#include "egress/spawn.h"
#include "guard/guard_controller.h"

namespace sandfence::bench {
namespace {

constexpr const char* kOps[] = {"getppid", "fstat", "open_close",
                                "open_close_proc", "kill_0"};

using Samples = std::map<std::string, std::vector<double>>;

class GuardSuite {
 public:
  GuardSuite(const BenchOptions& o, Report* r) : o_(o), report_(r) {}
  ~GuardSuite() {
    // Detach before the cgroups go: the guard holds nothing of them, but
    // its programs should not outlive the measurement.
    if (attached_) guard_->RemoveSandbox(guarded_->id()).IgnoreError();
    SetUnix(UnixMode::kNone).IgnoreError();
    if (sleeper_ > 0) {
      ::kill(sleeper_, SIGKILL);
      WaitForExit(sleeper_).IgnoreError();
    }
  }
  absl::Status Run();

 private:
  absl::StatusOr<Samples> RunWorker(
      const Cgroup& where, int batches,
      const PreparedConfinement* confine = nullptr);
  absl::Status SetGuarded(bool on);
  // The Unix socket checks on a sandbox of their own: none, run's (the
  // supervisor brokers paths: no bind tracker), or with the bind tracker.
  enum class UnixMode { kNone, kBrokered, kTracker };
  absl::Status SetUnix(UnixMode mode);
  absl::Status PrepareLandlock();
  absl::Status MeasureProgramCost(double baseline_getppid);

  const BenchOptions& o_;
  Report* report_;
  std::optional<Cgroup> outside_, guarded_;
  std::optional<GuardController> guard_;
  std::optional<PreparedConfinement> confinement_;
  pid_t sleeper_ = -1;  // a confined process, alive while the suite runs
  std::string variant_;
  bool attached_ = false;  // the guarded sandbox is added
  std::optional<Cgroup> unix_box_;
  std::unique_ptr<EgressController> unix_egress_;
  UnixMode unix_mode_ = UnixMode::kNone;
};

absl::Status GuardSuite::SetUnix(UnixMode mode) {
  if (mode == unix_mode_) return absl::OkStatus();
  if (unix_egress_ != nullptr) {
    unix_egress_->RemoveSandbox(unix_box_->id()).IgnoreError();
    unix_egress_.reset();  // the tracker's link goes with its controller
  }
  unix_mode_ = UnixMode::kNone;
  if (mode == UnixMode::kNone) return absl::OkStatus();
  EgressOptions options;
  options.unix_bind_tracker = mode == UnixMode::kTracker;
  absl::StatusOr<std::unique_ptr<EgressController>> c =
      EgressController::Create(BenchHost(), options);
  if (!c.ok()) return c.status();
  CompiledPhase phase = DenyAllPhase();
  phase.unix_checked = true;
  absl::StatusOr<uint32_t> added =
      (*c)->AddSandbox(unix_box_->fd(), unix_box_->ref(), phase);
  if (!added.ok()) return added.status();
  if (absl::Status s = (*c)->SetUnixTraits(
          unix_box_->id(), {.broker = mode == UnixMode::kBrokered});
      !s.ok()) {
    return s;
  }
  unix_egress_ = *std::move(c);
  unix_mode_ = mode;
  return absl::OkStatus();
}

absl::StatusOr<Samples> GuardSuite::RunWorker(
    const Cgroup& where, int batches, const PreparedConfinement* confine) {
  absl::StatusOr<Worker> w =
      Worker::Start(o_.worker, where.fd(),
                    {"syscalls", "--batches", absl::StrCat(batches), "--batch",
                     absl::StrCat(o_.guard_batch)},
                    {}, confine);
  if (!w.ok()) return w.status();
  absl::StatusOr<std::string> out = w->Finish();
  if (!out.ok()) return out.status();
  return ParseSamples(*out);
}

// The guard attaches its programs when its first sandbox is added and
// detaches them when its last one goes (GuardController).
absl::Status GuardSuite::SetGuarded(bool on) {
  if (on == attached_) return absl::OkStatus();
  absl::Status s = on ? guard_->AddSandbox({.cgroup_id = guarded_->id(),
                                            .level = guarded_->level()})
                      : guard_->RemoveSandbox(guarded_->id());
  if (s.ok()) attached_ = on;
  return s;
}

absl::Status GuardSuite::PrepareLandlock() {
  // What `sandfence run` gives its command: the default plan (Landlock
  // write and scope rules, the seccomp filter, capabilities dropped).
  absl::StatusOr<PreparedConfinement> prepared =
      PrepareConfinement(ConfinePlan{});
  if (!prepared.ok()) {
    report_->Note(absl::StrCat("guard suite: no landlock rows: ",
                               prepared.status().message()));
    return absl::OkStatus();
  }
  confinement_.emplace(*std::move(prepared));
  // A confined process alive for the whole suite: the "caller outside"
  // landlock row runs beside it. Landlock and seccomp hook nothing on the
  // host, so that row should be the baseline's.
  SpawnOptions o;
  o.cgroup_fd = guarded_->fd();
  o.argv = {"/bin/sleep", "3600"};
  o.drop_privileges = false;
  o.confinement = &*confinement_;
  absl::StatusOr<pid_t> pid = SpawnInCgroup(o);
  if (!pid.ok()) return pid.status();
  sleeper_ = *pid;
  return absl::OkStatus();
}

absl::Status GuardSuite::Run() {
  for (auto [slot, name] : {std::pair{&outside_, "outside"},
                            {&guarded_, "guarded"},
                            {&unix_box_, "unix"}}) {
    absl::StatusOr<Cgroup> cg =
        Cgroup::Create(absl::StrCat(o_.cgroup_root, "/", name));
    if (!cg.ok()) return cg.status();
    slot->emplace(*std::move(cg));
  }
  absl::StatusOr<GuardController> g =
      GuardController::Create(BenchHost(), GuardMode::kAuto);
  if (!g.ok()) return g.status();
  guard_.emplace(*std::move(g));
  variant_ = absl::StrCat("guard (", guard_->enforcer_name(), ")");
  if (!guard_->fallback_reason().empty()) {
    report_->Note(absl::StrCat("guard suite: the ", guard_->enforcer_name(),
                               " enforcer runs here (",
                               guard_->fallback_reason(), ")"));
  }
  if (absl::Status s = PrepareLandlock(); !s.ok()) return s;

  // The BPF guard (lsm or signal) attached for one sandbox, with the caller
  // outside it and inside; then the landlock layer, which lives in the
  // confined process: the caller confined, and a caller outside while a
  // confined process runs. The sleeper lives through the baseline too: it
  // holds no hook, so it cannot make the baseline slower.
  struct Variant {
    std::string name;
    bool attach = false;
    bool in_guarded = false;
    const PreparedConfinement* confine = nullptr;
    std::string note;
    UnixMode unix = UnixMode::kNone;
  };
  // name, attach, in_guarded, confine, note
  std::vector<Variant> variants = {
      {"no guard", false, false, nullptr, ""},
      {absl::StrCat(variant_, ", caller outside"), true, false, nullptr, ""},
      {absl::StrCat(variant_, ", caller guarded"), true, true, nullptr, ""},
  };
  if (confinement_) {
    variants.push_back({"landlock+seccomp, caller confined", false, false,
                        &*confinement_, ""});
    variants.push_back({"landlock+seccomp, caller outside", false, false,
                        nullptr, "beside a Landlock+seccomp-confined process"});
  }
  // Unix checks where the cgroup hooks judge them (what run brokers).
  if (KernelHasUnixHooks()) {
    variants.push_back({"unix checks (run's supervisor), caller outside", false,
                        false, nullptr,
                        "a sandbox checking Unix sockets beside it, its paths "
                        "brokered: no bind tracker",
                        UnixMode::kBrokered});
    variants.push_back({"unix checks (bind tracker), caller outside", false,
                        false, nullptr,
                        "a sandbox checking Unix sockets beside it, with the "
                        "host-wide bind tracker the daemon's sandboxes use",
                        UnixMode::kTracker});
  } else {
    report_->Note(
        "guard suite: no unix rows: this kernel has no cgroup "
        "connect_unix hooks (Linux 6.7+)");
  }
  const size_t n = variants.size();
  std::vector<Samples> samples(n);
  std::vector<std::map<std::string, std::vector<double>>> overhead(n);
  for (int round = 0; round < o_.guard_rounds; ++round) {
    std::vector<Samples> this_round(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t v = (i + round) % n;
      if (g_interrupted) return absl::CancelledError("interrupted");
      if (absl::Status s = SetGuarded(variants[v].attach); !s.ok()) return s;
      if (absl::Status s = SetUnix(variants[v].unix); !s.ok()) return s;
      absl::StatusOr<Samples> got =
          RunWorker(variants[v].in_guarded ? *guarded_ : *outside_,
                    o_.guard_batches, variants[v].confine);
      if (!got.ok()) return got.status();
      this_round[v] = *got;
      for (auto& [op, values] : *got) {
        auto& all = samples[v][op];
        all.insert(all.end(), values.begin(), values.end());
      }
    }
    for (size_t v = 1; v < n; ++v) {
      for (const char* op : kOps) {
        overhead[v][op].push_back(Summarize(this_round[v][op]).median -
                                  Summarize(this_round[0][op]).median);
      }
    }
  }

  for (const char* op : kOps) {
    const Summary base = Summarize(samples[0][op]);
    Row row;
    row.suite = "guard";
    row.name = op;
    row.unit = "ns/op";
    row.variant = "no guard";
    row.stats = base;
    report_->Add(row);

    for (size_t v = 1; v < n; ++v) {
      const std::string& name = variants[v].name;
      row.variant = name;
      row.stats = Summarize(samples[v][op]);
      row.baseline = "no guard";
      row.baseline_median = base.median;
      row.note = variants[v].note;
      report_->Add(row);

      // "guard (signal) overhead, caller outside", ...
      const size_t comma = name.find(", ");
      row.variant =
          absl::StrCat(name.substr(0, comma), " overhead", name.substr(comma));
      row.stats = Summarize(overhead[v][op]);
      row.baseline.clear();
      row.baseline_median = 0;
      row.note = "per round: the variant's median minus the baseline's";
      report_->Add(row);
    }
  }
  if (absl::Status s = SetUnix(UnixMode::kNone); !s.ok()) return s;
  if (absl::Status s = SetGuarded(true); !s.ok()) return s;
  absl::Status s = MeasureProgramCost(Summarize(samples[0]["getppid"]).median);
  SetGuarded(false).IgnoreError();
  return s;
}

absl::Status GuardSuite::MeasureProgramCost(double baseline_getppid) {
  absl::StatusOr<BpfStatsEnabled> stats = BpfStatsEnabled::Enable();
  if (!stats.ok()) {
    report_->Note(absl::StrCat("guard per-program cost not measured: ",
                               stats.status().message()));
    return absl::OkStatus();
  }
  const std::vector<std::pair<std::string, int>> progs = guard_->prog_fds();
  std::map<std::string, std::vector<double>> per_run;
  for (int run = 0; run < o_.bpf_stats_runs; ++run) {
    std::map<std::string, ProgRunStats> before;
    for (const auto& [name, fd] : progs) {
      absl::StatusOr<ProgRunStats> s = ReadProgRunStats(fd);
      if (!s.ok()) return s.status();
      before[name] = *s;
    }
    absl::StatusOr<Samples> got =
        RunWorker(*outside_, std::max(1, o_.guard_batches / 3));
    if (!got.ok()) return got.status();
    for (const auto& [name, fd] : progs) {
      absl::StatusOr<ProgRunStats> s = ReadProgRunStats(fd);
      if (!s.ok()) return s.status();
      // Every process on the host ran these meanwhile, not only the
      // worker: the figure is the mean over all of them.
      const uint64_t runs = s->run_cnt - before[name].run_cnt;
      if (runs) {
        per_run[name].push_back(
            static_cast<double>(s->run_time_ns - before[name].run_time_ns) /
            runs);
      }
    }
  }
  for (const auto& [name, fd] : progs) {
    if (per_run[name].empty()) {
      report_->Note(absl::StrCat("guard program ", name,
                                 " did not run during the measurement"));
      continue;
    }
    Row row;
    row.suite = "guard";
    row.name = absl::StrCat("bpf_run/", name);
    row.variant = variant_;
    row.unit = "ns/run";
    row.stats = Summarize(per_run[name]);
    row.baseline = "no guard getppid";
    row.baseline_median = baseline_getppid;
    row.note = "mean over every run on the host, mostly ungoverned";
    report_->Add(std::move(row));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunGuardSuite(const BenchOptions& options, Report* report) {
  GuardSuite suite(options, report);
  return suite.Run();
}

}  // namespace sandfence::bench
