// DNS rebinding: an allowed name whose answer points at the host itself
// (loopback, its own interface addresses) or at its link (link-local, the
// cloud metadata address among them, multicast) would hand the agent the
// host's own services under a grant meant for a remote one. The filter
// opens such an address only where the phase says so
// (dns.answers_may_point_at); otherwise the whole answer is refused.
#ifndef SANDFENCE_DNS_REBINDING_H_
#define SANDFENCE_DNS_REBINDING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/ip.h"

namespace sandfence::dns {

// Which ranges are protected. A name only a wildcard allows is the
// agent's to choose, and services answer any address for a name chosen
// well ("10.0.0.1.sslip.io"), so for it the private ranges (the cluster's
// own network) are protected too.
enum class Protect : uint8_t { kHost, kHostAndPrivate };

// Why no answer may open `addr` unless a grant covers it ("loopback",
// "link-local", "multicast", "this network", "reserved or broadcast", "the
// host's own address", and with kHostAndPrivate "private"), or nullopt for
// an ordinary address. IPv4-mapped IPv6 addresses are judged as the IPv4
// address they carry.
std::optional<std::string> ProtectedRange(
    const IpAddress& addr, absl::Span<const IpAddress> host_addresses,
    Protect protect = Protect::kHost);

// The host's interface addresses (getifaddrs), read again once they are
// older than `max_age`: interfaces come and go on a long-running host.
// Not thread-safe: the filter's loop is its only user.
class HostAddresses {
 public:
  explicit HostAddresses(absl::Duration max_age = absl::Seconds(2))
      : max_age_(max_age) {}
  // Errors: getifaddrs's, with errno; the caller refuses the answer then.
  absl::StatusOr<absl::Span<const IpAddress>> Get(absl::Time now);

 private:
  absl::Duration max_age_;
  absl::Time read_at_ = absl::InfinitePast();
  std::vector<IpAddress> addresses_;
};

// All of the host's interface addresses, now.
absl::StatusOr<std::vector<IpAddress>> ReadHostAddresses();

}  // namespace sandfence::dns

#endif  // SANDFENCE_DNS_REBINDING_H_
