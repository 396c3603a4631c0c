// sandfence_bench: what sandfence costs, measured side by side with a
// baseline in the same run (issue 7). bench/run is the way to start it.
//
//   sandfence_bench [--smoke] [--json PATH]
//                   [--suites connect,events,control,dns,start,guard,run,soak]
//                   [--worker PATH] [--sandfence PATH] [--soak-rollouts N]
//
// Needs root (BPF programs, cgroups, nftables). It runs in a network
// namespace of its own, so its traffic, listeners and nftables table never
// touch the host's; its cgroups live under <cgroup2>/sf-bench-<pid> and are
// removed on the way out. Exit status: 0 all suites ran, 1 a suite failed
// (the table and JSON still show the rest), 64 usage, 77 not root.
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/host.h"
#include "bench/options.h"
#include "bench/report.h"
#include "bench/suites.h"
#include "bench/worker.h"
#include "common/cgroup.h"
#include "common/status.h"

namespace sandfence::bench {
namespace {

struct Args {
  bool smoke = false;
  bool control_child = false;
  std::string json = "sandfence-bench.json";
  std::vector<std::string> suites = {"connect", "events", "control",
                                     "dns",     "start",  "guard",
                                     "run",     "soak"};
  std::string worker;
  std::string sandfence;
  std::string cgroup_root;  // control child: the parent's subtree
  std::string work_dir;     // control child: the parent's scratch dir
  int out_fd = -1;          // control child: where rows go
  int soak_rollouts = 0;    // overrides the size's (0: keep it)
};

void Usage() {
  std::fprintf(stderr,
               "usage: sandfence_bench [--smoke] [--json PATH] "
               "[--suites connect,events,control,dns,start,guard,run,soak] "
               "[--worker PATH] [--sandfence PATH] [--soak-rollouts N]\n");
}

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--smoke") {
      a->smoke = true;
    } else if (arg == "--control-child") {
      a->control_child = true;
    } else if (arg == "--json") {
      if (!value(&a->json)) return false;
    } else if (arg == "--suites") {
      if (!value(&v)) return false;
      a->suites = absl::StrSplit(v, ',', absl::SkipEmpty());
      for (const std::string& s : a->suites) {
        if (s != "connect" && s != "events" && s != "control" && s != "dns" &&
            s != "start" && s != "guard" && s != "run" && s != "soak") {
          return false;
        }
      }
    } else if (arg == "--worker") {
      if (!value(&a->worker)) return false;
    } else if (arg == "--sandfence") {
      if (!value(&a->sandfence)) return false;
    } else if (arg == "--cgroup-root") {
      if (!value(&a->cgroup_root)) return false;
    } else if (arg == "--work-dir") {
      if (!value(&a->work_dir)) return false;
    } else if (arg == "--soak-rollouts") {
      if (!value(&v) || !absl::SimpleAtoi(v, &a->soak_rollouts) ||
          a->soak_rollouts < 1) {
        return false;
      }
    } else if (arg == "--out") {
      if (!value(&v) || !absl::SimpleAtoi(v, &a->out_fd)) return false;
    } else {
      return false;
    }
  }
  return true;
}

void OnSignal(int) { g_interrupted = true; }

void InstallSignalHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  // A second signal kills at once.
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

std::string SelfPath() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : std::string();
}

// A scratch directory, removed with its contents.
class TempDir {
 public:
  static absl::StatusOr<TempDir> Create() {
    std::string tmpl = "/tmp/sf-bench-XXXXXX";
    if (!::mkdtemp(tmpl.data())) return ErrnoError(errno, "mkdtemp");
    return TempDir(tmpl);
  }
  TempDir(TempDir&& o) noexcept : path_(std::exchange(o.path_, "")) {}
  ~TempDir() {
    if (path_.empty()) return;
    ::nftw(
        path_.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) {
          return ::remove(p);
        },
        16, FTW_DEPTH | FTW_PHYS);
  }
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

std::string UtcNow() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

int ControlChild(const Args& a, BenchOptions o) {
  o.cgroup_root = a.cgroup_root;
  o.work_dir = a.work_dir;
  Report report;
  absl::Status s = RunControlSuite(o, &report);
  std::string out;
  for (const Row& r : report.rows()) {
    absl::StrAppend(&out, Report::Serialize(r), "\n");
  }
  if (!s.ok()) absl::StrAppend(&out, "error ", s.ToString(), "\n");
  for (size_t off = 0; off < out.size();) {
    ssize_t n = ::write(a.out_fd, out.data() + off, out.size() - off);
    if (n <= 0) return 1;
    off += n;
  }
  return s.ok() ? 0 : 1;
}

// The control suite runs in a child of its own so that the memory it
// reports is the controller's alone.
absl::Status RunControlInChild(const Args& a, const BenchOptions& o,
                               Report* report) {
  absl::StatusOr<Cgroup> cg =
      Cgroup::Create(absl::StrCat(o.cgroup_root, "/control"));
  if (!cg.ok()) return cg.status();
  std::vector<std::string> args = {"--control-child", "--cgroup-root",
                                   o.cgroup_root, "--work-dir", o.work_dir};
  if (a.smoke) args.push_back("--smoke");
  absl::StatusOr<Worker> child = Worker::Start(SelfPath(), cg->fd(), args);
  if (!child.ok()) return child.status();
  absl::StatusOr<std::string> out = child->Finish();
  if (!out.ok()) return out.status();
  for (absl::string_view line : absl::StrSplit(*out, '\n', absl::SkipEmpty())) {
    absl::StatusOr<Row> row = Report::Parse(line);
    if (!row.ok()) return row.status();
    report->Add(*std::move(row));
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Args a;
  if (!ParseArgs(argc, argv, &a)) {
    Usage();
    return kExitUsage;
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr,
                 "sandfence_bench: needs root (BPF programs, cgroups, "
                 "nftables, a network namespace); not run\n");
    return kExitNoPerm;
  }
  InstallSignalHandlers();
  BenchOptions o = a.smoke ? SmokeOptions() : FullOptions();
  // 6 links per sandbox, plus a cgroup fd each.
  if (absl::Status s = RaiseFdLimit(8 * o.control_sandboxes + 4096); !s.ok()) {
    std::fprintf(stderr, "sandfence_bench: %s\n", s.ToString().c_str());
    return kExitSoftware;
  }
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  if (!mount.ok()) {
    std::fprintf(stderr, "sandfence_bench: %s\n",
                 mount.status().ToString().c_str());
    return kExitSoftware;
  }
  o.cgroup2_mount = *mount;
  o.worker = a.worker;
  if (o.worker.empty()) {
    std::string self = SelfPath();
    o.worker = self.substr(0, self.rfind('/') + 1) + "sandfence_bench_worker";
  }
  o.sandfence = a.sandfence;
  if (a.soak_rollouts > 0) o.soak_rollouts = a.soak_rollouts;
  if (o.sandfence.empty()) {
    // build/bench/sandfence_bench -> build/userspace/cli/sandfence
    std::string self = SelfPath();
    o.sandfence = self.substr(0, self.rfind('/') + 1) +
                  "../userspace/cli/sandfence";
  }
  if (a.control_child) return ControlChild(a, o);

  if (absl::Status s = EnterPrivateNetns(); !s.ok()) {
    std::fprintf(stderr, "sandfence_bench: %s\n", s.ToString().c_str());
    return kExitSoftware;
  }
  absl::StatusOr<TempDir> work = TempDir::Create();
  absl::StatusOr<Cgroup> root =
      Cgroup::Create(absl::StrCat(*mount, "/sf-bench-", ::getpid()));
  if (!work.ok() || !root.ok()) {
    std::fprintf(
        stderr, "sandfence_bench: %s\n",
        (!work.ok() ? work.status() : root.status()).ToString().c_str());
    return kExitSoftware;
  }
  o.cgroup_root = root->path();
  o.work_dir = work->path();
  // SANDFENCE_BENCH_DEPTH=N puts the suites' cgroups N levels further down,
  // as a Kubernetes node does (kubepods.slice/<qos>/<pod>/<container>):
  // what the levels above a sandbox cost the walks. Declared after root:
  // removed before it.
  std::vector<Cgroup> nest;
  int extra_depth = 0;
  if (const char* d = std::getenv("SANDFENCE_BENCH_DEPTH");
      d != nullptr && (!absl::SimpleAtoi(d, &extra_depth) || extra_depth < 0 ||
                       extra_depth > 8)) {
    std::fprintf(stderr,
                 "sandfence_bench: SANDFENCE_BENCH_DEPTH=%s: expected 0..8\n",
                 d);
    return kExitSoftware;
  }
  for (int i = 0; i < extra_depth; ++i) {
    absl::StatusOr<Cgroup> level =
        Cgroup::Create(absl::StrCat(o.cgroup_root, "/nest", i));
    if (!level.ok()) {
      std::fprintf(stderr, "sandfence_bench: %s\n",
                   level.status().ToString().c_str());
      return kExitSoftware;
    }
    o.cgroup_root = level->path();
    nest.push_back(*std::move(level));
  }

  Report report;
  std::vector<std::string> cmd(argv, argv + argc);
  report.SetMeta("mode", a.smoke ? "smoke" : "full");
  report.SetMeta("extra_cgroup_depth", absl::StrCat(extra_depth));
  // bench/run says how it was started; the binary's own argv follows.
  if (const char* run = std::getenv("SANDFENCE_BENCH_COMMAND")) {
    report.SetMeta("run_command", run);
  }
  report.SetMeta("command", absl::StrJoin(cmd, " "));
  report.SetMeta("date", UtcNow());
  report.SetMeta("kernel", KernelRelease());
  report.SetMeta("cpu", CpuModel());
  report.SetMeta("cpus", absl::StrCat(CpuCount()));
  report.SetMeta("cgroup2", *mount);
  report.SetMeta("loadavg_start", LoadAverage());
#if SANDFENCE_BENCH_HAVE_RECORDS
  report.SetMeta("records", "userspace/records");
#else
  report.SetMeta("records", "not built (events measured to user space)");
#endif

  int failures = 0;
  for (const std::string& suite : a.suites) {
    if (g_interrupted) break;
    std::fprintf(stderr, "== %s\n", suite.c_str());
    absl::Status s;
    if (suite == "connect") s = RunConnectSuite(o, &report);
    if (suite == "events") s = RunEventsSuite(o, &report);
    if (suite == "control") s = RunControlInChild(a, o, &report);
    if (suite == "dns") s = RunDnsSuite(o, &report);
    if (suite == "start") s = RunStartSuite(o, &report);
    if (suite == "guard") s = RunGuardSuite(o, &report);
    if (suite == "run") s = RunRunSuite(o, &report);
    if (suite == "soak") s = RunSoakSuite(o, &report);
    if (!s.ok()) {
      ++failures;
      report.Note(absl::StrCat(suite, " suite failed: ", s.ToString()));
      std::fprintf(stderr, "%s suite failed: %s\n", suite.c_str(),
                   s.ToString().c_str());
    }
  }
  if (g_interrupted) report.Note("interrupted: results are partial");
  // The machine may be shared: what else ran is part of the result.
  report.SetMeta("loadavg_end", LoadAverage());
  EvaluateTargets(o, &report);

  std::printf("\nsandfence benchmarks (%s) - %s, %d CPUs (%s)\n\n",
              a.smoke ? "smoke" : "full", KernelRelease().c_str(), CpuCount(),
              CpuModel().c_str());
  report.PrintTable(stdout);
  if (absl::Status s = report.WriteJson(a.json); !s.ok()) {
    std::fprintf(stderr, "sandfence_bench: %s\n", s.ToString().c_str());
    return kExitSoftware;
  }
  std::printf("\nJSON: %s\n", a.json.c_str());
  return failures || g_interrupted ? 1 : 0;
}

}  // namespace
}  // namespace sandfence::bench

int main(int argc, char** argv) { return sandfence::bench::Main(argc, argv); }
