// The parent's side of sandfence_bench_worker: starts a worker inside a
// cgroup the way `sandfence run` starts commands (clone3 with
// CLONE_INTO_CGROUP, so every socket it opens belongs to that cgroup from
// the start), and reads what it reports through a pipe.
#ifndef SANDFENCE_BENCH_WORKER_H_
#define SANDFENCE_BENCH_WORKER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/unique_fd.h"

namespace sandfence {
class PreparedConfinement;
}  // namespace sandfence

namespace sandfence::bench {

class Worker {
 public:
  // Starts the worker binary in the cgroup with args (after the mode); the
  // fds in `inherit` stay open in the worker under the same numbers, and
  // "--out <fd>" names the pipe it reports to. With `confinement`, the
  // worker applies it before exec, as `sandfence run`'s command does.
  static absl::StatusOr<Worker> Start(
      const std::string& binary, int cgroup_fd, std::vector<std::string> args,
      const std::vector<int>& inherit = {},
      const PreparedConfinement* confinement = nullptr);

  Worker(Worker&& o) noexcept
      : pid_(std::exchange(o.pid_, -1)),
        out_(std::move(o.out_)),
        read_(std::move(o.read_)) {}
  Worker& operator=(Worker&&) = delete;
  // Kills and reaps a worker that was not finished.
  ~Worker();

  pid_t pid() const { return pid_; }
  // Reads the report to its end and reaps the worker; an error (with the
  // worker's last words) unless it exited 0.
  absl::StatusOr<std::string> Finish();
  // Reads the report until a line `line` arrives (what was read stays
  // part of Finish's report); an error if the worker ends first.
  absl::Status WaitForLine(absl::string_view line);

 private:
  Worker(pid_t pid, UniqueFd out) : pid_(pid), out_(std::move(out)) {}
  pid_t pid_ = -1;
  UniqueFd out_;
  std::string read_;  // by WaitForLine, not yet returned
};

// `connect` mode: "sample <op> <ns per op>" lines, one per batch.
absl::StatusOr<std::map<std::string, std::vector<double>>> ParseSamples(
    absl::string_view report);

// `deny` and `pipe` modes.
struct LoadReport {
  uint64_t attempts = 0;
  uint64_t eperm = 0;  // denied as expected
  uint64_t other = 0;  // any other outcome (a misconfigured run)
  uint64_t elapsed_ns = 0;
  std::vector<uint64_t> stamps;  // CLOCK_BOOTTIME before each attempt
};
absl::StatusOr<LoadReport> ParseLoadReport(absl::string_view report);

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_WORKER_H_
