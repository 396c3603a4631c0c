#include "confine/seccomp_filter.h"

#include <asm/ioctls.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>

namespace sandfence::confine {
namespace {

// Numbers newer than Debian 12's headers (x86-64 table).
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif
#ifndef __NR_quotactl_fd
#define __NR_quotactl_fd 443
#endif
#ifndef __NR_process_madvise
#define __NR_process_madvise 440
#endif

constexpr uint32_t kX32SyscallBit = 0x40000000;

constexpr uint32_t kOffNr = offsetof(struct seccomp_data, nr);
constexpr uint32_t kOffArch = offsetof(struct seccomp_data, arch);
// Little-endian: an argument's low 32 bits come first.
constexpr uint32_t ArgLow(int i) {
  return offsetof(struct seccomp_data, args) + 8 * i;
}
constexpr uint32_t ArgHigh(int i) { return ArgLow(i) + 4; }

constexpr uint32_t Errno(int err) {
  return SECCOMP_RET_ERRNO | (static_cast<uint32_t>(err) & SECCOMP_RET_DATA);
}

// A few instructions with symbolic forward jumps, resolved at the end
// (classic BPF jumps are 8-bit forward offsets).
class Assembler {
 public:
  using Label = int;

  Label NewLabel() {
    labels_.push_back(-1);
    return static_cast<Label>(labels_.size() - 1);
  }
  void Bind(Label l) { labels_[l] = static_cast<int>(code_.size()); }

  void Load(uint32_t offset) {
    code_.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset));
  }
  void And(uint32_t k) { code_.push_back(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, k)); }
  void Ret(uint32_t action) {
    code_.push_back(BPF_STMT(BPF_RET | BPF_K, action));
  }
  // if (A op k) goto t else goto f; kNext falls through.
  static constexpr Label kNext = -1;
  void Jump(uint16_t op, uint32_t k, Label t, Label f) {
    fixups_.push_back({code_.size(), t, f});
    code_.push_back(BPF_JUMP(BPF_JMP | op | BPF_K, k, 0, 0));
  }

  // Empty when a jump does not fit (backward, or past 255): a bug in the
  // program below, which the caller reports instead of loading.
  std::vector<sock_filter> Finish() {
    for (const Fixup& f : fixups_) {
      sock_filter& insn = code_[f.at];
      const int t = Offset(f.at, f.t), e = Offset(f.at, f.f);
      if (t < 0 || e < 0) return {};
      insn.jt = static_cast<uint8_t>(t);
      insn.jf = static_cast<uint8_t>(e);
    }
    return std::move(code_);
  }

 private:
  struct Fixup {
    size_t at;
    Label t, f;
  };
  int Offset(size_t at, Label l) const {
    if (l == kNext) return 0;
    const int off = labels_[l] - static_cast<int>(at) - 1;
    return off < 0 || off > 255 ? -1 : off;
  }
  std::vector<sock_filter> code_;
  std::vector<int> labels_;
  std::vector<Fixup> fixups_;
};

}  // namespace

std::vector<SeccompDenial> DeniedSyscalls(const SeccompOptions& options) {
  std::vector<SeccompDenial> d = {
      {__NR_clone3, "clone3", ENOSYS, "flags out of reach; libc falls back"},
      {__NR_setns, "setns", EPERM, "joins another namespace"},
      {__NR_mount, "mount", EPERM, "file system view"},
      {__NR_umount2, "umount2", EPERM, "file system view"},
      {__NR_pivot_root, "pivot_root", EPERM, "file system view"},
      {__NR_chroot, "chroot", EPERM, "file system view"},
      {__NR_fsopen, "fsopen", EPERM, "new mount API"},
      {__NR_fsconfig, "fsconfig", EPERM, "new mount API"},
      {__NR_fsmount, "fsmount", EPERM, "new mount API"},
      {__NR_fspick, "fspick", EPERM, "new mount API"},
      {__NR_move_mount, "move_mount", EPERM, "new mount API"},
      {__NR_open_tree, "open_tree", EPERM, "new mount API"},
      {__NR_open_tree_attr, "open_tree_attr", EPERM, "new mount API"},
      {__NR_mount_setattr, "mount_setattr", EPERM, "new mount API"},
      {__NR_bpf, "bpf", EPERM, "the enforcer's programs and maps"},
      {__NR_perf_event_open, "perf_event_open", EPERM, "kernel events"},
      {__NR_kcmp, "kcmp", EPERM, "other processes' kernel objects"},
      {__NR_open_by_handle_at, "open_by_handle_at", EPERM,
       "opens around path checks"},
      {__NR_name_to_handle_at, "name_to_handle_at", EPERM,
       "file handles for open_by_handle_at"},
      {__NR_init_module, "init_module", EPERM, "kernel code"},
      {__NR_finit_module, "finit_module", EPERM, "kernel code"},
      {__NR_delete_module, "delete_module", EPERM, "kernel code"},
      {__NR_kexec_load, "kexec_load", EPERM, "replaces the kernel"},
      {__NR_kexec_file_load, "kexec_file_load", EPERM, "replaces the kernel"},
      {__NR_userfaultfd, "userfaultfd", EPERM, "race amplifier"},
      {__NR_keyctl, "keyctl", EPERM, "keyrings are not namespaced"},
      {__NR_add_key, "add_key", EPERM, "keyrings are not namespaced"},
      {__NR_request_key, "request_key", EPERM, "keyrings are not namespaced"},
      {__NR_reboot, "reboot", EPERM, "host-wide"},
      {__NR_swapon, "swapon", EPERM, "host-wide memory"},
      {__NR_swapoff, "swapoff", EPERM, "host-wide memory"},
      {__NR_acct, "acct", EPERM, "host-wide accounting"},
      {__NR_settimeofday, "settimeofday", EPERM, "the host's clock"},
      {__NR_clock_settime, "clock_settime", EPERM, "the host's clock"},
      {__NR_clock_adjtime, "clock_adjtime", EPERM, "the host's clock"},
      {__NR_adjtimex, "adjtimex", EPERM, "the host's clock"},
      {__NR_iopl, "iopl", EPERM, "raw I/O ports"},
      {__NR_ioperm, "ioperm", EPERM, "raw I/O ports"},
      {__NR_quotactl, "quotactl", EPERM, "host-wide quotas"},
      {__NR_quotactl_fd, "quotactl_fd", EPERM, "host-wide quotas"},
      {__NR_syslog, "syslog", EPERM, "the kernel log"},
      {__NR_vhangup, "vhangup", EPERM, "others' terminal"},
      {__NR_lookup_dcookie, "lookup_dcookie", EPERM, "kernel profiling"},
      {__NR_process_madvise, "process_madvise", EPERM,
       "another process's memory; CAP_PERFMON passes LSMs"},
      {__NR_pidfd_getfd, "pidfd_getfd", EPERM,
       "takes another process's socket while the Unix check's kill is "
       "pending"},
  };
  if (options.deny_io_uring) {
    d.push_back({__NR_io_uring_setup, "io_uring_setup", EPERM,
                 "bypasses syscall-level checks"});
    d.push_back({__NR_io_uring_enter, "io_uring_enter", EPERM,
                 "bypasses syscall-level checks"});
    d.push_back({__NR_io_uring_register, "io_uring_register", EPERM,
                 "bypasses syscall-level checks"});
  }
  if (options.deny_ptrace) {
    d.push_back({__NR_ptrace, "ptrace", EPERM, "the policy denies ptrace"});
  }
  return d;
}

std::vector<sock_filter> BuildSeccompFilter(const SeccompOptions& options) {
  Assembler a;
  using L = Assembler::Label;
  // Verdicts sit beside the checks that reach them: every jump stays short
  // however long the table grows.
  const auto block = [&a](auto&& body) {
    const L deny = a.NewLabel(), allow = a.NewLabel();
    body(deny, allow);
    a.Bind(allow);
    a.Ret(SECCOMP_RET_ALLOW);
    a.Bind(deny);
    a.Ret(Errno(EPERM));
  };

  // The architecture first: numbers mean different calls in each.
  {
    const L next = a.NewLabel();
    a.Load(kOffArch);
    a.Jump(BPF_JEQ, AUDIT_ARCH_X86_64, next, Assembler::kNext);
    a.Ret(Errno(EPERM));
    a.Bind(next);
  }
  {
    const L next = a.NewLabel();
    a.Load(kOffNr);
    a.Jump(BPF_JSET, kX32SyscallBit, Assembler::kNext, next);
    a.Ret(Errno(EPERM));
    a.Bind(next);
  }

  for (const SeccompDenial& d : DeniedSyscalls(options)) {
    const L next = a.NewLabel();
    a.Jump(BPF_JEQ, static_cast<uint32_t>(d.nr), Assembler::kNext, next);
    a.Ret(Errno(d.err));
    a.Bind(next);
  }

  // clone(flags, ...): the kernel reads only the low 32 bits of flags, and
  // its low byte is the exit signal.
  {
    const L next = a.NewLabel();
    a.Jump(BPF_JEQ, __NR_clone, Assembler::kNext, next);
    block([&](L deny, L allow) {
      a.Load(ArgLow(0));
      a.Jump(BPF_JSET, kCloneNamespaceFlags, deny, allow);
    });
    a.Bind(next);
  }
  // unshare(flags): unknown high bits make the kernel answer EINVAL, so the
  // low 32 bits decide.
  {
    const L next = a.NewLabel();
    a.Jump(BPF_JEQ, __NR_unshare, Assembler::kNext, next);
    block([&](L deny, L allow) {
      a.Load(ArgLow(0));
      a.Jump(BPF_JSET, kUnshareNamespaceFlags, deny, allow);
    });
    a.Bind(next);
  }
  // ioctl(fd, cmd, arg): cmd is an unsigned int to the kernel.
  {
    const L next = a.NewLabel();
    a.Jump(BPF_JEQ, __NR_ioctl, Assembler::kNext, next);
    block([&](L deny, L allow) {
      a.Load(ArgLow(1));
      a.Jump(BPF_JEQ, TIOCSTI, deny, Assembler::kNext);
      a.Jump(BPF_JEQ, TIOCLINUX, deny, allow);
    });
    a.Bind(next);
  }
  // prlimit64(pid, resource, new, old): reading any process's limits, and
  // setting our own (pid 0, as libc's setrlimit does), stay allowed.
  {
    const L next = a.NewLabel();
    a.Jump(BPF_JEQ, __NR_prlimit64, Assembler::kNext, next);
    block([&](L deny, L allow) {
      a.Load(ArgLow(0));
      a.Jump(BPF_JEQ, 0, allow, Assembler::kNext);
      a.Load(ArgLow(2));
      a.Jump(BPF_JEQ, 0, Assembler::kNext, deny);
      a.Load(ArgHigh(2));
      a.Jump(BPF_JEQ, 0, allow, deny);
    });
    a.Bind(next);
  }

  a.Ret(SECCOMP_RET_ALLOW);
  return a.Finish();
}

bool IsJudgedSocketFamily(int family) {
  for (int judged : kJudgedSocketFamilies) {
    if (family == judged) return true;
  }
  return false;
}

std::vector<sock_filter> BuildSocketFamilyFilter() {
  using L = Assembler::Label;
  Assembler a;
  const L x86_64 = a.NewLabel(), i386 = a.NewLabel(), connect = a.NewLabel(),
          family = a.NewLabel(), notify = a.NewLabel(), allow = a.NewLabel();
  a.Load(kOffArch);
  a.Jump(BPF_JEQ, AUDIT_ARCH_X86_64, x86_64, Assembler::kNext);
  a.Jump(BPF_JEQ, AUDIT_ARCH_I386, i386, allow);

  // x32 numbers are the x86-64 ones with kX32SyscallBit set: one check.
  a.Bind(x86_64);
  a.Load(kOffNr);
  a.And(~kX32SyscallBit);
  a.Jump(BPF_JEQ, __NR_socket, family, Assembler::kNext);
  a.Jump(BPF_JEQ, __NR_socketpair, family, Assembler::kNext);
  a.Jump(BPF_JEQ, __NR_connect, connect, Assembler::kNext);
  a.Jump(BPF_JEQ, __NR_io_uring_setup, notify, allow);

  // The 32-bit entry: socketcall's arguments are in memory, out of the
  // filter's reach, so the supervisor gets every one.
  a.Bind(i386);
  a.Load(kOffNr);
  a.Jump(BPF_JEQ, kI386Socket, family, Assembler::kNext);
  a.Jump(BPF_JEQ, kI386Socketpair, family, Assembler::kNext);
  a.Jump(BPF_JEQ, kI386Connect, connect, Assembler::kNext);
  a.Jump(BPF_JEQ, kI386Socketcall, notify, Assembler::kNext);
  a.Jump(BPF_JEQ, __NR_io_uring_setup, notify, allow);

  // The address length (an int: the low 32 bits): inet connects, the
  // common case, never wait for the supervisor.
  a.Bind(connect);
  a.Load(ArgLow(2));
  a.Jump(BPF_JEQ, kInetAddrLen, allow, Assembler::kNext);
  a.Jump(BPF_JEQ, kInet6AddrLen, allow, notify);

  // The kernel reads the family as an int: the low 32 bits.
  a.Bind(family);
  a.Load(ArgLow(0));
  for (int judged : kJudgedSocketFamilies) {
    a.Jump(BPF_JEQ, static_cast<uint32_t>(judged), allow, Assembler::kNext);
  }
  a.Bind(notify);
  a.Ret(SECCOMP_RET_USER_NOTIF);
  a.Bind(allow);
  a.Ret(SECCOMP_RET_ALLOW);
  return a.Finish();
}

}  // namespace sandfence::confine
