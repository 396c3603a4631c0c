#include "support/host_probe.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"
#include "host/bpf_lsm.h"

namespace sandfence::testing {
namespace {

// How a probe child ended, in words.
std::string Describe(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("wait status ", status);
}

absl::Status ProbeInt80() {
  const pid_t child = ::fork();
  if (child < 0) return absl::InternalError("fork for the int $0x80 probe");
  if (child == 0) {
    // getpid is 20 in the ia32 table.
    long ret;
    __asm__ volatile("int $0x80"
                     : "=a"(ret)
                     : "a"(20L)
                     : "memory", "r8", "r9", "r10", "r11");
    ::_exit(ret == ::getpid() ? 0 : 1);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "the 32-bit system call entry (int $0x80) does not work on this host: "
      "a probe child making getpid through it ",
      Describe(status)));
}

absl::Status ProbeIoUring() {
  io_uring_params p{};
  UniqueFd ring(static_cast<int>(::syscall(__NR_io_uring_setup, 1, &p)));
  if (!ring) {
    return absl::UnavailableError(absl::StrCat(
        "io_uring_setup fails outside any sandbox: ", std::strerror(errno),
        " (kernel.io_uring_disabled, or no io_uring)"));
  }
  return absl::OkStatus();
}

absl::Status ProbeIpv6Loopback() {
  UniqueFd s(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) {
    return absl::UnavailableError(
        absl::StrCat("no IPv6 sockets: ", std::strerror(errno)));
  }
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("::1 cannot be bound (IPv6 disabled on loopback?): ",
                     std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ProbeYama() {
  std::ifstream in("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (!(in >> scope) || scope <= 1) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "kernel.yama.ptrace_scope is ", scope,
      ": Yama refuses ptrace to processes without CAP_SYS_PTRACE"));
}

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

// Whether the kernel knows a BPF helper, asked of the verifier by libbpf
// (a helper id the kernel lacks is "invalid func unknown#N" there).
absl::Status ProbeHelper(bpf_prog_type type, bpf_func_id id, const char* name,
                         const char* since) {
  const int r = libbpf_probe_bpf_helper(type, id, nullptr);
  if (r == 1) return absl::OkStatus();
  if (r == 0) {
    return absl::UnavailableError(
        absl::StrCat("this kernel has no ", name, " helper (", since, ")"));
  }
  return absl::UnavailableError(
      absl::StrCat("cannot probe the ", name, " helper: ", std::strerror(-r)));
}

absl::Status ProbeEgressKernel() {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  uint64_t cookie = 0;
  socklen_t len = sizeof(cookie);
  if (!s ||
      ::getsockopt(s.get(), SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0) {
    return absl::UnavailableError(
        absl::StrCat("this kernel has no SO_NETNS_COOKIE socket option "
                     "(Linux 5.14+): ",
                     std::strerror(errno)));
  }
  return ProbeHelper(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_FUNC_loop, "bpf_loop",
                     "Linux 5.17+");
}

absl::Status ProbeSignalEnforcerKernel() {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (vmlinux == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("no kernel BTF: ", std::strerror(errno)));
  }
  std::string missing;
  int n = 0;
  for (const char* kfunc : {"bpf_task_from_vpid", "bpf_send_signal_task"}) {
    if (btf__find_by_name_kind(vmlinux, kfunc, BTF_KIND_FUNC) < 0) {
      absl::StrAppend(&missing, n++ == 0 ? "" : " and ", kfunc);
    }
  }
  btf__free(vmlinux);
  if (n == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "this kernel has no ", missing, n == 1 ? " kfunc" : " kfuncs",
      " (Linux 6.13+), which the signal enforcer calls"));
}

}  // namespace

const absl::Status& HostKernelRunsEgress() {
  static const absl::Status s = ProbeEgressKernel();
  return s;
}

const absl::Status& HostKernelRunsLsmEnforcer() {
  static const absl::Status s =
      ProbeHelper(BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_FUNC_get_current_task_btf,
                  "bpf_get_current_task_btf", "Linux 5.11+");
  return s;
}

static absl::Status ProbeUnixHooks() {
  const bpf_insn insns[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1},
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  // BPF_CGROUP_UNIX_CONNECT: 49 (Debian 12's headers predate it).
  LIBBPF_OPTS(bpf_prog_load_opts, opts,
              .expected_attach_type = static_cast<bpf_attach_type>(49));
  UniqueFd fd(bpf_prog_load(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, "sf_probe_unix",
                            "GPL", insns, 2, &opts));
  if (fd) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("this kernel has no cgroup connect_unix hook (Linux 6.7+): ",
                   std::strerror(errno)));
}

const absl::Status& HostKernelHasUnixHooks() {
  static const absl::Status s = ProbeUnixHooks();
  return s;
}

const absl::Status& HostChecksUnixSockets() {
  static const absl::Status s = []() -> absl::Status {
    if (HostKernelHasUnixHooks().ok()) return absl::OkStatus();
    absl::Status lsm = sandfence::ProbeBpfLsm();
    if (lsm.ok()) return lsm;
    return absl::UnavailableError(
        absl::StrCat(HostKernelHasUnixHooks().message(),
                     "; and BPF LSM does not run here: ", lsm.message()));
  }();
  return s;
}

const absl::Status& HostKernelRunsSignalEnforcer() {
  static const absl::Status s = ProbeSignalEnforcerKernel();
  return s;
}

const absl::Status& HostYamaAllowsPtrace() {
  static const absl::Status s = ProbeYama();
  return s;
}

const absl::Status& HostInt80() {
  static const absl::Status s = ProbeInt80();
  return s;
}

const absl::Status& HostIoUring() {
  static const absl::Status s = ProbeIoUring();
  return s;
}

const absl::Status& HostIpv6Loopback() {
  static const absl::Status s = ProbeIpv6Loopback();
  return s;
}

}  // namespace sandfence::testing
