// Running the real `sandfence` binary from tests: synchronously (status,
// stdout, stderr), or started in the background for tests that act on it
// while it runs (signal it, count what it loaded, kill it).
#ifndef SANDFENCE_TESTS_RUN_RUN_FIXTURE_H_
#define SANDFENCE_TESTS_RUN_RUN_FIXTURE_H_

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "support/host_probe.h"
#include "support/test_env.h"

namespace sandfence::testing {

struct Result {
  int status = -1;  // shell-style
  std::string out, err;
  pid_t pid = -1;  // sandfence's: its sandbox is <cgroup2>/sandfence/run-<pid>
  // With signal_when_exists: whether the file appeared before the signal
  // was sent (if not, the signal came on a timeout, and proves nothing).
  bool signalled_after_file = false;
};

inline std::string ReadAll(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) s.append(buf, n);
  return s;
}

// Whether pid blocks SIGTERM (sandfence does from the start of its set-up).
inline bool BlocksTerm(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "SigBlk:")) {
      uint64_t mask = std::stoull(line.substr(7), nullptr, 16);
      return (mask >> (SIGTERM - 1)) & 1;
    }
  }
  return false;
}

// `sandfence ARGS...` started in the background; its output goes to files
// (so that ten of them never block on full pipes).
class SandfenceProcess {
 public:
  explicit SandfenceProcess(std::vector<std::string> args) {
    static int serial = 0;
    const std::string base =
        absl::StrCat("/tmp/sandfence-test-", getpid(), "-", serial++);
    out_path_ = base + ".out";
    err_path_ = base + ".err";
    int out =
        open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int err =
        open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    pid_ = fork();
    if (pid_ == 0) {
      // A session of its own: a command that signals its process group
      // (kill 0) reaches this sandfence at most, never the test.
      setsid();
      dup2(out, 1);
      dup2(err, 2);
      std::vector<char*> argv;
      std::string bin = SANDFENCE_BIN;
      argv.push_back(bin.data());
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(250);
    }
    close(out);
    close(err);
  }
  ~SandfenceProcess() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    unlink(out_path_.c_str());
    unlink(err_path_.c_str());
  }
  SandfenceProcess(const SandfenceProcess&) = delete;
  SandfenceProcess& operator=(const SandfenceProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Waits for it to end.
  Result Wait() {
    Result r;
    int status = 0;
    if (!waited_) {
      waitpid(pid_, &status, 0);
      waited_ = true;
      status_ =
          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    r.status = status_;
    r.pid = pid_;
    r.out = Slurp(out_path_);
    r.err = Slurp(err_path_);
    return r;
  }

 private:
  static std::string Slurp(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    std::string s = ReadAll(fd);
    close(fd);
    return s;
  }
  pid_t pid_ = -1;
  bool waited_ = false;
  int status_ = -1;
  std::string out_path_, err_path_;
};

// Runs sandfence with args. With signal_after_ms it gets a SIGTERM that
// long after it starts; with signal_when_exists, as soon as that file does
// (the sandboxed command creates it: the command is running), or after
// two minutes if it never does (a slow VM sets up for seconds; the result
// says which happened).
// With signal_when_blocking, as soon as sandfence blocks SIGTERM (it is
// then setting up, well before the command can start).
// A restricted `run` where nothing judges Unix sockets (before 6.7 without
// BPF LSM; the VM's 5.10) is refused unless it says --unix unchecked (tested
// on its own, RunCommandTest.UnixCheckingNeedsTheKernelsHooks): the other
// tests are about other things, so they say it there.
inline std::vector<std::string> WithUnixForThisKernel(
    std::vector<std::string> args) {
  if (args.empty() || args[0] != "run" || HostChecksUnixSockets().ok()) {
    return args;
  }
  bool restricted = false;
  for (size_t i = 0; i + 1 < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "--unix") return args;
    if (args[i] == "--network-access" && args[i + 1] != "inherit") {
      restricted = true;
    }
  }
  if (restricted) args.insert(args.begin() + 1, {"--unix", "unchecked"});
  return args;
}

inline Result Sandfence(std::vector<std::string> args, int signal_after_ms = 0,
                        const std::string& signal_when_exists = "",
                        bool signal_when_blocking = false) {
  args = WithUnixForThisKernel(std::move(args));
  int out[2], err[2];
  pipe2(out, O_CLOEXEC);
  pipe2(err, O_CLOEXEC);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    std::vector<char*> argv;
    std::string bin = SANDFENCE_BIN;
    argv.push_back(bin.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(250);
  }
  close(out[1]);
  close(err[1]);
  if (signal_after_ms) {
    usleep(signal_after_ms * 1000);
    kill(pid, SIGTERM);
  }
  if (signal_when_blocking) {
    for (int i = 0; i < 10000 && !BlocksTerm(pid); ++i) usleep(1000);
    kill(pid, SIGTERM);
  }
  Result r;
  if (!signal_when_exists.empty()) {
    for (int i = 0; i < 12000 && access(signal_when_exists.c_str(), F_OK) != 0;
         ++i) {
      usleep(10 * 1000);
    }
    r.signalled_after_file = access(signal_when_exists.c_str(), F_OK) == 0;
    kill(pid, SIGTERM);
  }
  r.out = ReadAll(out[0]);
  r.err = ReadAll(err[0]);
  close(out[0]);
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.pid = pid;
  return r;
}

// Whether this host lets `sandfence run` confine a command: a new PID and
// mount namespace, a private mount tree and a fresh /proc in it (run
// refuses to start a command otherwise). Probed once, in throwaway
// children.
inline const absl::Status& HostMakesRunNamespaces() {
  static const absl::Status status = [] {
    pid_t child = fork();
    if (child == 0) {
      if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) _exit(1);
      pid_t init = fork();  // pid 1 of the new namespace
      if (init == 0) {
        if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
          _exit(2);
        }
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  nullptr) != 0) {
          _exit(3);
        }
        _exit(0);
      }
      int st = 0;
      if (init < 0 || waitpid(init, &st, 0) != init) _exit(4);
      _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 5);
    }
    int st = 0;
    if (child < 0 || waitpid(child, &st, 0) != child) {
      return absl::InternalError("could not probe namespaces (fork)");
    }
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 5;
    switch (code) {
      case 0:
        return absl::OkStatus();
      case 1:
        return absl::UnavailableError(
            "unshare(CLONE_NEWPID|CLONE_NEWNS) refused: `sandfence run` "
            "cannot confine a command here");
      case 2:
        return absl::UnavailableError("mount --make-rprivate / refused");
      case 3:
        return absl::UnavailableError("mounting a fresh /proc refused");
      default:
        return absl::InternalError("the namespace probe failed");
    }
  }();
  return status;
}

// Waits up to timeout_ms for path to exist.
inline bool WaitForFile(const std::string& path, int timeout_ms = 20000) {
  for (int i = 0; i < timeout_ms / 10; ++i) {
    if (access(path.c_str(), F_OK) == 0) return true;
    usleep(10 * 1000);
  }
  return access(path.c_str(), F_OK) == 0;
}

// A procfs of the host's PID namespace mounted where a sandbox sees it (as
// a container that binds the host's /proc would): `sandfence run` gives the
// command a /proc of its own PID namespace, which shows nothing outside.
class HostProcMount {
 public:
  HostProcMount() : path_(absl::StrCat("/tmp/sandfence-hostproc-", getpid())) {
    mkdir(path_.c_str(), 0755);
    if (mount("proc", path_.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
      error_ = absl::StrCat("mount proc at ", path_, ": ", strerror(errno));
    }
  }
  ~HostProcMount() {
    if (error_.empty()) umount2(path_.c_str(), MNT_DETACH);
    rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }  // empty: mounted

 private:
  std::string path_, error_;
};

// `sandfence run` loads the egress programs in every mode: on a kernel that
// cannot run them, every run is refused, and the cases that run a command
// skip with the reason. So do they where run cannot confine a command in
// its own namespaces (it refuses then).
#define REQUIRE_KERNEL_FOR_RUN()                      \
  do {                                                \
    SANDFENCE_REQUIRE_HOST(HostKernelRunsEgress());   \
    SANDFENCE_REQUIRE_HOST(HostMakesRunNamespaces()); \
  } while (0)

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_RUN_RUN_FIXTURE_H_
