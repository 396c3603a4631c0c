// One Landlock domain for the landlock scenario suite: a confined "zygote"
// (guard_zygote.c) that applied a prepared confinement once and starts
// every process the test asks for in it, as the processes of one
// `sandfence run` sandbox share the domain their command entered.
//
//   test (root, unconfined, outside every sandbox)
//    ├─ zygote: fork, join the sandbox's cgroup, ApplyConfinement, exec
//    │          sf_guard_zygote (in the sandbox's domain from then on)
//    ├─ actor   clone(CLONE_PARENT) by the zygote: the test's child, the
//    └─ target  zygote's domain; moved into its cgroup by the test, then
//               released to exec
//
// Processes of two zygotes are in two domains (two sandboxes), processes
// the test starts itself in none (outside, unguarded).
#ifndef SANDFENCE_TESTS_GUARD_GUARD_DOMAIN_H_
#define SANDFENCE_TESTS_GUARD_GUARD_DOMAIN_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "confine/confine.h"

namespace sandfence::guard_test {

class Zygote {
 public:
  // Prepares `plan` (PrepareConfinement) and starts the zygote in
  // cgroup_dir, confined by it (ApplyConfinement in the forked child, the
  // last step before exec, as SpawnInCgroup does).
  static absl::StatusOr<std::unique_ptr<Zygote>> Start(
      const ConfinePlan& plan, const std::string& cgroup_dir);
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;
  // Ends the zygote (the processes it started are the test's children:
  // their owners end them).
  ~Zygote();

  // Starts argv (argv[0] an absolute path) in the zygote's domain with
  // `out_fd` as its stdout; moves it into cgroup_dir ("" leaves it in the
  // zygote's) before it execs. The new process is this process's child.
  absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv,
                              const std::string& cgroup_dir, int out_fd) const;

  pid_t pid() const { return pid_; }
  const PreparedConfinement& prepared() const { return prepared_; }

 private:
  explicit Zygote(PreparedConfinement prepared)
      : prepared_(std::move(prepared)) {}
  PreparedConfinement prepared_;
  pid_t pid_ = -1;
  UniqueFd sock_;
};

// The helper's path (sf_guard_zygote).
std::string ZygotePath();

}  // namespace sandfence::guard_test

#endif  // SANDFENCE_TESTS_GUARD_GUARD_DOMAIN_H_
