// A process a test starts and waits for, with its stdout and stderr in
// files: a runtime, a hook, `sandfence enter`, the agent.
#ifndef SANDFENCE_TESTS_SUPPORT_CHILD_PROCESS_H_
#define SANDFENCE_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace sandfence::testing {

// How a Child starts: moved into a cgroup first (a container's entrypoint
// starts in its sandbox), with a given stdin (else /dev/null), or as
// another user (uid and gid; 0: as the test).
struct ChildOptions {
  std::string join_cgroup;
  int stdin_fd = -1;
  int uid = 0;
};

// argv exec'd (argv[0] is a path) in a session of its own, its stdout and
// stderr in files under `dir`; killed and reaped when it goes, if it still
// runs.
class Child {
 public:
  Child(std::vector<std::string> argv, const std::string& dir,
        const ChildOptions& opts = {});
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Its pid, also once it was reaped.
  pid_t pid() const { return pid_ > 0 ? pid_ : last_pid_; }
  // Its exit status (shell-style: 128 + signal when killed), once it ends;
  // later calls say it again.
  int Wait();
  // Whether it has not ended yet (an ended one is reaped).
  bool Running() const;
  std::string out() const;
  std::string err() const;

 private:
  static inline int n_ = 0;
  pid_t pid_ = -1, last_pid_ = -1;
  int status_ = -1;
  std::string out_, err_;
};

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_SUPPORT_CHILD_PROCESS_H_
