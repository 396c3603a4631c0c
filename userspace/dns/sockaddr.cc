#include "dns/sockaddr.h"

#include <fcntl.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

#include "common/status.h"

namespace sandfence::dns {

HostPort FromSockaddr(const sockaddr_storage& ss) {
  HostPort hp;
  if (ss.ss_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
    hp.addr = IpAddress::FromBytes(
        AF_INET, reinterpret_cast<const uint8_t*>(&sin->sin_addr));
    hp.port = ntohs(sin->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    hp.addr = IpAddress::FromBytes(
        AF_INET6, reinterpret_cast<const uint8_t*>(&sin6->sin6_addr));
    hp.port = ntohs(sin6->sin6_port);
  }
  return hp;
}

socklen_t ToSockaddr(const HostPort& hp, sockaddr_storage* ss) {
  std::memset(ss, 0, sizeof(*ss));
  if (hp.addr.is_v4()) {
    auto* sin = reinterpret_cast<sockaddr_in*>(ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(hp.port);
    std::memcpy(&sin->sin_addr, hp.addr.bytes(), 4);
    return sizeof(sockaddr_in);
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(ss);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(hp.port);
  std::memcpy(&sin6->sin6_addr, hp.addr.bytes(), 16);
  return sizeof(sockaddr_in6);
}

absl::StatusOr<HostPort> SockName(int fd) {
  sockaddr_storage ss = {};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return ErrnoError(errno, "getsockname");
  }
  return FromSockaddr(ss);
}

absl::Status SetNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return ErrnoError(errno, "fcntl O_NONBLOCK");
  }
  return absl::OkStatus();
}

}  // namespace sandfence::dns
