#include "egress/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <net/if.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "common/unique_fd.h"

extern char** environ;

namespace sandfence {
namespace {

// What the child reports through the pipe when it fails before exec.
struct ChildError {
  int stage;
  int err;
};

enum Stage {
  kStageDeathSig = 1,
  kStageLoopback,
  kStageCaps,
  kStageGroups,
  kStageGid,
  kStageUid,
  kStageNoNewPrivs,
  kStageFds,
  kStageExec,
};

const char* StageName(int stage) {
  switch (stage) {
    case kStageDeathSig:
      return "set the parent-death signal";
    case kStageLoopback:
      return "bring up loopback in the private network namespace";
    case kStageCaps:
      return "drop the capabilities a sandbox must not have";
    case kStageNoNewPrivs:
      return "set no_new_privs";
    case kStageFds:
      return "close inherited file descriptors";
    case kStageGroups:
      return "clear supplementary groups";
    case kStageGid:
      return "set the group id";
    case kStageUid:
      return "set the user id";
    case kStageExec:
      return "execute the command";
  }
  return "start the command";
}

// Runs in the child, between clone3 and exec: only async-signal-safe calls.
[[noreturn]] void Fail(int pipe_fd, int stage) {
  ChildError e{stage, errno};
  ssize_t ignored = ::write(pipe_fd, &e, sizeof(e));
  (void)ignored;
  ::_exit(127);
}

int BringUpLoopback() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  struct ifreq ifr;
  std::memset(&ifr, 0, sizeof(ifr));
  std::memcpy(ifr.ifr_name, "lo", 3);
  int rc = ::ioctl(s, SIOCGIFFLAGS, &ifr);
  if (rc == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    rc = ::ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  ::close(s);
  return rc;
}

// Removes kDroppedCapabilities from the bounding, permitted, effective,
// inheritable and ambient sets. Raw system calls only: this runs between
// clone3 and exec.
int DropCapabilities() {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  if (::syscall(SYS_capget, &header, data) != 0) return -1;
  for (int i = 0; i < kDroppedCapabilitiesCount; ++i) {
    const int cap = kDroppedCapabilities[i];
    // EINVAL: a capability this kernel does not know; nothing to drop.
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      return -1;
    }
    ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, cap, 0, 0);
    const unsigned bit = 1u << (cap % 32);
    data[cap / 32].effective &= ~bit;
    data[cap / 32].permitted &= ~bit;
    data[cap / 32].inheritable &= ~bit;
  }
  return static_cast<int>(::syscall(SYS_capset, &header, data));
}

}  // namespace

// With any of these, a root command could rewrite or detach the maps and
// links that enforce its sandbox, open packet sockets, load modules, or
// trace processes around the guard.
const int kDroppedCapabilities[] = {
    CAP_SYS_ADMIN, CAP_BPF,      CAP_PERFMON,    CAP_NET_ADMIN,
    CAP_NET_RAW,   CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_PTRACE,
    CAP_SYS_BOOT,  CAP_MAC_ADMIN, CAP_MAC_OVERRIDE, CAP_SYSLOG,
};
const int kDroppedCapabilitiesCount =
    sizeof(kDroppedCapabilities) / sizeof(kDroppedCapabilities[0]);

absl::StatusOr<std::string> FindExecutable(const std::string& name) {
  if (name.empty()) return Malformed("empty command");
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) != 0) {
      return ErrnoError(errno, absl::StrCat("command \"", name, "\""));
    }
    return name;
  }
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(
      absl::StrCat("command \"", name, "\" not found in PATH"));
}

absl::StatusOr<pid_t> SpawnInCgroup(const SpawnOptions& options) {
  if (options.cgroup_fd < 0) {
    return absl::InvalidArgumentError("SpawnInCgroup needs a cgroup");
  }
  if (options.argv.empty()) return Malformed("no command to run");
  absl::StatusOr<std::string> exe = FindExecutable(options.argv[0]);
  if (!exe.ok()) return exe.status();

  // Everything the child needs is prepared here: after clone3 the child may
  // only make async-signal-safe calls.
  std::vector<char*> argv;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  gid_t gid = 0;
  if (options.uid) {
    gid = *options.uid;
    if (options.gid) {
      gid = *options.gid;
    } else if (struct passwd* pw = ::getpwuid(*options.uid)) {
      gid = pw->pw_gid;
    }
  }

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2");
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  const pid_t parent = ::getpid();

  struct clone_args args;
  std::memset(&args, 0, sizeof(args));
  args.flags = CLONE_INTO_CGROUP | (options.new_netns ? CLONE_NEWNET : 0);
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(options.cgroup_fd);
  long pid = ::syscall(SYS_clone3, &args, sizeof(args));
  if (pid < 0) {
    return ErrnoError(errno, "clone3(CLONE_INTO_CGROUP) into the sandbox");
  }
  if (pid == 0) {
    const int fd = write_end.get();
    // The parent may block signals it forwards; the command must not
    // inherit that mask.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.new_netns && BringUpLoopback() != 0) Fail(fd, kStageLoopback);
    if (options.drop_privileges && DropCapabilities() != 0) {
      Fail(fd, kStageCaps);
    }
    // Raw system calls: glibc's wrappers synchronize credentials across the
    // parent's threads, which do not exist in this child.
    if (options.uid) {
      if (::syscall(SYS_setgroups, 0, nullptr) != 0) Fail(fd, kStageGroups);
      if (::syscall(SYS_setresgid, gid, gid, gid) != 0) Fail(fd, kStageGid);
      if (::syscall(SYS_setresuid, *options.uid, *options.uid,
                    *options.uid) != 0) {
        Fail(fd, kStageUid);
      }
    }
    if (options.drop_privileges &&
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      Fail(fd, kStageNoNewPrivs);
    }
    // After the uid change: changing credentials clears the death signal.
    if (options.kill_with_parent) {
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
        Fail(fd, kStageDeathSig);
      }
      // The parent may have died before the death signal was armed.
      if (::getppid() != parent) ::_exit(137);
    }
    // Sockets the caller left open belong to the caller's cgroup: no hook
    // would judge them. Everything past stderr closes at exec (the error
    // pipe too, which is how the parent learns exec worked).
    if (::syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
      Fail(fd, kStageFds);
    }
    for (int keep : options.keep_fds) {
      if (keep != fd && ::fcntl(keep, F_SETFD, 0) != 0) Fail(fd, kStageFds);
    }
    ::execve(exe->c_str(), argv.data(), environ);
    Fail(fd, kStageExec);
  }

  write_end.reset();
  ChildError e{};
  ssize_t n;
  do {
    n = ::read(read_end.get(), &e, sizeof(e));
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof(e))) {
    int status;
    ::waitpid(static_cast<pid_t>(pid), &status, 0);
    return ErrnoError(e.err, absl::StrCat("could not ", StageName(e.stage),
                                          " for \"", options.argv[0], "\""));
  }
  return static_cast<pid_t>(pid);
}

absl::StatusOr<int> WaitForExit(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return ErrnoError(errno, absl::StrCat("waitpid ", pid));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 128;
}

}  // namespace sandfence
