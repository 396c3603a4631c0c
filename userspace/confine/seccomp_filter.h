// The seccomp filter of a process sandfence starts (x86-64 only): a classic
// BPF program written by hand (Debian 12's libseccomp cannot export one to
// memory), built in the parent, installed by the child just before exec.
//
// Every refusal is SECCOMP_RET_ERRNO, never a kill: a program that probes
// a call gets an answer it can handle. The cost of that choice: seccomp
// counts nothing and logs nothing for ERRNO, so denials cannot be counted
// here (only a SECCOMP_RET_USER_NOTIF supervisor or RET_LOG could, and both
// change behaviour or flood the log). Calls whose verdict depends only on
// the architecture and the number are answered from the kernel's per-filter
// action cache (Linux 5.11+): the filter never runs for them, so the
// ordinary system calls pay nothing for it.
//
// What is refused, and why:
//
//   any arch but AUDIT_ARCH_X86_64    EPERM  the int $0x80 / 32-bit entry has
//                                            its own numbers: a filter by
//                                            number would not apply there
//   any x32 number (nr & 0x40000000)  EPERM  same calls under other numbers
//   clone3                            ENOSYS its flags are in memory, out of
//                                            the filter's reach; libc falls
//                                            back to clone on ENOSYS
//   clone with CLONE_NEWUSER, NEWNS,  EPERM  a new namespace: user namespaces
//     NEWPID, NEWNET, NEWUTS, NEWIPC,        give back every capability
//     NEWCGROUP                              inside them (and the kernel
//                                            attack surface that needs it);
//                                            the others escape the network,
//                                            mount and pid views sandfence
//                                            set up (clone's low byte is the
//                                            exit signal, so CLONE_NEWTIME
//                                            cannot be told apart there)
//   unshare with any CLONE_NEW*       EPERM  the same, NEWTIME included
//   setns                             EPERM  joins another namespace
//   mount, umount2, pivot_root,       EPERM  rearranging the file system
//     chroot, fsopen, fsconfig,              view: hides or replaces what
//     fsmount, fspick, move_mount,           Landlock and the daemon rely on
//     open_tree, open_tree_attr,             (Landlock refuses them too)
//     mount_setattr
//   bpf                               EPERM  programs and maps: the enforcer
//                                            itself lives there
//   perf_event_open                   EPERM  kernel and other processes'
//                                            events; large attack surface
//   kcmp                              EPERM  compares other processes'
//                                            kernel objects (fd, mm, files)
//   open_by_handle_at,                EPERM  opens files by handle, around
//     name_to_handle_at                      every path-based check
//   init_module, finit_module,        EPERM  kernel code
//     delete_module
//   kexec_load, kexec_file_load       EPERM  replaces the kernel
//   userfaultfd                       EPERM  stalls kernel copies at will:
//                                            the classic race amplifier
//   keyctl, add_key, request_key      EPERM  keyrings are not namespaced
//                                            (another process's keys)
//   reboot                            EPERM  host-wide
//   swapon, swapoff                   EPERM  host-wide memory
//   acct                              EPERM  host-wide process accounting
//   settimeofday, clock_settime,      EPERM  the host's clock (adjtimex and
//     clock_adjtime, adjtimex                clock_adjtime also answer
//                                            read-only queries; the struct
//                                            is in memory, out of reach)
//   iopl, ioperm                      EPERM  raw I/O ports
//   quotactl, quotactl_fd             EPERM  host-wide quotas
//   syslog                            EPERM  the kernel log (addresses)
//   vhangup                           EPERM  hangs up the terminal of others
//   lookup_dcookie                    EPERM  kernel profiling cookies
//   process_madvise                   EPERM  acts on another process's
//                                            memory; its mm_access check
//                                            lets CAP_PERFMON and
//                                            CAP_SYS_ADMIN past every LSM
//   pidfd_getfd                       EPERM  copies another process's
//                                            descriptor: a socket whose
//                                            connect the Unix check (without
//                                            BPF LSM) kills at its exit
//                                            could survive in the copier
//   prlimit64 setting another         EPERM  RLIMIT_CPU on another process
//     process's limits (pid != 0)            makes the kernel send it
//                                            SIGXCPU then SIGKILL: a signal
//                                            out that Landlock's signal
//                                            scope never sees (same-uid
//                                            processes need no capability)
//   ioctl TIOCSTI, TIOCLINUX          EPERM  pushes input into a terminal
//                                            another process reads (the
//                                            shell that started us); checked
//                                            on the low 32 bits, as the
//                                            kernel reads the command
//   io_uring_setup, io_uring_enter,   EPERM  when deny_io_uring: its
//     io_uring_register                      operations bypass every
//                                            syscall-level check here
//   ptrace                            EPERM  when deny_ptrace (Landlock
//                                            already keeps ptrace inside the
//                                            sandbox)
//
// execve, seccomp and everything else stay allowed: the filter is installed
// last, just before exec.
#ifndef SANDFENCE_CONFINE_SECCOMP_FILTER_H_
#define SANDFENCE_CONFINE_SECCOMP_FILTER_H_

#include <linux/filter.h>
#include <linux/sched.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sandfence::confine {

struct SeccompOptions {
  bool deny_io_uring = true;
  bool deny_ptrace = false;
};

// One row of the table above, for descriptions and tests.
struct SeccompDenial {
  int nr;
  const char* name;
  int err;             // EPERM or ENOSYS
  const char* reason;  // short
};

// The calls refused outright (no argument looked at) under these options.
std::vector<SeccompDenial> DeniedSyscalls(const SeccompOptions& options);

// The program: arch check, x32 check, the table, the argument checks.
// Empty only if the program does not assemble (a jump out of range): a bug
// the caller reports rather than load.
std::vector<sock_filter> BuildSeccompFilter(const SeccompOptions& options);

// The socket families a restricted phase can judge: AF_INET and AF_INET6
// (the cgroup sock_addr hooks), AF_UNIX (the Unix hooks), AF_NETLINK (the
// kernel itself: routes, addresses; nothing leaves the host). Every other
// family -- vsock reaches the hypervisor, packet and XDP sockets send
// frames no cgroup hook sees, SMC, RDS, TIPC, CAN, Bluetooth, ... -- has
// no hook that judges it, so a restricted phase refuses its creation.
inline constexpr int kJudgedSocketFamilies[] = {AF_UNIX, AF_INET, AF_INET6,
                                                AF_NETLINK};
bool IsJudgedSocketFamily(int family);

// 32-bit entry numbers (arch/x86/entry/syscalls/syscall_32.tbl).
inline constexpr int kI386Socketcall = 102;
inline constexpr int kI386Socket = 359;
inline constexpr int kI386Socketpair = 360;
inline constexpr int kI386Connect = 362;
// The address lengths of sockaddr_in and sockaddr_in6: a connect with one
// of them is left to the kernel's hooks (an AF_UNIX path that short is
// judged by its name there, never taken for the sandbox's own).
inline constexpr uint32_t kInetAddrLen = 16;
inline constexpr uint32_t kInet6AddrLen = 28;

// The socket-family filter, apart from the guard's (installed whatever the
// guard, with a listener: confine/socket_supervisor.h). It passes every
// call the supervisor need not see without running for it (the kernel's
// action cache) and hands it:
//   socket, socketpair    with a family not in kJudgedSocketFamilies
//                         (x86-64, x32 and the 32-bit entry)
//   socketcall            the 32-bit multiplexer: arguments in memory
//   io_uring_setup        its IORING_OP_SOCKET creates sockets without
//                         the socket() system call
//   connect               with an address length other than an inet
//                         one's (confine/unix_broker.h: Unix paths)
// The supervisor answers each by the phase the sandbox is in when it asks.
std::vector<sock_filter> BuildSocketFamilyFilter();

// The namespace flags refused in clone's and unshare's flags.
inline constexpr uint32_t kCloneNamespaceFlags =
    CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS |
    CLONE_NEWIPC | CLONE_NEWCGROUP;
inline constexpr uint32_t kUnshareNamespaceFlags =
    kCloneNamespaceFlags | CLONE_NEWTIME;

}  // namespace sandfence::confine

#endif  // SANDFENCE_CONFINE_SECCOMP_FILTER_H_
