// The floor of each hook the connect suite measures (issue 37): a program
// of the same type and attach point that does nothing (r0 = 1; exit),
// attached to a cgroup of its own at the sandbox's depth. The kernel's run
// time of sandfence's program is judged against it, measured in the same
// run by the same worker.
#ifndef SANDFENCE_BENCH_EMPTY_PROGRAMS_H_
#define SANDFENCE_BENCH_EMPTY_PROGRAMS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace sandfence::bench {

class EmptyPrograms {
 public:
  // Loads one empty program per hook name (sock_create, connect4,
  // connect6, sendmsg4, sendmsg6, skb_egress) and attaches each to the
  // cgroup at cgroup_fd; detached when this goes.
  static absl::StatusOr<std::unique_ptr<EmptyPrograms>> Attach(
      int cgroup_fd, const std::vector<std::string>& hooks);

  // The program of `hook`; -1 if it was not asked for.
  int prog_fd(const std::string& hook) const;

 private:
  EmptyPrograms() = default;
  std::map<std::string, UniqueFd> progs_;
  std::vector<UniqueFd> links_;
};

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_EMPTY_PROGRAMS_H_
