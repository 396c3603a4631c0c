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
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "confine/confine.h"
#include "confine/socket_supervisor.h"

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
  kStageMountPrivate,
  kStageMountProc,
  kStageSignals,
  kStageInitFork,
  kStageSession,
  kStageNetns,
  kStageDetach,
  kStageHide,
  kStageSocketFilter,
  // kStageConfine + ConfineStep: which step of ApplyConfinement failed.
  kStageConfine = 100,
};

const char* StageName(int stage) {
  if (stage > kStageConfine) {
    // Static strings only; the parent formats them.
    switch (stage - kStageConfine) {
      case kConfineStepNoNewPrivs:
        return "confine the command (no_new_privs)";
      case kConfineStepCapabilities:
        return "confine the command (drop the capabilities that read past "
               "Landlock)";
      case kConfineStepLandlock:
        return "confine the command (Landlock)";
      case kConfineStepSeccomp:
        return "confine the command (seccomp)";
    }
    return "confine the command";
  }
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
    case kStageMountPrivate:
      return "make the sandbox's mounts private (mount --make-rprivate /)";
    case kStageMountProc:
      return "mount a /proc of the sandbox's own PID namespace";
    case kStageSignals:
      return "set up the sandbox's init to forward signals";
    case kStageInitFork:
      return "start the command under the sandbox's init";
    case kStageSession:
      return "give the sandbox a session of its own";
    case kStageNetns:
      return "join the sandbox's network namespace";
    case kStageDetach:
      return "detach a special file system from the sandbox's mounts";
    case kStageHide:
      return "hide sandfence's own directories from the sandbox";
    case kStageSocketFilter:
      return "install the socket-family filter and hand its listener over "
             "(a seccomp listener already in this process's filters?)";
  }
  return "start the command";
}

// Runs in the child, between clone3 and exec: only async-signal-safe calls.
// pipe_fd -1: the command runs in place (ExecInPlace), with nobody to read
// a pipe: the failure goes to stderr instead.
[[noreturn]] void Fail(int pipe_fd, int stage) {
  const int err = errno;
  if (pipe_fd < 0) {
    const char* what = StageName(stage);
    const char* why = ::strerror(err);
    struct iovec parts[] = {
        {const_cast<char*>("sandfence: could not "), 21},
        {const_cast<char*>(what), std::strlen(what)},
        {const_cast<char*>(": "), 2},
        {const_cast<char*>(why), std::strlen(why)},
        {const_cast<char*>("\n"), 1},
    };
    ssize_t ignored = ::writev(2, parts, 5);
    (void)ignored;
    ::_exit(127);
  }
  ChildError e{stage, err};
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

// What the child needs between clone3 and exec, prepared before clone3.
struct ChildPlan {
  const SpawnOptions* options;
  const char* exe;
  char* const* argv;
  gid_t gid;
  int error_fd;      // the pipe that reports a failure before exec
  pid_t parent;      // our pid, in the parent's namespace
  int parent_pidfd;  // with pid_namespace: readable once the parent died
  int listener_channel;  // with socket_filter: where its listener goes
};

// In place (ExecInPlace): the supervisor that took the listener answers
// "ok", or the exit code this process takes and why; nothing of the
// command runs before.
void AwaitSupervisor(const SpawnOptions& options) {
  char reply[512];
  ssize_t n;
  do {
    n = ::recv(options.socket_supervisor_channel, reply, sizeof(reply) - 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n == 2 && std::memcmp(reply, "ok", 2) == 0) return;
  if (n <= 0) {
    static const char kGone[] =
        "sandfence: the daemon took no listener (it stopped?): nothing "
        "started\n";
    ssize_t ignored = ::write(2, kGone, sizeof(kGone) - 1);
    (void)ignored;
    ::_exit(kExitTempFail);
  }
  reply[n] = '\0';
  char* text = nullptr;
  const long code = std::strtol(reply, &text, 10);
  static const char kRefused[] = "sandfence: the daemon refused to supervise "
                                 "this process's socket calls: ";
  struct iovec parts[] = {
      {const_cast<char*>(kRefused), sizeof(kRefused) - 1},
      {text, std::strlen(text)},
      {const_cast<char*>("\n"), 1},
  };
  ssize_t ignored = ::writev(2, parts, 3);
  (void)ignored;
  ::_exit(code > 0 && code < 126 ? static_cast<int>(code) : kExitSoftware);
}

// Caps, credentials, descriptors, exec. under_init: the caller is the init
// of the sandbox's PID namespace, which holds the parent-death signal.
[[noreturn]] void ExecCommand(const ChildPlan& plan, bool under_init) {
  const SpawnOptions& options = *plan.options;
  const int fd = plan.error_fd;
  // The parent (or init) may block signals it forwards; the command must
  // not inherit that mask.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (options.new_netns && !under_init && BringUpLoopback() != 0) {
    Fail(fd, kStageLoopback);
  }
  if (options.drop_privileges && DropCapabilities() != 0) {
    Fail(fd, kStageCaps);
  }
  // Raw system calls: glibc's wrappers synchronize credentials across the
  // parent's threads, which do not exist in this child.
  if (options.uid) {
    if (::syscall(SYS_setgroups, 0, nullptr) != 0) Fail(fd, kStageGroups);
    if (::syscall(SYS_setresgid, plan.gid, plan.gid, plan.gid) != 0) {
      Fail(fd, kStageGid);
    }
    if (::syscall(SYS_setresuid, *options.uid, *options.uid, *options.uid) !=
        0) {
      Fail(fd, kStageUid);
    }
  }
  if (options.drop_privileges &&
      ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    Fail(fd, kStageNoNewPrivs);
  }
  // After the uid change: changing credentials clears the death signal.
  // Under init the command needs none: when init exits, the kernel kills
  // every process of its namespace.
  if (options.kill_with_parent && !under_init) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
      Fail(fd, kStageDeathSig);
    }
    // The parent may have died before the death signal was armed.
    if (::getppid() != plan.parent) ::_exit(137);
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
  // Last: seccomp must not refuse anything above, and nothing of the
  // command's runs before it holds.
  if (options.confinement != nullptr) {
    int step = 0;
    if (const int rc = ApplyConfinement(*options.confinement, &step);
        rc != 0) {
      errno = -rc;
      Fail(fd, kStageConfine + step);
    }
  }
  // After the guard's filter: its refusals (the 32-bit entry, say) take
  // precedence over a notification. The listener leaves before exec.
  if (options.socket_filter != nullptr) {
    const int listener = confine::InstallSocketFamilyFilter(
        *options.socket_filter);
    if (listener < 0) {
      errno = -listener;
      Fail(fd, kStageSocketFilter);
    }
    if (const int rc = confine::SendFd(plan.listener_channel, listener);
        rc != 0) {
      errno = -rc;
      Fail(fd, kStageSocketFilter);
    }
    ::close(listener);
    if (options.socket_supervisor_channel >= 0) AwaitSupervisor(options);
  }
  ::execve(plan.exe, plan.argv, environ);
  Fail(fd, kStageExec);
}

void IgnoreSignal(int) {}

// pid 1 of the sandbox's new PID namespace (and new mount namespace): a
// /proc that shows only the sandbox's processes, then the command as its
// only child. It forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to the
// command, reaps orphans, and exits with the command's status (its exit
// code, or 128+N for signal N). When it exits, the kernel kills whatever
// is left in the namespace. Nothing inside can signal it: the kernel drops
// SIGKILL and SIGSTOP sent to a namespace's init from inside.
[[noreturn]] void RunInit(const ChildPlan& plan) {
  const SpawnOptions& options = *plan.options;
  const int fd = plan.error_fd;
  if (options.kill_with_parent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
      Fail(fd, kStageDeathSig);
    }
    struct pollfd parent_gone = {plan.parent_pidfd, POLLIN, 0};
    if (::poll(&parent_gone, 1, 0) != 0) ::_exit(137);
  }
  if (options.new_netns && BringUpLoopback() != 0) Fail(fd, kStageLoopback);
  // Our mounts must not propagate back to the host's namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    Fail(fd, kStageMountPrivate);
  }
  // Deepest first (the caller sorts them): a parent's detach would take
  // its children along, and theirs would then fail.
  for (const std::string& m : options.detach_mounts) {
    if (::umount2(m.c_str(), MNT_DETACH) != 0 && errno != EINVAL &&
        errno != ENOENT) {
      Fail(fd, kStageDetach);
    }
  }
  for (const std::string& h : options.hide_paths) {
    if (::mount("sandfence-hidden", h.c_str(), "tmpfs",
                MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                "size=4k,nr_inodes=1,mode=0555") != 0 &&
        errno != ENOENT) {
      Fail(fd, kStageHide);
    }
  }
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
    Fail(fd, kStageMountProc);
  }
  // A namespace's init gets only the signals it has a handler for (from
  // outside its namespace too): handlers, then the signals wait, blocked,
  // for sigwaitinfo.
  sigset_t waited;
  sigemptyset(&waited);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD}) {
    sigaddset(&waited, s);
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = IgnoreSignal;
    if (::sigaction(s, &sa, nullptr) != 0) Fail(fd, kStageSignals);
  }
  if (::sigprocmask(SIG_SETMASK, &waited, nullptr) != 0) {
    Fail(fd, kStageSignals);
  }
  // Our own session and process group: the command inherits the caller's
  // otherwise, and kill(0) or a terminal's signals reach every member of
  // a group, in whatever PID namespace. Nothing outside is in ours.
  if (::setsid() < 0) Fail(fd, kStageSession);
  struct clone_args args;
  std::memset(&args, 0, sizeof(args));
  args.exit_signal = SIGCHLD;
  const long command = ::syscall(SYS_clone3, &args, sizeof(args));
  if (command < 0) Fail(fd, kStageInitFork);
  if (command == 0) {
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD}) {
      ::sigaction(s, &dfl, nullptr);
    }
    ExecCommand(plan, /*under_init=*/true);
  }
  // init keeps no descriptor of ours: not sandfence's maps and links, not
  // the error pipe (the command's copy closes at exec), not stdio.
  ::syscall(SYS_close_range, 0, ~0U, 0);
  for (;;) {
    siginfo_t info;
    const int sig = ::sigwaitinfo(&waited, &info);
    if (sig < 0) continue;
    if (sig != SIGCHLD) {
      ::kill(static_cast<pid_t>(command), sig);
      continue;
    }
    int status = 0;
    pid_t reaped;
    while ((reaped = ::waitpid(-1, &status, WNOHANG)) > 0) {
      if (reaped != command) continue;
      ::_exit(WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                  : WEXITSTATUS(status));
    }
  }
}

}  // namespace

// With any of these, a root command could rewrite or detach the maps and
// links that enforce its sandbox, open packet sockets, load modules, trace
// processes around the guard, make device nodes of the host's disks, or
// starve processes outside (priorities, resource limits).
const int kDroppedCapabilities[] = {
    CAP_SYS_ADMIN,  CAP_BPF,          CAP_PERFMON,  CAP_NET_ADMIN,
    CAP_NET_RAW,    CAP_SYS_MODULE,   CAP_SYS_RAWIO, CAP_SYS_PTRACE,
    CAP_SYS_BOOT,   CAP_MAC_ADMIN,    CAP_MAC_OVERRIDE, CAP_SYSLOG,
    CAP_SYS_NICE,   CAP_SYS_RESOURCE, CAP_MKNOD,
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
  if (options.new_netns && options.netns_fd >= 0) {
    return absl::InvalidArgumentError(
        "SpawnInCgroup: new_netns and netns_fd exclude each other");
  }
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
  // The init of a new PID namespace sees no parent (getppid() is 0): it
  // learns that we died before its death signal was armed from our pidfd.
  UniqueFd parent_pidfd;
  if (options.pid_namespace) {
    parent_pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, parent, 0)));
    if (!parent_pidfd) return ErrnoError(errno, "pidfd_open of this process");
  }

  // The socket-family filter's listener comes back over this channel.
  UniqueFd channel_parent, channel_child;
  if (options.socket_filter != nullptr) {
    if (options.socket_listener == nullptr) {
      return absl::InvalidArgumentError(
          "SpawnInCgroup: socket_filter without socket_listener");
    }
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      return ErrnoError(errno, "socketpair for the seccomp listener");
    }
    channel_parent.reset(pair[0]);
    channel_child.reset(pair[1]);
  }

  struct clone_args args;
  std::memset(&args, 0, sizeof(args));
  args.flags = CLONE_INTO_CGROUP | (options.new_netns ? CLONE_NEWNET : 0) |
               (options.pid_namespace ? CLONE_NEWPID | CLONE_NEWNS : 0);
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(options.cgroup_fd);
  long pid = ::syscall(SYS_clone3, &args, sizeof(args));
  if (pid < 0) {
    return ErrnoError(
        errno, options.pid_namespace
                   ? "clone3(CLONE_INTO_CGROUP) into the sandbox with a new "
                     "PID and mount namespace (this host cannot make them: "
                     "the command is not started unconfined)"
                   : "clone3(CLONE_INTO_CGROUP) into the sandbox");
  }
  if (pid == 0) {
    ChildPlan plan{&options,       exe->c_str(),        argv.data(),
                   gid,            write_end.get(),     parent,
                   parent_pidfd.get(), channel_child.get()};
    // Before anything of the command's: it never runs in the host's.
    if (options.netns_fd >= 0 &&
        ::syscall(SYS_setns, options.netns_fd, CLONE_NEWNET) != 0) {
      Fail(write_end.get(), kStageNetns);
    }
    if (options.pid_namespace) RunInit(plan);
    ExecCommand(plan, /*under_init=*/false);
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
  if (options.socket_filter != nullptr) {
    // Sent before exec, which the pipe's end said happened.
    absl::StatusOr<UniqueFd> listener = confine::ReceiveFd(channel_parent.get());
    if (!listener.ok()) {
      ::kill(static_cast<pid_t>(pid), SIGKILL);
      int status;
      ::waitpid(static_cast<pid_t>(pid), &status, 0);
      return listener.status();
    }
    *options.socket_listener = *std::move(listener);
  }
  return static_cast<pid_t>(pid);
}

absl::Status ExecInPlace(const SpawnOptions& options) {
  if (options.argv.empty()) return Malformed("no command to run");
  if (options.pid_namespace || options.new_netns) {
    return absl::InvalidArgumentError(
        "ExecInPlace makes no namespace (the command replaces this process)");
  }
  absl::StatusOr<std::string> exe = FindExecutable(options.argv[0]);
  if (!exe.ok()) return exe.status();
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
  // Into the sandbox first: from here on every hook of it judges this
  // process (all its threads: cgroup.procs moves the thread group).
  if (options.cgroup_fd >= 0) {
    UniqueFd procs(::openat(options.cgroup_fd, "cgroup.procs",
                            O_WRONLY | O_CLOEXEC));
    if (!procs || ::write(procs.get(), "0", 1) != 1) {
      return ErrnoError(errno, "join the sandbox's cgroup (cgroup.procs)");
    }
  }
  if (options.netns_fd >= 0 &&
      ::syscall(SYS_setns, options.netns_fd, CLONE_NEWNET) != 0) {
    return ErrnoError(errno, "join the sandbox's network namespace");
  }
  if (options.socket_filter != nullptr &&
      options.socket_supervisor_channel < 0) {
    return absl::InvalidArgumentError(
        "ExecInPlace has nobody to hold the socket-family filter's listener");
  }
  SpawnOptions in_place = options;
  in_place.kill_with_parent = false;
  ChildPlan plan{&in_place,
                 exe->c_str(),
                 argv.data(),
                 gid,
                 /*error_fd=*/-1,
                 /*parent=*/0,
                 /*parent_pidfd=*/-1,
                 /*listener_channel=*/options.socket_supervisor_channel};
  // Only this thread's credentials change, and execve ends every other
  // thread: the command starts with them all.
  ExecCommand(plan, /*under_init=*/false);
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
