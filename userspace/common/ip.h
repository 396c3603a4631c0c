// IP addresses, prefixes and socket endpoints as values: one representation
// used from the compiler down to the kernel maps.
#ifndef SANDFENCE_COMMON_IP_H_
#define SANDFENCE_COMMON_IP_H_

#include <sys/socket.h>

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace sandfence {

class IpAddress {
 public:
  // Parses a literal without brackets ("10.0.0.1", "::1", "::ffff:1.2.3.4").
  static std::optional<IpAddress> Parse(absl::string_view text);
  static IpAddress V4(uint32_t host_order);
  static IpAddress FromBytes(int family, const uint8_t* bytes);

  int family() const { return family_; }  // AF_INET or AF_INET6
  bool is_v4() const { return family_ == AF_INET; }
  // 4 bytes for IPv4, 16 for IPv6, network order.
  const uint8_t* bytes() const { return bytes_.data(); }
  int bit_length() const { return is_v4() ? 32 : 128; }

  bool IsV4Mapped() const;    // ::ffff:a.b.c.d
  IpAddress Unmapped() const;  // a.b.c.d for a mapped address, else itself
  bool IsLoopback() const;     // 127/8, ::1, ::ffff:127/104
  bool IsUnspecified() const;  // 0.0.0.0, ::

  std::string ToString() const;

  friend auto operator<=>(const IpAddress&, const IpAddress&) = default;
  friend bool operator==(const IpAddress&, const IpAddress&) = default;

 private:
  int family_ = AF_INET;
  std::array<uint8_t, 16> bytes_{};
};

class IpPrefix {
 public:
  // "10.0.0.0/8", "fd00::/8", or a bare address (a host prefix). Host bits
  // set below the prefix length are an error ("10.0.0.1/8").
  static absl::StatusOr<IpPrefix> Parse(absl::string_view text);
  static IpPrefix Host(const IpAddress& addr);
  IpPrefix(const IpAddress& addr, int length) : addr_(addr), length_(length) {}

  const IpAddress& address() const { return addr_; }
  int length() const { return length_; }
  bool is_host() const { return length_ == addr_.bit_length(); }
  bool Contains(const IpAddress& addr) const;
  bool Contains(const IpPrefix& other) const;
  std::string ToString() const;  // host prefixes print as the bare address

  friend auto operator<=>(const IpPrefix&, const IpPrefix&) = default;
  friend bool operator==(const IpPrefix&, const IpPrefix&) = default;

 private:
  IpAddress addr_;
  int length_ = 0;
};

// An address and a port, written "1.2.3.4:53" or "[::1]:53".
struct HostPort {
  IpAddress addr;
  uint16_t port = 0;

  // "IP", "IP:PORT", "[IPv6]" or "[IPv6]:PORT"; default_port when absent.
  static absl::StatusOr<HostPort> Parse(absl::string_view text,
                                        uint16_t default_port);
  std::string ToString() const;

  friend auto operator<=>(const HostPort&, const HostPort&) = default;
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

}  // namespace sandfence

#endif  // SANDFENCE_COMMON_IP_H_
