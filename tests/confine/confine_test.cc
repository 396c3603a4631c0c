// Confinement on the running kernel: a forked child applies a prepared
// confinement and then tries each attack, reporting the outcome through a
// pipe. The victims are outside the child's Landlock domain: the test
// process itself (root) and a helper process of the attacker's own uid,
// started before the attacker (so that file permissions and ptrace's uid
// rules would let an unconfined attacker in: every denial below is the
// confinement's, and the control column shows the same call unconfined).
//
// Each row runs as root (all capabilities but what ApplyConfinement drops)
// and as nobody (65534). The table is the specification: what a sandboxed
// process can and cannot do on this kernel, exactly.
#include "confine/confine.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/kcmp.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <pthread.h>
#include <pty.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/cgroup.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "support/host_probe.h"
#include "support/test_files.h"

extern char** environ;

namespace sandfence {
namespace {

// Outcomes besides errno values (0: the call did what it asked).
constexpr int kOk = 0;
constexpr int kNotDelivered = -1;  // sent "successfully", never arrived
constexpr int kEmpty = -2;         // listed, but nothing was there
constexpr int kChildDied = -3;
constexpr int kApplyFailed = -4;
constexpr int kNotRun = -5;  // expectation: this row does not run for them
constexpr int kSetupFailed = -6;

std::string CodeName(int code) {
  switch (code) {
    case kOk:
      return "ok";
    case kNotDelivered:
      return "not delivered";
    case kEmpty:
      return "empty";
    case kChildDied:
      return "child died";
    case kApplyFailed:
      return "ApplyConfinement failed";
    case kNotRun:
      return "not run";
    case kSetupFailed:
      return "setup failed";
  }
  const char* name = strerrorname_np(code);
  return name != nullptr ? name : absl::StrCat("errno ", code);
}

int ErrnoOf(long rc) { return rc < 0 ? errno : kOk; }

// Shared with the victims: what signals reached them.
struct Counters {
  std::atomic<int> urg[2];  // the victims of root and of nobody
  std::atomic<int> parent_urg;
};
Counters* g_counters = nullptr;
std::atomic<int>* g_my_counter = nullptr;
void CountUrg(int) {
  if (g_my_counter != nullptr) g_my_counter->fetch_add(1);
}

enum Who { kRoot = 0, kNobody = 1 };
constexpr uid_t kNobodyUid = 65534;

// Read by process_vm_readv: the same address in every fork of this process.
char g_secret[16] = "sandfence-rules";

enum class PlanId {
  kDefault,
  kHidden,
  kHiddenStrict,
  kIoUring,
  kNoPtrace,
  kKeepCaps
};

// Everything an attack needs to name, made before any attacker starts.
struct Env {
  Who who = kRoot;
  uid_t uid = 0;
  pid_t victim = -1;  // the attacker's uid, outside the domain
  pid_t parent = -1;  // this test process: root, outside the domain
  std::atomic<int>* victim_urg = nullptr;
  std::string cgroup_procs;     // of the cgroup2 root: never hard-coded
  std::string base;             // the test's directory under /tmp
  std::string hidden;           // a no_access directory in it
  std::string secret;           // a file in hidden
  std::string scratch;          // a sibling of hidden, writable
  std::string hidden_sock;      // a listening socket file in hidden
  std::string abstract_stream;  // this process's abstract listeners
  std::string abstract_dgram;
  std::string block_device;  // the first under /dev, if any
};

using Attack = std::function<int(const Env&)>;

int BecomeUser(uid_t uid) {
  if (uid == 0) return 0;
  if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
      ::setresuid(uid, uid, uid) != 0) {
    return -1;
  }
  // Changing uid made us non-dumpable, which ptrace's rules refuse
  // regardless of Landlock: an exec'd program would be dumpable again.
  return ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

pid_t StartVictim(uid_t uid, std::atomic<int>* counter) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    g_my_counter = counter;
    struct sigaction sa {};
    sa.sa_handler = CountUrg;
    ::sigaction(SIGURG, &sa, nullptr);
    if (BecomeUser(uid) != 0) ::_exit(1);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    char c = 'r';
    ssize_t ignored = ::write(p[1], &c, 1);
    (void)ignored;
    for (;;) ::pause();
  }
  ::close(p[1]);
  char c = 0;
  const bool ready = ::read(p[0], &c, 1) == 1;
  ::close(p[0]);
  return ready ? pid : -1;
}

// Runs `attack` in a child of `uid`, confined by `prepared` (unconfined
// when null). Returns the attack's outcome.
int RunChild(const PreparedConfinement* prepared, const Env& env,
             const Attack& attack, std::function<int()> before = nullptr) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return kSetupFailed;
  std::cout.flush();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(20);
    ::close(p[0]);
    int code = kSetupFailed;
    if (BecomeUser(env.uid) == 0 && (!before || before() == 0)) {
      code = kOk;
      if (prepared != nullptr && ApplyConfinement(*prepared) != 0) {
        code = kApplyFailed;
      }
      if (code == kOk) code = attack(env);
    }
    ssize_t ignored = ::write(p[1], &code, sizeof(code));
    (void)ignored;
    ::_exit(0);
  }
  ::close(p[1]);
  int code = kChildDied;
  ssize_t n;
  do {
    n = ::read(p[0], &code, sizeof(code));
  } while (n < 0 && errno == EINTR);  // a SIGURG the control row sent us
  if (n != sizeof(code)) code = kChildDied;
  ::close(p[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return code;
}

// --- attacks -------------------------------------------------------------

// A signal that "succeeded" proves nothing until it arrives: waits a little
// for the victim's handler.
int Delivered(std::atomic<int>* counter, int before) {
  for (int i = 0; i < 20; ++i) {
    if (counter->load() != before) return kOk;
    ::usleep(5000);
  }
  return kNotDelivered;
}

Attack SignalVictim(std::function<long(const Env&)> send) {
  return [send](const Env& env) {
    const int before = env.victim_urg->load();
    const long rc = send(env);
    if (rc < 0) return errno;
    return Delivered(env.victim_urg, before);
  };
}

int OpenPidfd(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

// Opens /proc/<victim>/<file> and reads from it: the first failure's
// errno. 8 bytes (pagemap reads whole entries); mem at an address the
// victim has mapped (g_secret, where every fork of us has it).
Attack ReadProc(std::string file, bool parent = false) {
  return [file, parent](const Env& env) {
    const std::string path =
        absl::StrCat("/proc/", parent ? env.parent : env.victim, "/", file);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return errno;
    char buf[8];
    const off_t at =
        file == "mem"
            ? static_cast<off_t>(reinterpret_cast<uintptr_t>(g_secret))
            : 0;
    return ErrnoOf(::pread(fd.get(), buf, sizeof(buf), at));
  };
}

// Opens /proc/<rel> and reads from it.
Attack ReadProcPath(std::string rel) {
  return [rel](const Env&) {
    UniqueFd fd(
        ::open(absl::StrCat("/proc/", rel).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return errno;
    char buf[8];
    return ErrnoOf(::read(fd.get(), buf, sizeof(buf)));
  };
}

Attack ReadlinkProc(std::string file) {
  return [file](const Env& env) {
    const std::string path = absl::StrCat("/proc/", env.victim, "/", file);
    char buf[256];
    return ErrnoOf(::readlink(path.c_str(), buf, sizeof(buf)));
  };
}

Attack ListProc(std::string dir) {
  return [dir](const Env& env) {
    const std::string path = absl::StrCat("/proc/", env.victim, "/", dir);
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return errno;
    int n = 0;
    errno = 0;
    while (struct dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        ++n;
    }
    const int err = errno;
    ::closedir(d);
    if (err != 0) return err;
    return n == 0 ? kEmpty : kOk;
  };
}

Attack OpenPath(std::function<std::string(const Env&)> path, int flags) {
  return [path, flags](const Env& env) {
    UniqueFd fd(::open(path(env).c_str(), flags | O_CLOEXEC, 0644));
    return fd ? kOk : errno;
  };
}

int WaitStatus(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0) return errno;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? kOk : ECHILD;
}

int Spawn(std::vector<const char*> argv) {
  argv.push_back(nullptr);
  pid_t pid;
  const int rc = ::posix_spawn(&pid, argv[0], nullptr, nullptr,
                               const_cast<char* const*>(argv.data()), environ);
  if (rc != 0) return rc;
  return WaitStatus(pid);
}

int PtraceOwnChild() {
  const pid_t child = ::fork();
  if (child == 0) {
    for (;;) ::pause();
  }
  int code = ErrnoOf(::ptrace(PTRACE_ATTACH, child, nullptr, nullptr));
  if (code == kOk) {
    int status;
    ::waitpid(child, &status, __WALL);
    ::ptrace(PTRACE_DETACH, child, nullptr, nullptr);
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return code;
}

int ConnectUnix(const std::string& name, int type, bool send_only = false) {
  UniqueFd s(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  if (!s) return errno;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, name.data(), name.size());
  const socklen_t len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  if (send_only) {
    return ErrnoOf(
        ::sendto(s.get(), "x", 1, 0, reinterpret_cast<sockaddr*>(&addr), len));
  }
  return ErrnoOf(::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), len));
}

UniqueFd ListenUnix(const std::string& name, int type) {
  UniqueFd s(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, name.data(), name.size());
  const socklen_t len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  if (!s || ::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return UniqueFd();
  }
  if (type == SOCK_STREAM && ::listen(s.get(), 64) != 0) return UniqueFd();
  return s;
}

long Int80Getpid() {
  long ret;
  __asm__ volatile("int $0x80"
                   : "=a"(ret)
                   : "a"(20L)
                   : "memory", "r8", "r9", "r10", "r11");
  return ret;
}

// Makes a new pty our controlling terminal (before the confinement, as a
// terminal a sandboxed shell inherits).
int g_tty = -1;
int TakeTerminal() {
  int master, slave;
  if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) return -1;
  if (::setsid() < 0) return -1;
  if (::ioctl(slave, TIOCSCTTY, 0) != 0) return -1;
  g_tty = slave;
  return 0;
}

// --- the table -------------------------------------------------------------

enum Need {
  kNeedNothing,
  kNeedInt80,
  kNeedIoUring,
  kNeedYama,
  kNeedBlockDevice,
  kNeedUserfaultfdDevice,
};

struct Expect {
  int root;
  int nobody;
};

struct Row {
  std::string name;
  PlanId plan;
  Attack attack;
  Expect confined;
  Expect control;  // the same call unconfined; kNotRun where it would harm
  Need need = kNeedNothing;
  std::function<int()> before = nullptr;  // setup in the child, unconfined
};

constexpr Expect kBoth(int code) { return {code, code}; }
constexpr Expect kNoControl = {kNotRun, kNotRun};

std::vector<Row> Rows() {
  std::vector<Row> rows;
  const auto add = [&rows](Row r) { rows.push_back(std::move(r)); };
  using P = PlanId;

  // Signals out of the sandbox: Landlock's signal scope (ABI 6).
  add({"kill_victim", P::kDefault,
       SignalVictim([](const Env& e) { return ::kill(e.victim, SIGURG); }),
       kBoth(EPERM), kBoth(kOk)});
  add({"kill_victim_signal_0", P::kDefault,
       [](const Env& e) { return ErrnoOf(::kill(e.victim, 0)); }, kBoth(EPERM),
       kBoth(kOk)});
  add({"tgkill_victim", P::kDefault, SignalVictim([](const Env& e) {
         return ::syscall(SYS_tgkill, e.victim, e.victim, SIGURG);
       }),
       kBoth(EPERM), kBoth(kOk)});
  add({"tkill_victim", P::kDefault, SignalVictim([](const Env& e) {
         return ::syscall(SYS_tkill, e.victim, SIGURG);
       }),
       kBoth(EPERM), kBoth(kOk)});
  add({"rt_sigqueueinfo_victim", P::kDefault, SignalVictim([](const Env& e) {
         siginfo_t info{};
         info.si_signo = SIGURG;
         info.si_code = SI_QUEUE;
         info.si_pid = ::getpid();
         info.si_uid = ::getuid();
         return ::syscall(SYS_rt_sigqueueinfo, e.victim, SIGURG, &info);
       }),
       kBoth(EPERM), kBoth(kOk)});
  add({"pidfd_send_signal_victim", P::kDefault,
       SignalVictim([](const Env& e) -> long {
         UniqueFd pidfd(OpenPidfd(e.victim));
         if (!pidfd) return -1;
         return ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGURG, nullptr,
                          0);
       }),
       kBoth(EPERM), kBoth(kOk)});
  add({"kill_parent",
       P::kDefault,
       [](const Env& e) { return ErrnoOf(::kill(e.parent, 0)); },
       kBoth(EPERM),
       {kOk, EPERM}});
  // The whole process group (the victims and this process are in ours):
  // kill() succeeds for ourselves; nothing outside may get it.
  add({"kill_process_group", P::kDefault,
       [](const Env& e) {
         ::signal(SIGURG, SIG_IGN);
         const int before = e.victim_urg->load();
         if (::kill(0, SIGURG) != 0) return errno;
         return Delivered(e.victim_urg, before);
       },
       kBoth(kNotDelivered), kBoth(kOk)});
  // kill -1: every process we may signal, on the whole host. SIGURG is
  // ignored by default everywhere; it runs only where kill(victim) was
  // refused, so an unconfined run never reaches the host.
  add({"kill_minus_1", P::kDefault,
       [](const Env& e) {
         if (::kill(e.victim, 0) == 0) return kSetupFailed;
         ::signal(SIGURG, SIG_IGN);
         const int before = e.victim_urg->load();
         const int parent_before = g_counters->parent_urg.load();
         if (::kill(-1, SIGURG) != 0) return errno;
         if (Delivered(e.victim_urg, before) == kOk) return kOk;
         return g_counters->parent_urg.load() != parent_before ? kOk
                                                               : kNotDelivered;
       },
       kBoth(kNotDelivered), kNoControl});
  // SIGIO (here SIGURG through F_SETSIG) to an owner set with F_SETOWN:
  // the kernel sends it, not a kill() the filter could see.
  add({"sigio_via_f_setown", P::kDefault,
       [](const Env& e) {
         int p[2];
         if (::pipe2(p, O_CLOEXEC) != 0) return errno;
         const int before = e.victim_urg->load();
         if (::fcntl(p[0], F_SETOWN, e.victim) != 0 ||
             ::fcntl(p[0], F_SETSIG, SIGURG) != 0 ||
             ::fcntl(p[0], F_SETFL, O_ASYNC | O_NONBLOCK) != 0) {
           return errno;
         }
         ssize_t ignored = ::write(p[1], "x", 1);
         (void)ignored;
         return Delivered(e.victim_urg, before);
       },
       kBoth(kNotDelivered), kBoth(kOk)});
  // RLIMIT_CPU on another process is a SIGKILL the kernel sends later. The
  // same values are written back: the permission check is what is tested.
  add({"prlimit_set_victim", P::kDefault,
       [](const Env& e) {
         struct rlimit64 cur;
         if (::syscall(SYS_prlimit64, e.victim, RLIMIT_CORE, nullptr, &cur) !=
             0) {
           return errno;
         }
         return ErrnoOf(
             ::syscall(SYS_prlimit64, e.victim, RLIMIT_CORE, &cur, nullptr));
       },
       kBoth(EPERM), kBoth(kOk)});
  add({"prlimit_read_victim", P::kDefault,
       [](const Env& e) {
         struct rlimit64 cur;
         return ErrnoOf(
             ::syscall(SYS_prlimit64, e.victim, RLIMIT_CORE, nullptr, &cur));
       },
       kBoth(kOk), kBoth(kOk)});
  // No layer covers priorities (documented: DoS only).
  add({"setpriority_victim", P::kDefault,
       [](const Env& e) {
         errno = 0;
         const int prio = ::getpriority(PRIO_PROCESS, e.victim);
         if (errno != 0) return errno;
         return ErrnoOf(::setpriority(PRIO_PROCESS, e.victim, prio));
       },
       kBoth(kOk), kBoth(kOk)});

  // ptrace and its relatives across the boundary: Landlock's
  // ptrace_access_check, whatever the capabilities.
  add({"ptrace_attach_victim", P::kDefault,
       [](const Env& e) {
         const int code =
             ErrnoOf(::ptrace(PTRACE_ATTACH, e.victim, nullptr, nullptr));
         if (code == kOk) {
           int status;
           ::waitpid(e.victim, &status, __WALL);
           ::ptrace(PTRACE_DETACH, e.victim, nullptr, nullptr);
         }
         return code;
       },
       kBoth(EPERM), kBoth(kOk), kNeedYama});
  add({"ptrace_seize_parent", P::kDefault,
       [](const Env& e) {
         const int code =
             ErrnoOf(::ptrace(PTRACE_SEIZE, e.parent, nullptr, nullptr));
         if (code == kOk) ::ptrace(PTRACE_DETACH, e.parent, nullptr, nullptr);
         return code;
       },
       kBoth(EPERM), kNoControl});
  add({"process_vm_readv_victim", P::kDefault,
       [](const Env& e) {
         char buf[sizeof(g_secret)];
         iovec local{buf, sizeof(buf)};
         iovec remote{g_secret, sizeof(g_secret)};
         return ErrnoOf(::process_vm_readv(e.victim, &local, 1, &remote, 1, 0));
       },
       kBoth(EPERM), kBoth(kOk)});
  add({"process_vm_writev_victim", P::kDefault,
       [](const Env& e) {
         iovec local{g_secret, sizeof(g_secret)};
         iovec remote{g_secret, sizeof(g_secret)};
         return ErrnoOf(
             ::process_vm_writev(e.victim, &local, 1, &remote, 1, 0));
       },
       kBoth(EPERM), kBoth(kOk)});
  add({"pidfd_getfd_victim", P::kDefault,
       [](const Env& e) {
         UniqueFd pidfd(OpenPidfd(e.victim));
         if (!pidfd) return errno;
         UniqueFd fd(
             static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), 0, 0)));
         return fd ? kOk : errno;
       },
       kBoth(EPERM), kBoth(kOk)});
  add({"kcmp_victim", P::kDefault,
       [](const Env& e) {
         return ErrnoOf(
             ::syscall(SYS_kcmp, ::getpid(), e.victim, KCMP_VM, 0, 0));
       },
       kBoth(EPERM), kBoth(kOk)});
  add({"process_madvise_victim",
       P::kDefault,
       [](const Env& e) {
         UniqueFd pidfd(OpenPidfd(e.victim));
         if (!pidfd) return errno;
         const long page = ::sysconf(_SC_PAGESIZE);
         iovec v{reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(g_secret) &
                                         ~static_cast<uintptr_t>(page - 1)),
                 static_cast<size_t>(page)};
         return ErrnoOf(
             ::syscall(SYS_process_madvise, pidfd.get(), &v, 1, MADV_COLD, 0));
       },
       kBoth(EPERM),
       {kOk, EPERM} /* nobody lacks CAP_SYS_NICE */});
  add({"get_robust_list_victim", P::kDefault,
       [](const Env& e) {
         void* head;
         size_t len;
         return ErrnoOf(::syscall(SYS_get_robust_list, e.victim, &head, &len));
       },
       kBoth(EPERM), kBoth(kOk)});

  // /proc/<victim>/..., exactly. Refused at open (mm_access, io's check):
  for (const char* f :
       {"environ", "mem", "maps", "smaps", "auxv", "pagemap", "io"}) {
    add({absl::StrCat("proc_read_", f), P::kDefault, ReadProc(f), kBoth(EACCES),
         kBoth(kOk)});
  }
  // Opened, refused at read (lock_trace's ptrace check):
  for (const char* f : {"syscall", "personality"}) {
    add({absl::StrCat("proc_read_", f), P::kDefault, ReadProc(f), kBoth(EPERM),
         kBoth(kOk)});
  }
  // stack needs CAP_SYS_ADMIN besides: nobody never gets it.
  add({"proc_read_stack",
       P::kDefault,
       ReadProc("stack"),
       kBoth(EACCES),
       {kOk, EACCES}});
  for (const char* f : {"cmdline", "status", "stat", "limits", "mountinfo"}) {
    add({absl::StrCat("proc_read_", f), P::kDefault, ReadProc(f), kBoth(kOk),
         kBoth(kOk)});
  }
  add({"proc_read_parent_environ",
       P::kDefault,
       ReadProc("environ", true),
       kBoth(EACCES),
       {kOk, EACCES}});
  for (const char* l : {"cwd", "root", "exe", "fd/0", "ns/net"}) {
    add({absl::StrCat("proc_readlink_", absl::StrReplaceAll(l, {{"/", "_"}})),
         P::kDefault, ReadlinkProc(l), kBoth(EACCES), kBoth(kOk)});
  }
  add({"proc_chdir_into_cwd", P::kDefault,
       [](const Env& e) {
         return ErrnoOf(
             ::chdir(absl::StrCat("/proc/", e.victim, "/cwd").c_str()));
       },
       kBoth(EACCES), kBoth(kOk)});
  add({"proc_open_fdinfo_0", P::kDefault, ReadProc("fdinfo/0"), kBoth(EACCES),
       kBoth(kOk)});
  add({"proc_open_fd_0", P::kDefault, ReadProc("fd/0"), kBoth(EACCES),
       kBoth(kOk)});
  add({"proc_read_through_root", P::kDefault, ReadProc("root/etc/hostname"),
       kBoth(EACCES), kBoth(kOk)});
  // fd/ lists the victim's fd numbers (not where they point: readlink and
  // open of fd/N are refused above).
  add({"proc_list_fd", P::kDefault, ListProc("fd"), kBoth(kOk), kBoth(kOk)});
  add({"proc_list_map_files", P::kDefault, ListProc("map_files"), kBoth(EACCES),
       kBoth(kOk)});
  add({"proc_write_victim_oom_score_adj", P::kDefault,
       OpenPath(
           [](const Env& e) {
             return absl::StrCat("/proc/", e.victim, "/oom_score_adj");
           },
           O_WRONLY),
       kBoth(EACCES), kBoth(kOk)});
  // Root keeping CAP_PERFMON/CAP_SYS_ADMIN: mm_access() lets it read past
  // Landlock, which is why ApplyConfinement drops them.
  for (const char* f : {"environ", "maps", "auxv", "pagemap"}) {
    add({absl::StrCat("keep_caps_proc_read_", f),
         P::kKeepCaps,
         ReadProc(f),
         {kOk, EACCES},
         kBoth(kOk)});
  }
  add({"keep_caps_proc_read_mem", P::kKeepCaps, ReadProc("mem"), kBoth(EACCES),
       kBoth(kOk)});
  add({"keep_caps_proc_readlink_cwd", P::kKeepCaps, ReadlinkProc("cwd"),
       kBoth(EACCES), kBoth(kOk)});

  // Abstract Unix sockets: Landlock's socket scope (ABI 6).
  add({"connect_abstract_outside", P::kDefault,
       [](const Env& e) { return ConnectUnix(e.abstract_stream, SOCK_STREAM); },
       kBoth(EPERM), kBoth(kOk)});
  add({"sendto_abstract_outside", P::kDefault,
       [](const Env& e) {
         return ConnectUnix(e.abstract_dgram, SOCK_DGRAM, /*send_only=*/true);
       },
       kBoth(EPERM), kBoth(kOk)});
  add({"connect_abstract_inside", P::kDefault,
       [](const Env& e) {
         const std::string name = absl::StrCat(
             std::string(1, '\0'), "sf-confine-inside-", ::getpid());
         UniqueFd l = ListenUnix(name, SOCK_STREAM);
         if (!l) return errno;
         return ConnectUnix(name, SOCK_STREAM);
       },
       kBoth(kOk), kBoth(kOk)});
  // Pathname sockets have no Landlock right on this kernel: a socket file
  // under a no_access directory is reachable (nobody: its mode refuses).
  add({"connect_socket_file_in_no_access",
       P::kHidden,
       [](const Env& e) { return ConnectUnix(e.hidden_sock, SOCK_STREAM); },
       {kOk, EACCES},
       {kOk, EACCES}});

  // Writes to /sys, /proc and cgroupfs.
  add({"open_cgroup_procs_for_write",
       P::kDefault,
       OpenPath([](const Env& e) { return e.cgroup_procs; }, O_WRONLY),
       kBoth(EACCES),
       {kOk, EACCES}});
  add({"mkdir_in_bpffs", P::kDefault,
       [](const Env& e) {
         const std::string d =
             absl::StrCat("/sys/fs/bpf/sf-confine-test-", ::getpid());
         const int code = ErrnoOf(::mkdir(d.c_str(), 0700));
         if (code == kOk) ::rmdir(d.c_str());
         return code;
       },
       kBoth(EACCES), kNoControl});
  // core_pattern with a pipe runs a program as root on the next crash: the
  // classic container escape. Opened for writing, never written.
  add({"open_core_pattern_for_write",
       P::kDefault,
       OpenPath([](const Env&) { return "/proc/sys/kernel/core_pattern"; },
                O_WRONLY),
       kBoth(EACCES),
       {kOk, EACCES}});
  add({"open_proc_sys_for_write",
       P::kDefault,
       OpenPath([](const Env&) { return "/proc/sys/kernel/domainname"; },
                O_WRONLY),
       kBoth(EACCES),
       {kOk, EACCES}});
  add({"write_own_oom_score_adj", P::kDefault,
       OpenPath([](const Env&) { return "/proc/self/oom_score_adj"; },
                O_WRONLY),
       kBoth(EACCES), kBoth(kOk)});

  // Raw devices: root needs no capability to open the disk beneath every
  // file rule (nobody: the node's mode refuses, confined or not).
  add({"read_raw_block_device",
       P::kDefault,
       OpenPath([](const Env& e) { return e.block_device; }, O_RDONLY),
       kBoth(EACCES),
       {kOk, EACCES},
       kNeedBlockDevice});
  add({"open_dev_userfaultfd",
       P::kDefault,
       OpenPath([](const Env&) { return "/dev/userfaultfd"; }, O_RDWR),
       kBoth(EACCES),
       {kOk, EACCES},
       kNeedUserfaultfdDevice});
  add({"mknod_char_device",
       P::kDefault,
       [](const Env& e) {
         const std::string f = absl::StrCat(e.scratch, "/null", ::getpid());
         const int code =
             ErrnoOf(::mknod(f.c_str(), S_IFCHR | 0666, makedev(1, 3)));
         if (code == kOk) ::unlink(f.c_str());
         return code;
       },
       kBoth(EACCES),
       {kOk, EPERM}});
  add({"mkfifo", P::kDefault,
       [](const Env& e) {
         const std::string f = absl::StrCat(e.scratch, "/fifo", ::getpid());
         const int code = ErrnoOf(::mkfifo(f.c_str(), 0600));
         if (code == kOk) ::unlink(f.c_str());
         return code;
       },
       kBoth(kOk), kBoth(kOk)});
  add({"read_dev_urandom", P::kDefault,
       OpenPath([](const Env&) { return "/dev/urandom"; }, O_RDONLY),
       kBoth(kOk), kBoth(kOk)});

  // A no_access directory.
  const auto secret = [](const Env& e) { return e.secret; };
  add({"read_file_in_no_access", P::kHidden, OpenPath(secret, O_RDONLY),
       kBoth(EACCES), kBoth(kOk)});
  add({"write_file_in_no_access", P::kHidden, OpenPath(secret, O_WRONLY),
       kBoth(EACCES), kBoth(kOk)});
  add({"unlink_file_in_no_access", P::kHidden,
       [](const Env& e) {
         const int code = ErrnoOf(::unlink(e.secret.c_str()));
         if (code == kOk) {  // put it back for the next row
           std::ofstream(e.secret) << "secret";
         }
         return code;
       },
       kBoth(EACCES), kNoControl});
  add({"rename_out_of_no_access", P::kHidden,
       [](const Env& e) {
         const std::string to = e.scratch + "/stolen";
         const int code = ErrnoOf(::rename(e.secret.c_str(), to.c_str()));
         if (code == kOk) ::rename(to.c_str(), e.secret.c_str());
         return code;
       },
       kBoth(EACCES), kNoControl});
  add({"hard_link_out_of_no_access", P::kHidden,
       [](const Env& e) {
         const std::string to = absl::StrCat(e.scratch, "/ln", ::getpid());
         const int code = ErrnoOf(::link(e.secret.c_str(), to.c_str()));
         if (code == kOk) ::unlink(to.c_str());
         return code;
       },
       kBoth(EXDEV), kBoth(kOk)});
  add({"symlink_into_no_access", P::kHidden,
       [](const Env& e) {
         const std::string ln = absl::StrCat(e.scratch, "/sl", ::getpid());
         if (::symlink(e.secret.c_str(), ln.c_str()) != 0) return errno;
         UniqueFd fd(::open(ln.c_str(), O_RDONLY | O_CLOEXEC));
         const int code = fd ? kOk : errno;
         ::unlink(ln.c_str());
         return code;
       },
       kBoth(EACCES), kBoth(kOk)});
  add({"open_by_handle_in_no_access", P::kHidden,
       [](const Env& e) {
         struct {
           file_handle h;
           unsigned char bytes[128];
         } fh{};
         fh.h.handle_bytes = sizeof(fh.bytes);
         int mount_id;
         return ErrnoOf(::name_to_handle_at(AT_FDCWD, e.secret.c_str(), &fh.h,
                                            &mount_id, 0));
       },
       kBoth(EPERM), kBoth(kOk)});
  add({"stat_file_in_no_access", P::kHidden,
       [](const Env& e) {
         struct stat st;
         return ErrnoOf(::stat(e.secret.c_str(), &st));
       },
       kBoth(kOk), kBoth(kOk)});
  add({"list_no_access", P::kHidden,
       [](const Env& e) {
         DIR* d = ::opendir(e.hidden.c_str());
         if (d == nullptr) return errno;
         ::closedir(d);
         return kOk;
       },
       kBoth(kOk), kBoth(kOk)});
  add({"list_no_access_strict", P::kHiddenStrict,
       [](const Env& e) {
         DIR* d = ::opendir(e.hidden.c_str());
         if (d == nullptr) return errno;
         ::closedir(d);
         return kOk;
       },
       kBoth(EACCES), kBoth(kOk)});
  add({"list_root_strict", P::kHiddenStrict,
       [](const Env&) {
         DIR* d = ::opendir("/");
         if (d == nullptr) return errno;
         ::closedir(d);
         return kOk;
       },
       kBoth(EACCES), kBoth(kOk)});
  add({"create_beside_no_access", P::kHidden,
       [](const Env& e) {
         const std::string f = e.base + "/beside";
         UniqueFd fd(::open(f.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
         if (!fd) return errno;
         ::unlink(f.c_str());
         return kOk;
       },
       kBoth(EACCES), kBoth(kOk)});
  add({"write_in_scratch_beside_no_access", P::kHidden,
       [](const Env& e) {
         const std::string f = absl::StrCat(e.scratch, "/w", ::getpid());
         UniqueFd fd(::open(f.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
         if (!fd) return errno;
         const int code = ErrnoOf(::write(fd.get(), "x", 1));
         ::unlink(f.c_str());
         return code;
       },
       kBoth(kOk), kBoth(kOk)});
  add({"list_root_listable", P::kHidden,
       [](const Env&) {
         DIR* d = ::opendir("/");
         if (d == nullptr) return errno;
         ::closedir(d);
         return kOk;
       },
       kBoth(kOk), kBoth(kOk)});
  add({"exec_true_with_no_access", P::kHidden,
       [](const Env&) { return Spawn({"/bin/true"}); }, kBoth(kOk),
       kBoth(kOk)});

  // Namespaces, mounts and the calls of the seccomp table.
  add({"unshare_user", P::kDefault,
       [](const Env&) { return ErrnoOf(::unshare(CLONE_NEWUSER)); },
       kBoth(EPERM), kNoControl});
  add({"unshare_mount",
       P::kDefault,
       [](const Env&) { return ErrnoOf(::unshare(CLONE_NEWNS)); },
       kBoth(EPERM),
       {kOk, EPERM}});
  add({"unshare_net",
       P::kDefault,
       [](const Env&) { return ErrnoOf(::unshare(CLONE_NEWNET)); },
       kBoth(EPERM),
       {kOk, EPERM}});
  add({"unshare_time",
       P::kDefault,
       [](const Env&) { return ErrnoOf(::unshare(CLONE_NEWTIME)); },
       kBoth(EPERM),
       {kOk, EPERM}});
  add({"clone_newuser", P::kDefault,
       [](const Env&) {
         const long pid =
             ::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
         if (pid == 0) ::_exit(0);
         if (pid < 0) return errno;
         return WaitStatus(static_cast<pid_t>(pid));
       },
       kBoth(EPERM), kNoControl});
  add({"clone_newpid",
       P::kDefault,
       [](const Env&) {
         const long pid =
             ::syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
         if (pid == 0) ::_exit(0);
         if (pid < 0) return errno;
         return WaitStatus(static_cast<pid_t>(pid));
       },
       kBoth(EPERM),
       {kOk, EPERM}});
  add({"clone3", P::kDefault,
       [](const Env&) {
         struct clone_args args {};
         args.exit_signal = SIGCHLD;
         const long pid = ::syscall(SYS_clone3, &args, sizeof(args));
         if (pid == 0) ::_exit(0);
         if (pid < 0) return errno;
         return WaitStatus(static_cast<pid_t>(pid));
       },
       kBoth(ENOSYS), kBoth(kOk)});
  add({"setns_net",
       P::kDefault,
       [](const Env&) {
         UniqueFd ns(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
         if (!ns) return errno;
         return ErrnoOf(::setns(ns.get(), CLONE_NEWNET));
       },
       kBoth(EPERM),
       {kOk, EPERM}});
  add({"mount_tmpfs", P::kDefault,
       [](const Env& e) {
         return ErrnoOf(::mount("none", e.scratch.c_str(), "tmpfs", 0, ""));
       },
       kBoth(EPERM), kNoControl});
  add({"bpf_map_create",
       P::kDefault,
       [](const Env&) {
         union bpf_attr attr {};
         attr.map_type = BPF_MAP_TYPE_ARRAY;
         attr.key_size = 4;
         attr.value_size = 4;
         attr.max_entries = 1;
         UniqueFd fd(static_cast<int>(
             ::syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr))));
         return fd ? kOk : errno;
       },
       kBoth(EPERM),
       {kOk, EPERM}});
  add({"perf_event_open", P::kDefault,
       [](const Env&) {
         perf_event_attr attr{};
         attr.size = sizeof(attr);
         attr.type = PERF_TYPE_SOFTWARE;
         attr.config = PERF_COUNT_SW_TASK_CLOCK;
         attr.exclude_kernel = 1;
         UniqueFd fd(static_cast<int>(
             ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0)));
         return fd ? kOk : errno;
       },
       kBoth(EPERM), kNoControl});
  add({"keyctl", P::kDefault,
       [](const Env&) {
         return ErrnoOf(::syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID,
                                  KEY_SPEC_SESSION_KEYRING, 0));
       },
       kBoth(EPERM), kBoth(kOk)});
  add({"io_uring_setup", P::kDefault,
       [](const Env&) {
         io_uring_params p{};
         UniqueFd fd(static_cast<int>(::syscall(SYS_io_uring_setup, 1, &p)));
         return fd ? kOk : errno;
       },
       kBoth(EPERM), kBoth(kOk), kNeedIoUring});
  add({"io_uring_setup_allowed_by_policy", P::kIoUring,
       [](const Env&) {
         io_uring_params p{};
         UniqueFd fd(static_cast<int>(::syscall(SYS_io_uring_setup, 1, &p)));
         return fd ? kOk : errno;
       },
       kBoth(kOk), kBoth(kOk), kNeedIoUring});
  add({"int80_getpid", P::kDefault,
       [](const Env&) {
         const long ret = Int80Getpid();
         return ret < 0 ? static_cast<int>(-ret) : kOk;
       },
       kBoth(EPERM), kBoth(kOk), kNeedInt80});
  add({"x32_getpid", P::kDefault,
       [](const Env&) { return ErrnoOf(::syscall(0x40000000 | SYS_getpid)); },
       kBoth(EPERM), kNoControl});
  add({"tiocsti_own_terminal", P::kDefault,
       [](const Env&) {
         char c = 'x';
         return ErrnoOf(::ioctl(g_tty, TIOCSTI, &c));
       },
       kBoth(EPERM), kBoth(kOk), kNeedNothing, TakeTerminal});
  add({"ptrace_own_child_denied_by_policy", P::kNoPtrace,
       [](const Env&) { return PtraceOwnChild(); }, kBoth(EPERM), kBoth(kOk),
       kNeedYama});

  // The ordinary life of a sandboxed program still works.
  add({"fork_exec_true", P::kDefault,
       [](const Env&) {
         const pid_t pid = ::fork();
         if (pid == 0) {
           ::execl("/bin/true", "true", nullptr);
           ::_exit(127);
         }
         return pid < 0 ? errno : WaitStatus(pid);
       },
       kBoth(kOk), kBoth(kOk)});
  add({"posix_spawn_true", P::kDefault,
       [](const Env&) { return Spawn({"/bin/true"}); }, kBoth(kOk),
       kBoth(kOk)});
  add({"shell_writes_dev_null_and_stdout", P::kDefault,
       [](const Env&) {
         // /dev/stdout is /proc/self/fd/1: Landlock judges /dev/null.
         return Spawn({"/bin/sh", "-c",
                       "exec > /dev/null; echo hi > /dev/stdout && ls /"});
       },
       kBoth(kOk), kBoth(kOk)});
  add({"thread", P::kDefault,
       [](const Env&) {
         pthread_t t;
         const int rc = ::pthread_create(
             &t, nullptr, [](void*) -> void* { return nullptr; }, nullptr);
         if (rc != 0) return rc;
         return ::pthread_join(t, nullptr);
       },
       kBoth(kOk), kBoth(kOk)});
  add({"write_in_tmp", P::kDefault,
       [](const Env&) {
         const std::string f = absl::StrCat("/tmp/sf-confine-w-", ::getpid());
         UniqueFd fd(
             ::open(f.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600));
         if (!fd) return errno;
         const int code = ErrnoOf(::write(fd.get(), "x", 1));
         return ::unlink(f.c_str()) == 0 ? code : errno;
       },
       kBoth(kOk), kBoth(kOk)});
  add({"read_etc_hostname", P::kDefault,
       OpenPath([](const Env&) { return "/etc/hostname"; }, O_RDONLY),
       kBoth(kOk), kBoth(kOk)});
  add({"read_own_proc_status", P::kDefault,
       OpenPath([](const Env&) { return "/proc/self/status"; }, O_RDONLY),
       kBoth(kOk), kBoth(kOk)});
  add({"reopen_pipe_through_proc_self_fd", P::kDefault,
       [](const Env&) {
         int p[2];
         if (::pipe2(p, O_CLOEXEC) != 0) return errno;
         UniqueFd fd(::open(absl::StrCat("/proc/self/fd/", p[1]).c_str(),
                            O_WRONLY | O_CLOEXEC));
         return fd ? kOk : errno;
       },
       kBoth(kOk), kBoth(kOk)});
  add({"reopen_memfd_through_proc_self_fd", P::kDefault,
       [](const Env&) {
         UniqueFd m(::memfd_create("sf", MFD_CLOEXEC));
         if (!m) return errno;
         UniqueFd fd(::open(absl::StrCat("/proc/self/fd/", m.get()).c_str(),
                            O_RDWR | O_CLOEXEC));
         return fd ? kOk : errno;
       },
       kBoth(kOk), kBoth(kOk)});
  add({"signal_own_child", P::kDefault,
       [](const Env&) {
         const pid_t pid = ::fork();
         if (pid == 0) {
           for (;;) ::pause();
         }
         if (::kill(pid, SIGTERM) != 0) return errno;
         int status = 0;
         ::waitpid(pid, &status, 0);
         return WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM ? kOk
                                                                   : ECHILD;
       },
       kBoth(kOk), kBoth(kOk)});
  add({"ptrace_own_child", P::kDefault,
       [](const Env&) { return PtraceOwnChild(); }, kBoth(kOk), kBoth(kOk),
       kNeedYama});
  add({"setrlimit_self", P::kDefault,
       [](const Env&) {
         struct rlimit r;
         if (::getrlimit(RLIMIT_CORE, &r) != 0) return errno;
         return ErrnoOf(::setrlimit(RLIMIT_CORE, &r));
       },
       kBoth(kOk), kBoth(kOk)});
  add({"unshare_files", P::kDefault,
       [](const Env&) { return ErrnoOf(::unshare(CLONE_FILES)); }, kBoth(kOk),
       kBoth(kOk)});
  add({"ioctl_window_size", P::kDefault,
       [](const Env&) {
         winsize ws;
         return ErrnoOf(::ioctl(g_tty, TIOCGWINSZ, &ws));
       },
       kBoth(kOk), kBoth(kOk), kNeedNothing, TakeTerminal});
  return rows;
}

// --- the fixture -----------------------------------------------------------

class ConfineTest : public ::testing::TestWithParam<std::tuple<size_t, Who>> {
 public:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    void* mem = ::mmap(nullptr, sizeof(Counters), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    g_counters = new (mem) Counters();
    g_my_counter = &g_counters->parent_urg;
    struct sigaction sa {};
    sa.sa_handler = CountUrg;
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGURG, &sa, nullptr);

    absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = new ScopedTempDir(std::move(*dir));
    Env& env = base_env_;
    env.base = dir_->path();
    env.hidden = env.base + "/hidden";
    env.scratch = env.base + "/scratch";
    env.secret = env.hidden + "/secret";
    env.hidden_sock = env.hidden + "/daemon.sock";
    // Everyone may reach and write them: only the confinement refuses.
    ASSERT_EQ(::chmod(env.base.c_str(), 0777), 0);
    ASSERT_EQ(::mkdir(env.hidden.c_str(), 0777), 0);
    ASSERT_EQ(::mkdir(env.scratch.c_str(), 0777), 0);
    ASSERT_EQ(::chmod(env.hidden.c_str(), 0777), 0);
    ASSERT_EQ(::chmod(env.scratch.c_str(), 0777), 0);
    std::ofstream(env.secret) << "secret";
    ASSERT_EQ(::chmod(env.secret.c_str(), 0666), 0);
    hidden_listener_ = new UniqueFd(ListenUnix(env.hidden_sock, SOCK_STREAM));
    ASSERT_TRUE(*hidden_listener_);
    env.abstract_stream =
        absl::StrCat(std::string(1, '\0'), "sf-confine-test-", ::getpid());
    env.abstract_dgram =
        absl::StrCat(std::string(1, '\0'), "sf-confine-dgram-", ::getpid());
    abstract_stream_ =
        new UniqueFd(ListenUnix(env.abstract_stream, SOCK_STREAM));
    abstract_dgram_ = new UniqueFd(ListenUnix(env.abstract_dgram, SOCK_DGRAM));
    ASSERT_TRUE(*abstract_stream_);
    ASSERT_TRUE(*abstract_dgram_);
    absl::StatusOr<std::string> cgroup2 = FindCgroup2Mount();
    ASSERT_TRUE(cgroup2.ok()) << cgroup2.status();
    env.cgroup_procs = *cgroup2 + "/cgroup.procs";
    env.parent = ::getpid();
    absl::StatusOr<std::vector<std::string>> devices =
        confine::RawDeviceNodes();
    ASSERT_TRUE(devices.ok()) << devices.status();
    for (const std::string& d : *devices) {
      struct stat st;
      if (::stat(d.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
        env.block_device = d;
        break;
      }
    }

    victims_[kRoot] = StartVictim(0, &g_counters->urg[kRoot]);
    victims_[kNobody] = StartVictim(kNobodyUid, &g_counters->urg[kNobody]);
    ASSERT_GT(victims_[kRoot], 0);
    ASSERT_GT(victims_[kNobody], 0);

    ConfinePlan hidden;
    hidden.no_access = {env.hidden};
    ConfinePlan strict = hidden;
    strict.list_ancestors_of_no_access = false;
    ConfinePlan uring;
    uring.deny_io_uring = false;
    ConfinePlan no_ptrace;
    no_ptrace.deny_ptrace = true;
    ConfinePlan keep_caps;
    keep_caps.drop_read_bypass_capabilities = false;
    const std::vector<std::pair<PlanId, ConfinePlan>> plans = {
        {PlanId::kDefault, ConfinePlan{}}, {PlanId::kHidden, hidden},
        {PlanId::kHiddenStrict, strict},   {PlanId::kIoUring, uring},
        {PlanId::kNoPtrace, no_ptrace},    {PlanId::kKeepCaps, keep_caps}};
    prepared_ = new std::map<PlanId, PreparedConfinement>();
    for (const auto& [id, plan] : plans) {
      absl::StatusOr<PreparedConfinement> p = PrepareConfinement(plan);
      if (!p.ok()) {
        prepare_error_ = new std::string(p.status().ToString());
        return;
      }
      prepared_->emplace(id, std::move(*p));
    }
  }

  static void TearDownTestSuite() {
    for (pid_t& v : victims_) {
      if (v > 0) {
        ::kill(v, SIGKILL);
        ::waitpid(v, nullptr, 0);
        v = -1;
      }
    }
    delete prepared_;
    prepared_ = nullptr;
    delete hidden_listener_;
    delete abstract_stream_;
    delete abstract_dgram_;
    delete dir_;
    dir_ = nullptr;
  }

 protected:
  static Env EnvFor(Who who) {
    Env env = base_env_;
    env.who = who;
    env.uid = who == kRoot ? 0 : kNobodyUid;
    env.victim = victims_[who];
    env.victim_urg = &g_counters->urg[who];
    return env;
  }

  static inline ScopedTempDir* dir_ = nullptr;
  static inline Env base_env_;
  static inline pid_t victims_[2] = {-1, -1};
  static inline UniqueFd* hidden_listener_ = nullptr;
  static inline UniqueFd* abstract_stream_ = nullptr;
  static inline UniqueFd* abstract_dgram_ = nullptr;
  static inline std::map<PlanId, PreparedConfinement>* prepared_ = nullptr;
  static inline std::string* prepare_error_ = nullptr;
};

const std::vector<Row>& AllRows() {
  static const std::vector<Row>* rows = new std::vector<Row>(Rows());
  return *rows;
}

#define SANDFENCE_REQUIRE_ROOT_FOR_CONFINE()                          \
  do {                                                                \
    if (::geteuid() != 0) {                                           \
      GTEST_SKIP() << "needs root: the attackers run as root and as " \
                      "nobody, against victims of both";              \
    }                                                                 \
  } while (0)

TEST_P(ConfineTest, Row) {
  SANDFENCE_REQUIRE_ROOT_FOR_CONFINE();
  ASSERT_EQ(prepare_error_, nullptr) << *prepare_error_;
  const auto [index, who] = GetParam();
  const Row& row = AllRows()[index];
  switch (row.need) {
    case kNeedInt80:
      SANDFENCE_REQUIRE_HOST(testing::HostInt80());
      break;
    case kNeedIoUring:
      SANDFENCE_REQUIRE_HOST(testing::HostIoUring());
      break;
    case kNeedYama:
      SANDFENCE_REQUIRE_HOST(testing::HostYamaAllowsPtrace());
      break;
    case kNeedBlockDevice:
      if (base_env_.block_device.empty()) {
        GTEST_SKIP() << "no block device under /dev on this host";
      }
      break;
    case kNeedUserfaultfdDevice:
      if (::access("/dev/userfaultfd", F_OK) != 0) {
        GTEST_SKIP() << "no /dev/userfaultfd on this host (Linux 6.1+)";
      }
      break;
    case kNeedNothing:
      break;
  }
  const Env env = EnvFor(who);
  const char* user = who == kRoot ? "root" : "nobody";
  const int want = who == kRoot ? row.confined.root : row.confined.nobody;
  const int got =
      RunChild(&prepared_->at(row.plan), env, row.attack, row.before);
  const int control_want = who == kRoot ? row.control.root : row.control.nobody;
  const int control = control_want == kNotRun
                          ? kNotRun
                          : RunChild(nullptr, env, row.attack, row.before);
  // One line per row for the record (grep "[ confine ]").
  std::cout << "[ confine ] " << user << " " << row.name << ": confined "
            << CodeName(got) << ", unconfined " << CodeName(control) << "\n";
  EXPECT_EQ(CodeName(got), CodeName(want))
      << user << " " << row.name << ", confined";
  EXPECT_EQ(CodeName(control), CodeName(control_want))
      << user << " " << row.name << ", unconfined (the control)";
}

std::string RowName(
    const ::testing::TestParamInfo<std::tuple<size_t, Who>>& info) {
  return absl::StrCat(std::get<1>(info.param) == kRoot ? "root_" : "nobody_",
                      AllRows()[std::get<0>(info.param)].name);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ConfineTest,
    ::testing::Combine(::testing::Range<size_t>(0, AllRows().size()),
                       ::testing::Values(kRoot, kNobody)),
    RowName);

// --- beyond the table ------------------------------------------------------

TEST(ConfineProbeTest, ThisHostCanConfine) {
  SANDFENCE_REQUIRE_ROOT_FOR_CONFINE();
  absl::StatusOr<ConfineSupport> support = ProbeConfinement();
  ASSERT_TRUE(support.ok()) << support.status();
  EXPECT_TRUE(support->Usable().ok()) << support->Usable();
  EXPECT_GE(support->landlock_abi, 6)
      << "design.md: this host has Landlock at ABI 7";
  EXPECT_TRUE(support->seccomp_filter) << support->seccomp_reason;
  EXPECT_TRUE(support->applied) << support->apply_reason;
  std::cout << "[ confine ] landlock ABI " << support->landlock_abi
            << ", errata 0x" << std::hex << support->landlock_errata << std::dec
            << "\n";
}

TEST(ConfinePrepareTest, TheRulesetFdClosesAtExecAndOnApply) {
  SANDFENCE_REQUIRE_ROOT_FOR_CONFINE();
  absl::StatusOr<PreparedConfinement> p = PrepareConfinement(ConfinePlan{});
  ASSERT_TRUE(p.ok()) << p.status();
  const int fd = p->ruleset_fd();
  ASSERT_GE(fd, 0);
  EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    int step = 0;
    int r[4] = {ApplyConfinement(*p, &step), 0, 0, 0};
    r[1] = ::fcntl(fd, F_GETFD) < 0 ? errno : 0;
    r[2] = ApplyConfinement(*p, &step);
    r[3] = step;
    ssize_t ignored = ::write(pipe_fds[1], r, sizeof(r));
    (void)ignored;
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  int r[4] = {1, 1, 1, 1};
  ASSERT_EQ(::read(pipe_fds[0], r, sizeof(r)), static_cast<ssize_t>(sizeof(r)));
  ::close(pipe_fds[0]);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(r[0], 0) << "the first apply";
  EXPECT_EQ(CodeName(r[1]), "EBADF") << "the ruleset fd is closed after it";
  EXPECT_EQ(r[2], -EBADF) << "a second apply in the same process";
  EXPECT_EQ(r[3], kConfineStepLandlock);
  EXPECT_GE(::fcntl(fd, F_GETFD), 0) << "the parent's fd is untouched";
}

// Each child that applies one PreparedConfinement gets a domain of its own:
// two sandboxes started from it cannot signal or ptrace each other.
TEST(ConfinePrepareTest, TwoChildrenOfOnePreparedAreSeparateDomains) {
  SANDFENCE_REQUIRE_ROOT_FOR_CONFINE();
  absl::StatusOr<PreparedConfinement> p = PrepareConfinement(ConfinePlan{});
  ASSERT_TRUE(p.ok()) << p.status();
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  const pid_t first = ::fork();
  if (first == 0) {
    char c = ApplyConfinement(*p) == 0 ? 'y' : 'n';
    ssize_t ignored = ::write(ready[1], &c, 1);
    (void)ignored;
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(c, 'y');
  Env env;
  env.victim = first;
  const int kill_code = RunChild(
      &*p, env, [](const Env& e) { return ErrnoOf(::kill(e.victim, 0)); });
  const int ptrace_code = RunChild(&*p, env, [](const Env& e) {
    return ErrnoOf(::ptrace(PTRACE_SEIZE, e.victim, nullptr, nullptr));
  });
  ::kill(first, SIGKILL);
  ::waitpid(first, nullptr, 0);
  EXPECT_EQ(CodeName(kill_code), "EPERM");
  EXPECT_EQ(CodeName(ptrace_code), "EPERM");
}

// Whether `dir` is `path` or one of its ancestors.
bool IsAncestorOrSelf(const std::string& dir, const std::string& path) {
  return dir == "/" || dir == path ||
         (path.starts_with(dir) && path.size() > dir.size() &&
          path[dir.size()] == '/');
}

// The walk's invariant: a rule sits on an exclusion itself, on / or on an
// entry of a directory on the way to an exclusion; never deeper (so / and
// /dev, and the way to any special mount elsewhere, are all it lists), and
// never under /sys or /proc.
TEST(ConfinePrepareTest, RulesOnlyOnTheWayToExclusions) {
  SANDFENCE_REQUIRE_ROOT_FOR_CONFINE();
  absl::StatusOr<PreparedConfinement> p = PrepareConfinement(ConfinePlan{});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->lacking().empty()) << p->lacking().front();
  for (const confine::PlannedRule& r : p->rules().rules) {
    EXPECT_FALSE(r.path.starts_with("/sys/")) << r.path;
    EXPECT_FALSE(r.path.starts_with("/proc/")) << r.path;
    if (r.path == "/") continue;
    const std::string parent = r.path.substr(0, r.path.rfind('/'));
    bool on_the_way = false;
    for (const confine::Exclusion& e : p->rules().applied) {
      if (e.path == r.path ||
          IsAncestorOrSelf(parent.empty() ? "/" : parent, e.path)) {
        on_the_way = true;
      }
    }
    EXPECT_TRUE(on_the_way) << r.path;
  }
  ConfinePlan no_devices;
  no_devices.hide_raw_devices = false;
  absl::StatusOr<PreparedConfinement> lean = PrepareConfinement(no_devices);
  ASSERT_TRUE(lean.ok()) << lean.status();
  EXPECT_LT(lean->rules().rules.size(), p->rules().rules.size());
  std::cout << "[ confine ] without hiding raw devices: "
            << lean->rules().rules.size() << " rules\n";
  std::cout << "[ confine ] default plan: " << p->rules().rules.size()
            << " rules, " << p->seccomp_program().size()
            << " seccomp instructions, " << p->raw_devices().size()
            << " raw devices hidden, exclusions:";
  for (const confine::Exclusion& e : p->rules().applied) {
    std::cout << " " << e.path;
  }
  std::cout << "\n";
}

// Rules bind places, not strings: a second mount of cgroupfs or bpffs
// outside /sys would be a way around "no writes to /sys" if /sys were
// excluded by name alone. Excluded by type, wherever mounted. Everything
// happens in a child with a mount namespace of its own, so the extra
// mounts go with it.
TEST(ConfineMountTest, CgroupfsAndBpffsMountedOutsideSysStayUnwritable) {
  SANDFENCE_REQUIRE_ROOT_FOR_CONFINE();
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string cg2 = dir->path() + "/cg2";
  const std::string bpf = dir->path() + "/bpf";
  ASSERT_EQ(::mkdir(cg2.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(bpf.c_str(), 0755), 0);
  enum {
    kNamedOnly,
    kMounted,
    kCgExcluded,
    kBpfExcluded,
    kConfinedOpen,
    kConfinedMkdir,
    kControlOpen,
    kCount
  };
  int results[kCount];
  for (int& r : results) r = kNotRun;
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  std::cout.flush();
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(20);
    int r[kCount];
    for (int& x : r) x = kNotRun;
    r[kMounted] =
        ::unshare(CLONE_NEWNS) != 0 ||
                ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) !=
                    0 ||
                ::mount("cgroup2", cg2.c_str(), "cgroup2", 0, nullptr) != 0 ||
                ::mount("bpf", bpf.c_str(), "bpf", 0, nullptr) != 0
            ? errno
            : kOk;
    if (r[kMounted] == kOk) {
      absl::StatusOr<PreparedConfinement> prepared =
          PrepareConfinement(ConfinePlan{});
      if (prepared.ok()) {
        r[kCgExcluded] = r[kBpfExcluded] = ENOENT;
        for (const confine::Exclusion& e : prepared->rules().applied) {
          if (e.path == cg2) r[kCgExcluded] = kOk;
          if (e.path == bpf) r[kBpfExcluded] = kOk;
        }
        Env env;
        env.base = dir->path();
        const auto open_procs = [](const Env& e) {
          UniqueFd fd(::open((e.base + "/cg2/cgroup.procs").c_str(),
                             O_WRONLY | O_CLOEXEC));
          return fd ? kOk : errno;
        };
        r[kConfinedOpen] = RunChild(&*prepared, env, open_procs);
        r[kConfinedMkdir] = RunChild(&*prepared, env, [](const Env& e) {
          return ErrnoOf(::mkdir((e.base + "/bpf/x").c_str(), 0700));
        });
        r[kControlOpen] = RunChild(nullptr, env, open_procs);
        ConfinePlan by_name;
        by_name.no_write_fs_types.clear();
        absl::StatusOr<PreparedConfinement> named = PrepareConfinement(by_name);
        r[kNamedOnly] =
            named.ok() ? RunChild(&*named, env, open_procs) : kSetupFailed;
      }
    }
    ssize_t ignored = ::write(p[1], r, sizeof(r));
    (void)ignored;
    ::_exit(0);
  }
  ::close(p[1]);
  ASSERT_EQ(::read(p[0], results, sizeof(results)),
            static_cast<ssize_t>(sizeof(results)));
  ::close(p[0]);
  ::waitpid(child, nullptr, 0);
  ASSERT_EQ(CodeName(results[kMounted]), "ok")
      << "mount cgroup2 and bpf in a private mount namespace";
  EXPECT_EQ(CodeName(results[kCgExcluded]), "ok")
      << cg2 << " is among the exclusions (by type)";
  EXPECT_EQ(CodeName(results[kBpfExcluded]), "ok")
      << bpf << " is among the exclusions (by type)";
  EXPECT_EQ(CodeName(results[kConfinedOpen]), "EACCES")
      << "cgroup.procs of the second cgroup2 mount, confined";
  EXPECT_EQ(CodeName(results[kConfinedMkdir]), "EACCES")
      << "mkdir in the second bpffs, confined";
  EXPECT_EQ(CodeName(results[kControlOpen]), "ok")
      << "cgroup.procs of the second cgroup2 mount, unconfined (the control)";
  EXPECT_EQ(CodeName(results[kNamedOnly]), "ok")
      << "excluding /sys by name alone leaves the second mount writable: "
         "why the types are excluded too";
}

// The walk's last line of defence: an entry that is a directory on the
// way to an exclusion under another name (a bind mount the exclusions were
// not expanded for) is never granted. Planned in a private mount
// namespace, without WithMountAliases.
TEST(ConfineMountTest, ABindMountOfAnAncestorIsNeverGranted) {
  SANDFENCE_REQUIRE_ROOT_FOR_CONFINE();
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string parent = dir->path() + "/parent";
  const std::string hidden = parent + "/hidden";
  const std::string alias = dir->path() + "/alias";
  for (const std::string& d : {parent, hidden, alias}) {
    ASSERT_EQ(::mkdir(d.c_str(), 0755), 0) << d;
  }
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  std::cout.flush();
  const pid_t child = ::fork();
  if (child == 0) {
    int r[2] = {kNotRun, kNotRun};  // mounted, alias refused
    r[0] = ::unshare(CLONE_NEWNS) != 0 ||
                   ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE,
                           nullptr) != 0 ||
                   ::mount(parent.c_str(), alias.c_str(), nullptr, MS_BIND,
                           nullptr) != 0
               ? errno
               : kOk;
    if (r[0] == kOk) {
      absl::StatusOr<confine::RulePlan> plan =
          confine::PlanRules({{hidden, 0}}, confine::FsRightsOfAbi(7), true);
      r[1] = !plan.ok() ? kSetupFailed : ENOENT;
      if (plan.ok()) {
        for (const std::string& a : plan->aliases_refused) {
          if (a == alias) r[1] = kOk;
        }
        for (const confine::PlannedRule& rule : plan->rules) {
          if (rule.path == alias) r[1] = EEXIST;
        }
      }
    }
    ssize_t ignored = ::write(p[1], r, sizeof(r));
    (void)ignored;
    ::_exit(0);
  }
  ::close(p[1]);
  int r[2];
  ASSERT_EQ(::read(p[0], r, sizeof(r)), static_cast<ssize_t>(sizeof(r)));
  ::close(p[0]);
  ::waitpid(child, nullptr, 0);
  ASSERT_EQ(CodeName(r[0]), "ok") << "bind " << parent << " at " << alias;
  EXPECT_EQ(CodeName(r[1]), "ok")
      << alias << " (the same directory as " << parent
      << ", above the excluded one) is refused, not granted";
}

// `sandfence run` spawns under an init of a new PID namespace that mounts
// a fresh /proc after clone, and prepares the confinement before it, on
// the host's /proc. Landlock's walk skips a covered mount point, so the
// rule on the host's /proc does not reach the fresh one: without
// fresh_mounts every read there is refused (reads are handled as soon as
// anything is hidden), with it ApplyConfinement grants the fresh /proc
// what the plan gives /proc.
TEST(ConfineMountTest, AFreshProcOfAPidNamespaceIsReadableNotWritable) {
  SANDFENCE_REQUIRE_ROOT_FOR_CONFINE();
  ConfinePlan plan;
  plan.fresh_mounts = {"/proc"};
  absl::StatusOr<PreparedConfinement> prepared = PrepareConfinement(plan);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(prepared->fresh_mount_rights("/proc"), confine::kFsReadRights);
  absl::StatusOr<PreparedConfinement> without =
      PrepareConfinement(ConfinePlan{});
  ASSERT_TRUE(without.ok()) << without.status();
  enum {
    kSetup,
    kReadOwnStatus,
    kListProc,
    kReadInitStatus,
    kReadInitEnviron,
    kSignalInit,
    kWriteOwnOomScore,
    kWithoutFreshMounts,
    kCount
  };
  const char* names[kCount] = {
      "unshare, fork pid 1, mount a fresh /proc",
      "read /proc/self/status",
      "list /proc",
      "read /proc/1/status (init, outside the domain)",
      "read /proc/1/environ",
      "kill(1, 0)",
      "write /proc/self/oom_score_adj",
      "read /proc/self/status, prepared without fresh_mounts",
  };
  const int want[kCount] = {kOk, kOk, kOk, kOk, EACCES, EPERM, EACCES, EACCES};
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  std::cout.flush();
  const pid_t helper = ::fork();
  if (helper == 0) {
    ::alarm(20);
    int r[kCount];
    for (int& x : r) x = kNotRun;
    if (::unshare(CLONE_NEWNS | CLONE_NEWPID) != 0) {
      r[kSetup] = errno;
    } else {
      const pid_t init = ::fork();
      if (init == 0) {
        if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
            ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                    nullptr) != 0) {
          r[kSetup] = errno;
        } else {
          r[kSetup] = kOk;
          const Env env;
          const PreparedConfinement* c = &*prepared;
          r[kReadOwnStatus] = RunChild(c, env, ReadProcPath("self/status"));
          r[kListProc] = RunChild(c, env, [](const Env&) {
            DIR* d = ::opendir("/proc");
            if (d == nullptr) return errno;
            ::closedir(d);
            return kOk;
          });
          r[kReadInitStatus] = RunChild(c, env, ReadProcPath("1/status"));
          r[kReadInitEnviron] = RunChild(c, env, ReadProcPath("1/environ"));
          r[kSignalInit] = RunChild(
              c, env, [](const Env&) { return ErrnoOf(::kill(1, 0)); });
          r[kWriteOwnOomScore] = RunChild(
              c, env,
              OpenPath([](const Env&) { return "/proc/self/oom_score_adj"; },
                       O_WRONLY));
          r[kWithoutFreshMounts] =
              RunChild(&*without, env, ReadProcPath("self/status"));
        }
        ssize_t ignored = ::write(p[1], r, sizeof(r));
        (void)ignored;
        ::_exit(0);
      }
      ::waitpid(init, nullptr, 0);
    }
    if (r[kSetup] != kNotRun) {
      ssize_t ignored = ::write(p[1], r, sizeof(r));
      (void)ignored;
    }
    ::_exit(0);
  }
  ::close(p[1]);
  int results[kCount];
  ASSERT_EQ(::read(p[0], results, sizeof(results)),
            static_cast<ssize_t>(sizeof(results)));
  ::close(p[0]);
  ::waitpid(helper, nullptr, 0);
  ASSERT_EQ(CodeName(results[kSetup]), "ok") << names[kSetup];
  for (int i = 1; i < kCount; ++i) {
    EXPECT_EQ(CodeName(results[i]), CodeName(want[i])) << names[i];
  }
}

TEST(ConfineDescribeTest, EveryRowOnThisHostSaysItsLayer) {
  SANDFENCE_REQUIRE_ROOT_FOR_CONFINE();
  ConfinePlan plan;
  plan.no_access = {"/var/lib/sandfence", "/run/sandfence",
                    "/sys/fs/bpf/sandfence"};
  absl::StatusOr<PreparedConfinement> p = PrepareConfinement(plan);
  ASSERT_TRUE(p.ok()) << p.status();
  for (const ConfineGuarantee& g : DescribeConfinement(*p)) {
    std::cout << "[ confine ] " << (g.holds ? "holds  " : "missing") << " | "
              << g.what << " | " << g.layer << "\n";
    EXPECT_FALSE(g.layer.empty()) << g.what;
    EXPECT_EQ(g.holds, !g.layer.starts_with("—")) << g.what;
  }
}

}  // namespace
}  // namespace sandfence
