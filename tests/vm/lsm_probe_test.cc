// The BPF LSM path end to end: a CO-RE `lsm/ptrace_access_check` program,
// aimed at one process, makes the kernel refuse /proc/<pid> files and
// ptrace on that process only, and stops doing so once detached. (The
// kernel reports a refused /proc/<pid>/environ as EACCES, ptrace as EPERM.)
//
// Most development kernels refuse BPF LSM programs (BPF LSM is not on their
// `lsm=` list), so on the host these cases skip; the VM suite
// (tests/vm/run-in-vm.sh) boots a kernel with `lsm=...,bpf` and sets
// SANDFENCE_IN_VM=1, where a refusal is a failure, not a skip.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "sf_lsm_probe.skel.h"
#include "support/test_env.h"

namespace {

constexpr char kUnavailable[] =
    "BPF LSM not available on this kernel (runs in the VM suite)";

struct SkelDeleter {
  void operator()(sf_lsm_probe* s) const { sf_lsm_probe::destroy(s); }
};
using Skel = std::unique_ptr<sf_lsm_probe, SkelDeleter>;

bool InVm() {
  const char* v = std::getenv("SANDFENCE_IN_VM");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// Loads and attaches the probe. On refusal, `skel` is null and `refusal`
// says why. Support is judged by loading and attaching, as the guard will;
// the securityfs list only explains an attach that would never run.
struct Probe {
  Skel skel;
  std::string refusal;
};

Probe LoadAndAttach() {
  Probe p;
  Skel skel(sf_lsm_probe::open_and_load());
  if (skel == nullptr) {
    p.refusal = std::string("load failed: ") + std::strerror(errno);
    return p;
  }
  if (int err = sf_lsm_probe::attach(skel.get()); err != 0) {
    p.refusal = std::string("attach failed: ") + std::strerror(-err);
    return p;
  }
  // Some kernels accept the attach even though BPF is not an active LSM,
  // and then never call the program.
  std::ifstream lsm("/sys/kernel/security/lsm");
  if (lsm) {
    std::string active((std::istreambuf_iterator<char>(lsm)),
                       std::istreambuf_iterator<char>());
    if (("," + active + ",").find(",bpf,") == std::string::npos) {
      p.refusal = "attached, but bpf is not an active LSM (" + active + ")";
      return p;
    }
  }
  p.skel = std::move(skel);
  return p;
}

// In the VM a refusal means the VM is broken: fail, never skip.
#define REQUIRE_BPF_LSM(probe)                                       \
  do {                                                               \
    SANDFENCE_REQUIRE_ROOT();                                        \
    probe = LoadAndAttach();                                         \
    if (probe.skel == nullptr) {                                     \
      if (InVm()) {                                                  \
        FAIL() << "in the VM, BPF LSM must load: " << probe.refusal; \
      }                                                              \
      GTEST_SKIP() << kUnavailable << ": " << probe.refusal;         \
    }                                                                \
  } while (0)

// A child that sleeps until the test ends; killed and reaped on scope exit.
class SleepingChild {
 public:
  // The child drops the parent's BPF fds (a link held open there would keep
  // the program attached after the test detaches it), and the constructor
  // returns only once it has: the pipe's write end, closed with them, is
  // the signal.
  SleepingChild() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close_range(3, ~0U, 0);
      for (;;) ::pause();
    }
    ::close(p[1]);
    char c;
    while (pid_ > 0 && ::read(p[0], &c, 1) < 0 && errno == EINTR) {
    }
    ::close(p[0]);
  }
  ~SleepingChild() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  SleepingChild(const SleepingChild&) = delete;
  SleepingChild& operator=(const SleepingChild&) = delete;

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// Returns 0 if the access succeeded, else its errno.
int OpenProcFile(pid_t pid, const char* file, int flags) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + file;
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

int PtraceSeize(pid_t pid) {
  // A seized child stays ours; SleepingChild's SIGKILL ends it either way.
  if (::ptrace(PTRACE_SEIZE, pid, nullptr, nullptr) != 0) return errno;
  return 0;
}

struct Access {
  const char* what;
  int (*attempt)(pid_t pid);
  // The program returns -EPERM; the /proc files that map the target's
  // memory go through mm_access(), which reports any refusal as EACCES.
  int refused_errno;
};

// Every row goes through ptrace_may_access() and so through the hook.
const Access kAccesses[] = {
    {"read /proc/<pid>/environ",
     [](pid_t pid) { return OpenProcFile(pid, "environ", O_RDONLY); }, EACCES},
    {"read /proc/<pid>/maps",
     [](pid_t pid) { return OpenProcFile(pid, "maps", O_RDONLY); }, EACCES},
    {"read /proc/<pid>/auxv",
     [](pid_t pid) { return OpenProcFile(pid, "auxv", O_RDONLY); }, EACCES},
    {"open /proc/<pid>/mem for writing",
     [](pid_t pid) { return OpenProcFile(pid, "mem", O_RDWR); }, EACCES},
    {"ptrace(PTRACE_SEIZE)", PtraceSeize, EPERM},
};

TEST(LsmProbe, DeniesTheTargetAndOnlyTheTarget) {
  Probe probe;
  REQUIRE_BPF_LSM(probe);
  for (const Access& a : kAccesses) {
    SCOPED_TRACE(a.what);
    SleepingChild target;
    SleepingChild bystander;
    ASSERT_GT(target.pid(), 0);
    ASSERT_GT(bystander.pid(), 0);
    probe.skel->bss->sf_target_tgid = static_cast<__u32>(target.pid());
    __u64 denials = probe.skel->bss->sf_denials;

    EXPECT_EQ(a.attempt(target.pid()), a.refused_errno)
        << a.what << " on the target must be refused";
    EXPECT_GT(probe.skel->bss->sf_denials, denials)
        << a.what << ": the refusal must come from the probe";
    EXPECT_EQ(a.attempt(bystander.pid()), 0)
        << a.what << " on another process must still work";
  }
}

TEST(LsmProbe, NoTargetDeniesNothing) {
  Probe probe;
  REQUIRE_BPF_LSM(probe);
  SleepingChild child;
  ASSERT_GT(child.pid(), 0);
  probe.skel->bss->sf_target_tgid = 0;
  for (const Access& a : kAccesses) {
    EXPECT_EQ(a.attempt(child.pid()), 0) << a.what;
  }
  EXPECT_EQ(probe.skel->bss->sf_denials, 0u);
}

TEST(LsmProbe, DetachingRestoresAccess) {
  Probe probe;
  REQUIRE_BPF_LSM(probe);
  SleepingChild target;
  ASSERT_GT(target.pid(), 0);
  probe.skel->bss->sf_target_tgid = static_cast<__u32>(target.pid());
  ASSERT_EQ(OpenProcFile(target.pid(), "environ", O_RDONLY), EACCES);

  sf_lsm_probe::detach(probe.skel.get());
  EXPECT_EQ(OpenProcFile(target.pid(), "environ", O_RDONLY), 0)
      << "the kernel still refuses after the program was detached";
}

}  // namespace
