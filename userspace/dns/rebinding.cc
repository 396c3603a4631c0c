#include "dns/rebinding.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/status.h"

namespace sandfence::dns {
std::optional<std::string> ProtectedRange(
    const IpAddress& addr, absl::Span<const IpAddress> host_addresses,
    Protect protect) {
  const IpAddress a = addr.Unmapped();
  const uint8_t* b = a.bytes();
  if (a.is_v4()) {
    if (b[0] == 0) return "this network (0.0.0.0/8, which reaches the host)";
    if (b[0] == 127) return "loopback (127.0.0.0/8)";
    if (b[0] == 169 && b[1] == 254) {
      return "link-local (169.254.0.0/16, cloud metadata among it)";
    }
    if ((b[0] & 0xf0) == 224) return "multicast (224.0.0.0/4)";
    if ((b[0] & 0xf0) == 240) return "reserved or broadcast (240.0.0.0/4)";
  } else {
    static constexpr uint8_t kZero[15] = {};
    if (std::memcmp(b, kZero, 15) == 0 && (b[15] == 0 || b[15] == 1)) {
      return b[15] == 1 ? "loopback (::1)" : "unspecified (::)";
    }
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local (fe80::/10)";
    if (b[0] == 0xff) return "multicast (ff00::/8)";
  }
  // The host's own before the private ranges: the more telling reason.
  if (std::find(host_addresses.begin(), host_addresses.end(), a) !=
      host_addresses.end()) {
    return "the host's own address";
  }
  if (protect == Protect::kHostAndPrivate) {
    if (a.is_v4()) {
      if (b[0] == 10) return "private (10.0.0.0/8)";
      if (b[0] == 172 && (b[1] & 0xf0) == 16) return "private (172.16.0.0/12)";
      if (b[0] == 192 && b[1] == 168) return "private (192.168.0.0/16)";
      if (b[0] == 100 && (b[1] & 0xc0) == 64) {
        return "private (100.64.0.0/10, shared address space)";
      }
    } else if ((b[0] & 0xfe) == 0xfc) {
      return "private (fc00::/7, unique local)";
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<IpAddress>> ReadHostAddresses() {
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return ErrnoError(errno, "getifaddrs (the host's own addresses)");
  }
  std::vector<IpAddress> out;
  for (const struct ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      out.push_back(IpAddress::FromBytes(
          AF_INET, reinterpret_cast<const uint8_t*>(&sin->sin_addr)));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      out.push_back(
          IpAddress::FromBytes(AF_INET6, sin6->sin6_addr.s6_addr).Unmapped());
    }
  }
  freeifaddrs(list);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<absl::Span<const IpAddress>> HostAddresses::Get(absl::Time now) {
  if (now - read_at_ >= max_age_) {
    absl::StatusOr<std::vector<IpAddress>> fresh = ReadHostAddresses();
    if (!fresh.ok()) return fresh.status();
    addresses_ = *std::move(fresh);
    read_at_ = now;
  }
  return absl::MakeConstSpan(addresses_);
}

}  // namespace sandfence::dns
