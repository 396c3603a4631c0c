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
// then the kernel's own run time per program run.
#include <unistd.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/fillers.h"
#include "bench/host.h"
#include "bench/suites.h"
#include "bench/worker.h"
#include "common/cgroup.h"
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
  }
  absl::Status Run();

 private:
  absl::StatusOr<Samples> RunWorker(const Cgroup& where, int batches);
  absl::Status SetGuarded(bool on);
  absl::Status MeasureProgramCost(double baseline_getppid);

  const BenchOptions& o_;
  Report* report_;
  std::optional<Cgroup> outside_, guarded_;
  std::optional<GuardController> guard_;
  std::string variant_;
  bool attached_ = false;  // the guarded sandbox is added
};

absl::StatusOr<Samples> GuardSuite::RunWorker(const Cgroup& where,
                                              int batches) {
  absl::StatusOr<Worker> w =
      Worker::Start(o_.worker, where.fd(),
                    {"syscalls", "--batches", absl::StrCat(batches), "--batch",
                     absl::StrCat(o_.guard_batch)});
  if (!w.ok()) return w.status();
  absl::StatusOr<std::string> out = w->Finish();
  if (!out.ok()) return out.status();
  return ParseSamples(*out);
}

// The guard attaches its programs when its first sandbox is added and
// detaches them when its last one goes (GuardController).
absl::Status GuardSuite::SetGuarded(bool on) {
  if (on == attached_) return absl::OkStatus();
  absl::Status s =
      on ? guard_->AddSandbox(
               {.cgroup_id = guarded_->id(), .level = guarded_->level()})
         : guard_->RemoveSandbox(guarded_->id());
  if (s.ok()) attached_ = on;
  return s;
}

absl::Status GuardSuite::Run() {
  for (auto [slot, name] :
       {std::pair{&outside_, "outside"}, {&guarded_, "guarded"}}) {
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

  // 0: no guard; 1: guard attached, caller outside; 2: caller inside the
  // guarded sandbox.
  constexpr int kVariants = 3;
  Samples samples[kVariants];
  std::map<std::string, std::vector<double>> overhead[kVariants];
  for (int round = 0; round < o_.guard_rounds; ++round) {
    Samples this_round[kVariants];
    for (int i = 0; i < kVariants; ++i) {
      const int v = (i + round) % kVariants;
      if (g_interrupted) return absl::CancelledError("interrupted");
      if (absl::Status s = SetGuarded(v != 0); !s.ok()) return s;
      absl::StatusOr<Samples> got =
          RunWorker(v == 2 ? *guarded_ : *outside_, o_.guard_batches);
      if (!got.ok()) return got.status();
      this_round[v] = *got;
      for (auto& [op, values] : *got) {
        auto& all = samples[v][op];
        all.insert(all.end(), values.begin(), values.end());
      }
    }
    for (int v = 1; v < kVariants; ++v) {
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

    for (int v = 1; v < kVariants; ++v) {
      const char* caller = v == 1 ? "caller outside" : "caller guarded";
      row.variant = absl::StrCat(variant_, ", ", caller);
      row.stats = Summarize(samples[v][op]);
      row.baseline = "no guard";
      row.baseline_median = base.median;
      row.note.clear();
      report_->Add(row);

      row.variant = absl::StrCat(variant_, " overhead, ", caller);
      row.stats = Summarize(overhead[v][op]);
      row.baseline.clear();
      row.baseline_median = 0;
      row.note = absl::StrCat("per round: the ", caller,
                              " variant's median minus the baseline's");
      report_->Add(row);
    }
  }
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
