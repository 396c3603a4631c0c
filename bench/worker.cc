#include "bench/worker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "egress/spawn.h"

namespace sandfence::bench {
namespace {

// Clears FD_CLOEXEC on fds for its lifetime, so that exactly these fds
// cross into the next spawned child (other pipes must not: a leaked write
// end would keep a reader from ever seeing EOF).
class InheritScope {
 public:
  explicit InheritScope(std::vector<int> fds) : fds_(std::move(fds)) {
    for (int fd : fds_) ::fcntl(fd, F_SETFD, 0);
  }
  ~InheritScope() {
    for (int fd : fds_) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }

 private:
  std::vector<int> fds_;
};

}  // namespace

absl::StatusOr<Worker> Worker::Start(const std::string& binary, int cgroup_fd,
                                     std::vector<std::string> args,
                                     const std::vector<int>& inherit,
                                     const PreparedConfinement* confinement) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2");
  UniqueFd read_end(p[0]), write_end(p[1]);

  SpawnOptions o;
  o.cgroup_fd = cgroup_fd;
  o.argv = {binary};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.argv.push_back("--out");
  o.argv.push_back(absl::StrCat(write_end.get()));
  std::vector<int> fds = inherit;
  fds.push_back(write_end.get());
  o.keep_fds = fds;
  // The workers are the benchmark's own code, not an agent: some load BPF
  // programs themselves (the control suite), and none must pay for a
  // capability drop the baseline does not.
  o.drop_privileges = false;
  o.confinement = confinement;
  absl::StatusOr<pid_t> pid;
  {
    InheritScope scope(fds);
    pid = SpawnInCgroup(o);
  }
  if (!pid.ok()) return pid.status();
  return Worker(*pid, std::move(read_end));
}

Worker::~Worker() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    WaitForExit(pid_).IgnoreError();
  }
}

absl::Status Worker::WaitForLine(absl::string_view line) {
  const std::string want = absl::StrCat(line, "\n");
  char buf[4096];
  while (!absl::StartsWith(read_, want) &&
         read_.find(absl::StrCat("\n", want)) == std::string::npos) {
    const ssize_t n = ::read(out_.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "read the worker's report");
    if (n == 0) {
      return absl::InternalError(absl::StrCat(
          "the worker ended before saying \"", line, "\": ", read_));
    }
    read_.append(buf, n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Worker::Finish() {
  std::string out = std::exchange(read_, {});
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(out_.get(), buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "read the worker's report");
    out.append(buf, n);
  }
  absl::StatusOr<int> status = WaitForExit(std::exchange(pid_, -1));
  if (!status.ok()) return status.status();
  if (*status != 0) {
    // A failing worker says why on an "error ..." line.
    std::string why = "no reason given";
    if (size_t e = out.rfind("error "); e != std::string::npos) {
      why = out.substr(e + 6, out.find('\n', e) - e - 6);
    }
    return absl::InternalError(
        absl::StrCat("worker exited with status ", *status, ": ", why));
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::vector<double>>> ParseSamples(
    absl::string_view report) {
  std::map<std::string, std::vector<double>> out;
  for (absl::string_view line : absl::StrSplit(report, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() != 3 || f[0] != "sample") continue;
    double v = 0;
    if (!absl::SimpleAtod(f[2], &v)) {
      return absl::InternalError(absl::StrCat("bad sample line: ", line));
    }
    out[std::string(f[1])].push_back(v);
  }
  return out;
}

absl::StatusOr<LoadReport> ParseLoadReport(absl::string_view report) {
  LoadReport r;
  size_t pos = 0;
  uint64_t nstamps = 0;
  bool done = false;
  while (!done && pos < report.size()) {
    size_t nl = report.find('\n', pos);
    if (nl == absl::string_view::npos) break;
    absl::string_view line = report.substr(pos, nl - pos);
    pos = nl + 1;
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, ' ');
    uint64_t v = 0;
    if (!absl::SimpleAtoi(kv.second, &v)) continue;
    if (kv.first == "attempts") r.attempts = v;
    if (kv.first == "eperm") r.eperm = v;
    if (kv.first == "other") r.other = v;
    if (kv.first == "elapsed_ns") r.elapsed_ns = v;
    if (kv.first == "stamps") {
      nstamps = v;
      done = true;
    }
  }
  if (!done)
    return absl::InternalError("the worker's report has no stamps line");
  if (report.size() - pos != nstamps * sizeof(uint64_t)) {
    return absl::InternalError(absl::StrCat("the worker reported ", nstamps,
                                            " stamps but sent ",
                                            report.size() - pos, " bytes"));
  }
  r.stamps.resize(nstamps);
  if (nstamps) std::memcpy(r.stamps.data(), report.data() + pos, nstamps * 8);
  return r;
}

}  // namespace sandfence::bench
