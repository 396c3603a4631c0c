// `sandfence run -- true` end to end (issue 34): warm (the host's program
// set already pinned, so a run opens it), cold (a bpffs of its own, so
// nothing is pinned and every program is loaded and verified, as on the
// first run on a host), against bare `true`, alternating in the same run.
// Then many runs in a row and what they left behind: pins, programs,
// links, maps, cgroups, open files and entries in the set's maps.
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/leftovers.h"
#include "bench/report.h"
#include "bench/suites.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace sandfence::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kPinRoot[] = "/sys/fs/bpf";

// Runs argv to its exit and returns the wall time in ms. `cold`: the child
// first gets a mount namespace of its own with an empty bpffs over
// /sys/fs/bpf, which goes (with whatever was pinned in it) when the
// child's namespace does. Output goes to `log`; a failure quotes it.
absl::StatusOr<double> TimeCommand(const std::vector<std::string>& argv,
                                   bool cold, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const Clock::time_point t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoError(errno, "fork");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    // Only async-signal-safe calls between fork and exec.
    constexpr char kNoBpffs[] = "cold: no bpffs of its own\n";
    constexpr char kNoExec[] = "exec failed\n";
    if (cold && (::unshare(CLONE_NEWNS) != 0 ||
                 ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE,
                         nullptr) != 0 ||
                 ::mount("bpf", kPinRoot, "bpf", 0, nullptr) != 0)) {
      (void)!::write(2, kNoBpffs, sizeof(kNoBpffs) - 1);
      ::_exit(126);
    }
    ::execv(args[0], args.data());
    (void)!::write(2, kNoExec, sizeof(kNoExec) - 1);
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoError(errno, "waitpid");
  }
  const double ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(log);
    std::string out((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
    return absl::InternalError(absl::StrCat(absl::StrJoin(argv, " "),
                                            (cold ? " (cold)" : ""),
                                            ": status ", status, ": ", out));
  }
  return ms;
}

Row RunRow(std::string name, std::string variant, std::vector<double> ms,
           std::string note) {
  Row row;
  row.suite = "run";
  row.name = std::move(name);
  row.variant = std::move(variant);
  row.unit = "ms";
  row.tail = true;
  row.stats = Summarize(std::move(ms));
  row.note = std::move(note);
  return row;
}

}  // namespace

absl::Status RunRunSuite(const BenchOptions& o, Report* report) {
  const std::string log = o.work_dir + "/run-suite.log";
  const std::vector<std::string> bare = {"/bin/true"};
  const std::vector<std::string> run = {o.sandfence, "run", "--network-access",
                                        "inherit", "--", "/bin/true"};
  // The host's set pinned before the first timed warm run (a no-op when
  // it already is).
  if (absl::StatusOr<double> w = TimeCommand(run, false, log); !w.ok()) {
    return w.status();
  }
  std::vector<double> t_bare, t_warm, t_cold;
  for (int i = 0; i < o.run_warm_rounds && !g_interrupted; ++i) {
    for (const bool sf : {i % 2 == 0, i % 2 != 0}) {
      absl::StatusOr<double> ms = TimeCommand(sf ? run : bare, false, log);
      if (!ms.ok()) return ms.status();
      (sf ? t_warm : t_bare).push_back(*ms);
    }
  }
  for (int i = 0; i < o.run_cold_rounds && !g_interrupted; ++i) {
    absl::StatusOr<double> ms = TimeCommand(run, true, log);
    if (!ms.ok()) return ms.status();
    t_cold.push_back(*ms);
  }
  const Summary base = Summarize(t_bare);
  report->Add(RunRow("run_true", "bare true", t_bare,
                     "baseline: fork + exec of /bin/true, alternating with "
                     "the warm runs"));
  Row warm = RunRow("run_true", "run warm", t_warm,
                    "sandfence run --network-access inherit -- /bin/true "
                    "(guard auto) with the host's program set pinned");
  warm.baseline = "bare true";
  warm.baseline_median = base.median;
  report->Add(warm);
  Row cold = RunRow("run_true", "run cold", t_cold,
                    "the same, in a mount namespace with an empty bpffs: "
                    "every program loaded and verified, as on a host's "
                    "first run");
  cold.baseline = "bare true";
  cold.baseline_median = base.median;
  report->Add(cold);

  // The soak: what many runs in a row leave behind. The host's other
  // processes can move the host-wide counts a little; sandfence's own
  // (pins, its set's map entries) must not move at all.
  const std::map<std::string, int64_t> before = HostSnapshot(o);
  std::vector<double> t_soak;
  for (int i = 0; i < o.run_soak && !g_interrupted; ++i) {
    absl::StatusOr<double> ms = TimeCommand(run, false, log);
    if (!ms.ok()) return ms.status();
    t_soak.push_back(*ms);
  }
  const std::map<std::string, int64_t> after = HostSnapshot(o);
  Row soak = RunRow("run_true", "run warm, soak", t_soak,
                    absl::StrCat(t_soak.size(), " runs in a row"));
  soak.baseline = "bare true";
  soak.baseline_median = base.median;
  report->Add(soak);
  for (const auto& [what, n] : after) {
    Row row;
    row.suite = "run";
    row.name = absl::StrCat("left_after_runs/", what);
    row.params = {{"runs", static_cast<int64_t>(t_soak.size())}};
    row.variant = "after - before";
    row.unit = "count";
    row.stats = Summarize({static_cast<double>(n - before.at(what))});
    row.note = absl::StrCat("before ", before.at(what), ", after ", n);
    report->Add(std::move(row));
  }
  return absl::OkStatus();
}

}  // namespace sandfence::bench
