#include "sandbox/netns.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sandfence {

absl::Status EnsureLoopbackUp() {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) return ErrnoError(errno, "socket (to look at the loopback)");
  ifreq ifr;
  std::memset(&ifr, 0, sizeof(ifr));
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (::ioctl(s.get(), SIOCGIFFLAGS, &ifr) != 0) {
    return ErrnoError(errno, "the loopback's flags (SIOCGIFFLAGS lo)");
  }
  if (ifr.ifr_flags & IFF_UP) return absl::OkStatus();
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(s.get(), SIOCSIFFLAGS, &ifr) != 0) {
    const int err = errno;
    return Rejected(absl::StrCat(
        "the network namespace's loopback is down and could not be brought "
        "up (SIOCSIFFLAGS lo: ",
        std::strerror(err), ")"));
  }
  return absl::OkStatus();
}

absl::Status InNetns(int netns_fd, absl::FunctionRef<absl::Status()> fn) {
  absl::Status status;
  std::thread thread([&] {
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      status = ErrnoError(errno, "setns into the sandbox's network namespace");
      return;
    }
    status = fn();
  });
  thread.join();
  return status;
}

absl::StatusOr<UniqueFd> CreateNetns() {
  absl::StatusOr<UniqueFd> out;
  std::thread thread([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      out = ErrnoError(errno, "unshare(CLONE_NEWNET)");
      return;
    }
    if (absl::Status s = EnsureLoopbackUp(); !s.ok()) {
      out = s;
      return;
    }
    UniqueFd fd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!fd) {
      out = ErrnoError(errno, "open /proc/thread-self/ns/net");
      return;
    }
    out = std::move(fd);
  });
  thread.join();
  return out;
}

absl::StatusOr<UniqueFd> OpenNetns(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return ErrnoError(errno, absl::StrCat("network namespace \"", path, "\""));
  }
  const int type = ::ioctl(fd.get(), NS_GET_NSTYPE);
  if (type < 0 || type != CLONE_NEWNET) {
    return Malformed(absl::StrCat("\"", path,
                                  "\" is not a network namespace (give "
                                  "/proc/PID/ns/net or /run/netns/NAME)"));
  }
  return fd;
}

}  // namespace sandfence
