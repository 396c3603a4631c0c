#include "support/child_process.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "support/test_files.h"

namespace sandfence::testing {

Child::Child(std::vector<std::string> argv, const std::string& dir,
             const ChildOptions& opts)
    : out_(absl::StrCat(dir, "/out.", ++n_)),
      err_(absl::StrCat(dir, "/err.", n_)) {
  pid_ = fork();
  if (pid_ == 0) {
    setsid();
    int o = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (opts.stdin_fd >= 0) {
      dup2(opts.stdin_fd, 0);
    } else {
      int null = open("/dev/null", O_RDONLY);
      dup2(null, 0);
    }
    dup2(o, 1);
    dup2(e, 2);
    if (!opts.join_cgroup.empty()) {
      int fd = open((opts.join_cgroup + "/cgroup.procs").c_str(),
                    O_WRONLY | O_CLOEXEC);
      if (fd < 0 || write(fd, "0", 1) != 1) _exit(120);
      close(fd);
    }
    if (opts.uid != 0 && (setgroups(0, nullptr) != 0 ||
                          setresgid(opts.uid, opts.uid, opts.uid) != 0 ||
                          setresuid(opts.uid, opts.uid, opts.uid) != 0)) {
      _exit(121);
    }
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
}

Child::~Child() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    Wait();
  }
}

int Child::Wait() {
  int st = 0;
  if (pid_ > 0) {
    waitpid(pid_, &st, 0);
    last_pid_ = pid_;
    pid_ = -1;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  return status_;
}

bool Child::Running() const {
  int st;
  return pid_ > 0 && waitpid(pid_, &st, WNOHANG) == 0;
}

std::string Child::out() const { return FileContents(out_); }
std::string Child::err() const { return FileContents(err_); }

}  // namespace sandfence::testing
