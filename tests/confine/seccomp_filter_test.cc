// The seccomp program, run through a classic-BPF interpreter of our own: no
// privileges, no kernel. Each row is a system call a sandboxed program could
// make and the answer it must get.
#include "confine/seccomp_filter.h"

#include <asm/ioctls.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sandfence::confine {
namespace {

constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr uint32_t Errno(int e) { return SECCOMP_RET_ERRNO | e; }

// What the interpreter saw besides the verdict.
struct Outcome {
  uint32_t action = 0;
  bool read_args = false;  // loaded anything past nr and arch
  std::string error;       // a malformed program
};

// Runs the subset of classic BPF a seccomp filter uses here, checking what
// the kernel's checker would: in-bounds jumps, aligned in-bounds loads,
// every path ending in a return.
Outcome Interpret(const std::vector<sock_filter>& prog,
                  const seccomp_data& data) {
  Outcome run;
  uint32_t a = 0;
  unsigned char bytes[sizeof(seccomp_data)];
  std::memcpy(bytes, &data, sizeof(data));
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    const sock_filter& insn = prog[pc];
    switch (insn.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (insn.k % 4 != 0 || insn.k + 4 > sizeof(data)) {
          run.error = absl::StrCat("bad load offset ", insn.k, " at ", pc);
          return run;
        }
        if (insn.k >= offsetof(seccomp_data, instruction_pointer)) {
          run.read_args = true;
        }
        std::memcpy(&a, bytes + insn.k, 4);
        break;
      case BPF_RET | BPF_K:
        run.action = insn.k;
        return run;
      case BPF_ALU | BPF_AND | BPF_K:
        a &= insn.k;
        break;
      case BPF_JMP | BPF_JA:
        pc += insn.k;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
      case BPF_JMP | BPF_JSET | BPF_K:
      case BPF_JMP | BPF_JGE | BPF_K:
      case BPF_JMP | BPF_JGT | BPF_K: {
        bool taken = false;
        switch (BPF_OP(insn.code)) {
          case BPF_JEQ:
            taken = a == insn.k;
            break;
          case BPF_JSET:
            taken = (a & insn.k) != 0;
            break;
          case BPF_JGE:
            taken = a >= insn.k;
            break;
          case BPF_JGT:
            taken = a > insn.k;
            break;
        }
        pc += taken ? insn.jt : insn.jf;
        break;
      }
      default:
        run.error = absl::StrCat("unexpected opcode ", insn.code, " at ", pc);
        return run;
    }
    if (pc + 1 > prog.size()) {
      run.error = absl::StrCat("jump out of the program at ", pc);
      return run;
    }
  }
  run.error = "fell off the end of the program";
  return run;
}

seccomp_data Call(int nr, std::vector<uint64_t> args = {},
                  uint32_t arch = AUDIT_ARCH_X86_64) {
  seccomp_data d{};
  d.nr = nr;
  d.arch = arch;
  for (size_t i = 0; i < args.size() && i < 6; ++i) d.args[i] = args[i];
  return d;
}

struct Row {
  const char* name;
  seccomp_data call;
  uint32_t want;
};

std::string ActionName(uint32_t action) {
  if (action == kAllow) return "ALLOW";
  if (action == SECCOMP_RET_USER_NOTIF) return "USER_NOTIF";
  if ((action & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO) {
    return absl::StrCat("ERRNO(", std::strerror(action & SECCOMP_RET_DATA),
                        ")");
  }
  return absl::StrCat("action ", action);
}

void ExpectRows(const SeccompOptions& options, const std::vector<Row>& rows) {
  const std::vector<sock_filter> prog = BuildSeccompFilter(options);
  ASSERT_FALSE(prog.empty());
  ASSERT_LE(prog.size(), static_cast<size_t>(BPF_MAXINSNS));
  for (const Row& row : rows) {
    const Outcome run = Interpret(prog, row.call);
    EXPECT_EQ(run.error, "") << row.name;
    EXPECT_EQ(ActionName(run.action), ActionName(row.want)) << row.name;
  }
}

constexpr uint64_t kHigh = 0xffffffff00000000ULL;

TEST(SeccompFilterTest, DefaultPolicyAnswersEachCallAsTheTableSays) {
  ExpectRows(
      {},
      {
          {"read is allowed", Call(__NR_read, {0, 0, 1}), kAllow},
          {"execve is allowed", Call(__NR_execve), kAllow},
          {"seccomp (nesting a filter) is allowed", Call(__NR_seccomp), kAllow},
          {"a 32-bit call (int $0x80) is refused",
           Call(20 /* ia32 getpid */, {}, AUDIT_ARCH_I386), Errno(EPERM)},
          {"an unknown architecture is refused", Call(__NR_read, {}, 0),
           Errno(EPERM)},
          {"an x32 number is refused", Call(0x40000000 | __NR_getpid),
           Errno(EPERM)},
          {"x32 mount is refused", Call(0x40000000 | __NR_mount), Errno(EPERM)},
          {"clone3 answers ENOSYS (libc falls back to clone)",
           Call(__NR_clone3), Errno(ENOSYS)},
          {"clone for fork (SIGCHLD) is allowed", Call(__NR_clone, {SIGCHLD}),
           kAllow},
          {"clone for a thread is allowed",
           Call(__NR_clone, {CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
                             CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS |
                             CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID}),
           kAllow},
          {"clone with CLONE_NEWUSER is refused",
           Call(__NR_clone, {CLONE_NEWUSER | SIGCHLD}), Errno(EPERM)},
          {"clone with CLONE_NEWNS is refused",
           Call(__NR_clone, {CLONE_NEWNS | SIGCHLD}), Errno(EPERM)},
          {"clone with CLONE_NEWPID is refused",
           Call(__NR_clone, {CLONE_NEWPID}), Errno(EPERM)},
          {"clone with CLONE_NEWNET is refused",
           Call(__NR_clone, {CLONE_NEWNET}), Errno(EPERM)},
          {"clone with CLONE_NEWUTS is refused",
           Call(__NR_clone, {CLONE_NEWUTS}), Errno(EPERM)},
          {"clone with CLONE_NEWIPC is refused",
           Call(__NR_clone, {CLONE_NEWIPC}), Errno(EPERM)},
          {"clone with CLONE_NEWCGROUP is refused",
           Call(__NR_clone, {CLONE_NEWCGROUP}), Errno(EPERM)},
          {"clone's exit signal 0x80 is not CLONE_NEWTIME",
           Call(__NR_clone, {0x80}), kAllow},
          {"clone flags in the high word are ignored, as by the kernel",
           Call(__NR_clone, {kHigh | SIGCHLD}), kAllow},
          {"unshare(CLONE_NEWUSER) is refused",
           Call(__NR_unshare, {CLONE_NEWUSER}), Errno(EPERM)},
          {"unshare(CLONE_NEWTIME) is refused",
           Call(__NR_unshare, {CLONE_NEWTIME}), Errno(EPERM)},
          {"unshare(CLONE_NEWNS | CLONE_FS) is refused",
           Call(__NR_unshare, {CLONE_NEWNS | CLONE_FS}), Errno(EPERM)},
          {"unshare(CLONE_FILES) is allowed", Call(__NR_unshare, {CLONE_FILES}),
           kAllow},
          {"setns is refused", Call(__NR_setns, {3, 0}), Errno(EPERM)},
          {"mount is refused", Call(__NR_mount), Errno(EPERM)},
          {"umount2 is refused", Call(__NR_umount2), Errno(EPERM)},
          {"pivot_root is refused", Call(__NR_pivot_root), Errno(EPERM)},
          {"chroot is refused", Call(__NR_chroot), Errno(EPERM)},
          {"fsopen is refused", Call(__NR_fsopen), Errno(EPERM)},
          {"open_tree is refused", Call(__NR_open_tree), Errno(EPERM)},
          {"open_tree_attr is refused", Call(467), Errno(EPERM)},
          {"move_mount is refused", Call(__NR_move_mount), Errno(EPERM)},
          {"mount_setattr is refused", Call(__NR_mount_setattr), Errno(EPERM)},
          {"bpf is refused", Call(__NR_bpf), Errno(EPERM)},
          {"perf_event_open is refused", Call(__NR_perf_event_open),
           Errno(EPERM)},
          {"kcmp is refused", Call(__NR_kcmp), Errno(EPERM)},
          {"open_by_handle_at is refused", Call(__NR_open_by_handle_at),
           Errno(EPERM)},
          {"finit_module is refused", Call(__NR_finit_module), Errno(EPERM)},
          {"kexec_file_load is refused", Call(__NR_kexec_file_load),
           Errno(EPERM)},
          {"userfaultfd is refused", Call(__NR_userfaultfd), Errno(EPERM)},
          {"keyctl is refused", Call(__NR_keyctl), Errno(EPERM)},
          {"reboot is refused", Call(__NR_reboot), Errno(EPERM)},
          {"clock_settime is refused", Call(__NR_clock_settime), Errno(EPERM)},
          {"iopl is refused", Call(__NR_iopl), Errno(EPERM)},
          {"syslog is refused", Call(__NR_syslog), Errno(EPERM)},
          {"process_madvise is refused", Call(__NR_process_madvise),
           Errno(EPERM)},
          {"io_uring_setup is refused by default", Call(__NR_io_uring_setup),
           Errno(EPERM)},
          {"io_uring_enter is refused by default", Call(__NR_io_uring_enter),
           Errno(EPERM)},
          {"ptrace is allowed by default (landlock keeps it inside)",
           Call(__NR_ptrace), kAllow},
          {"ioctl TIOCSTI is refused", Call(__NR_ioctl, {0, TIOCSTI}),
           Errno(EPERM)},
          {"ioctl TIOCSTI with junk in the high word is refused",
           Call(__NR_ioctl, {0, kHigh | TIOCSTI}), Errno(EPERM)},
          {"ioctl TIOCLINUX is refused", Call(__NR_ioctl, {0, TIOCLINUX}),
           Errno(EPERM)},
          {"ioctl TIOCGWINSZ is allowed", Call(__NR_ioctl, {1, TIOCGWINSZ}),
           kAllow},
          {"prlimit64 on ourselves (pid 0) setting a limit is allowed",
           Call(__NR_prlimit64, {0, RLIMIT_NOFILE, 0x7000, 0}), kAllow},
          {"prlimit64 reading another process's limit is allowed",
           Call(__NR_prlimit64, {1234, RLIMIT_CPU, 0, 0x7000}), kAllow},
          {"prlimit64 setting another process's limit is refused",
           Call(__NR_prlimit64, {1234, RLIMIT_CPU, 0x7000, 0}), Errno(EPERM)},
          {"prlimit64 with a new limit above 4 GiB is refused",
           Call(__NR_prlimit64, {1234, RLIMIT_CPU, 1ULL << 32, 0}),
           Errno(EPERM)},
          {"prlimit64 pid in the high word only is pid 0, as to the kernel",
           Call(__NR_prlimit64, {kHigh, RLIMIT_CPU, 0x7000, 0}), kAllow},
      });
}

TEST(SeccompFilterTest, PolicyKnobsAllowIoUringAndDenyPtrace) {
  ExpectRows({.deny_io_uring = false, .deny_ptrace = true},
             {
                 {"io_uring_setup is allowed when the policy allows it",
                  Call(__NR_io_uring_setup), kAllow},
                 {"io_uring_register is allowed when the policy allows it",
                  Call(__NR_io_uring_register), kAllow},
                 {"ptrace is refused when the policy denies it",
                  Call(__NR_ptrace), Errno(EPERM)},
                 {"bpf stays refused", Call(__NR_bpf), Errno(EPERM)},
             });
}

// The kernel caches, per filter, the calls whose answer depends only on
// the number and the architecture: the filter never runs for them. Every
// call but the four argument-checked ones must stay cacheable.
TEST(SeccompFilterTest, OnlyFourCallsLookAtArguments) {
  const std::vector<sock_filter> prog = BuildSeccompFilter({});
  const std::set<int> checked = {__NR_clone, __NR_unshare, __NR_ioctl,
                                 __NR_prlimit64};
  for (int nr = 0; nr < 512; ++nr) {
    const Outcome run = Interpret(prog, Call(nr, {~0ULL, ~0ULL, ~0ULL, ~0ULL}));
    ASSERT_EQ(run.error, "") << "nr " << nr;
    EXPECT_EQ(run.read_args, checked.count(nr) == 1) << "nr " << nr;
  }
}

TEST(SeccompFilterTest, EveryTableRowIsRefusedAndNamed) {
  const SeccompOptions all = {.deny_io_uring = true, .deny_ptrace = true};
  const std::vector<sock_filter> prog = BuildSeccompFilter(all);
  std::set<int> seen;
  for (const SeccompDenial& d : DeniedSyscalls(all)) {
    EXPECT_TRUE(seen.insert(d.nr).second) << d.name << " listed twice";
    EXPECT_NE(std::string(d.reason), "") << d.name;
    const Outcome run = Interpret(prog, Call(d.nr));
    EXPECT_EQ(ActionName(run.action), ActionName(Errno(d.err))) << d.name;
  }
}

// The socket-family filter: what it hands the supervisor, on every entry
// an agent could use (x86-64, x32, the 32-bit int $0x80), and what it lets
// pass without a look (so the kernel's cache keeps it off the fast path).
TEST(SocketFamilyFilterTest, HandsOverEveryUnjudgedFamilyOnEveryEntry) {
  const std::vector<sock_filter> prog = BuildSocketFamilyFilter();
  ASSERT_FALSE(prog.empty());
  constexpr uint32_t kNotify = SECCOMP_RET_USER_NOTIF;
  constexpr int kX32 = 0x40000000;
  constexpr int kVsock = 40, kPacket = 17, kXdp = 44;
  const std::vector<Row> rows = {
      {"socket(AF_INET)", Call(__NR_socket, {AF_INET, SOCK_STREAM}), kAllow},
      {"socket(AF_INET6)", Call(__NR_socket, {AF_INET6}), kAllow},
      {"socket(AF_UNIX)", Call(__NR_socket, {AF_UNIX}), kAllow},
      {"socket(AF_NETLINK)", Call(__NR_socket, {AF_NETLINK}), kAllow},
      {"socket(AF_VSOCK)", Call(__NR_socket, {kVsock}), kNotify},
      {"socket(AF_PACKET)", Call(__NR_socket, {kPacket}), kNotify},
      {"socket(AF_XDP)", Call(__NR_socket, {kXdp}), kNotify},
      {"socket(AF_MAX + 10)", Call(__NR_socket, {56}), kNotify},
      // The kernel reads an int: high bits cannot smuggle AF_INET past.
      {"socket(AF_VSOCK | high bits)", Call(__NR_socket, {kHigh | kVsock}),
       kNotify},
      {"socketpair(AF_UNIX)", Call(__NR_socketpair, {AF_UNIX}), kAllow},
      {"socketpair(AF_VSOCK)", Call(__NR_socketpair, {kVsock}), kNotify},
      {"io_uring_setup", Call(__NR_io_uring_setup, {1, 0}), kNotify},
      {"x32 socket(AF_VSOCK)", Call(__NR_socket | kX32, {kVsock}), kNotify},
      {"x32 socket(AF_INET)", Call(__NR_socket | kX32, {AF_INET}), kAllow},
      {"x32 io_uring_setup", Call(__NR_io_uring_setup | kX32), kNotify},
      {"i386 socket(AF_VSOCK)", Call(kI386Socket, {kVsock}, AUDIT_ARCH_I386),
       kNotify},
      {"i386 socket(AF_INET)", Call(kI386Socket, {AF_INET}, AUDIT_ARCH_I386),
       kAllow},
      {"i386 socketpair(AF_VSOCK)",
       Call(kI386Socketpair, {kVsock}, AUDIT_ARCH_I386), kNotify},
      {"i386 socketcall (arguments in memory)",
       Call(kI386Socketcall, {1, 0x1000}, AUDIT_ARCH_I386), kNotify},
      {"i386 io_uring_setup",
       Call(__NR_io_uring_setup, {1, 0}, AUDIT_ARCH_I386), kNotify},
      // i386 number 41 is dup, not socket: passed.
      {"i386 dup (x86-64's socket number)",
       Call(__NR_socket, {kVsock}, AUDIT_ARCH_I386), kAllow},
      {"read", Call(__NR_read, {kVsock}), kAllow},
      // connect: the supervisor sees what could be a Unix path; inet
      // lengths (sockaddr_in, sockaddr_in6) pass without it.
      {"connect(16 bytes)", Call(__NR_connect, {3, 0x1000, 16}), kAllow},
      {"connect(28 bytes)", Call(__NR_connect, {3, 0x1000, 28}), kAllow},
      {"connect(110 bytes)", Call(__NR_connect, {3, 0x1000, 110}), kNotify},
      {"connect(15 bytes)", Call(__NR_connect, {3, 0x1000, 15}), kNotify},
      {"connect(16 | high bits)", Call(__NR_connect, {3, 0x1000, kHigh | 16}),
       kAllow},
      {"x32 connect(110 bytes)", Call(__NR_connect | kX32, {3, 0x1000, 110}),
       kNotify},
      {"i386 connect(110 bytes)",
       Call(kI386Connect, {3, 0x1000, 110}, AUDIT_ARCH_I386), kNotify},
      {"i386 connect(16 bytes)",
       Call(kI386Connect, {3, 0x1000, 16}, AUDIT_ARCH_I386), kAllow},
  };
  for (const Row& row : rows) {
    const Outcome run = Interpret(prog, row.call);
    EXPECT_EQ(run.error, "") << row.name;
    EXPECT_EQ(ActionName(run.action), ActionName(row.want)) << row.name;
  }
  // Only socket, socketpair and connect look at an argument.
  for (int nr = 0; nr < 512; ++nr) {
    const Outcome run = Interpret(prog, Call(nr, {~0ULL}));
    ASSERT_EQ(run.error, "") << "nr " << nr;
    EXPECT_EQ(run.read_args,
              nr == __NR_socket || nr == __NR_socketpair || nr == __NR_connect)
        << "nr " << nr;
  }
}

}  // namespace
}  // namespace sandfence::confine
