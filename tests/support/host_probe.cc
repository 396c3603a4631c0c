#include "support/host_probe.h"

#include <arpa/inet.h>
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

}  // namespace

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
