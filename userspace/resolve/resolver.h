// Name resolution for the policy compiler: a name becomes every A and AAAA
// address it has, once, at compile time.
#ifndef SANDFENCE_RESOLVE_RESOLVER_H_
#define SANDFENCE_RESOLVE_RESOLVER_H_

#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/ip.h"

namespace sandfence {

class Resolver {
 public:
  virtual ~Resolver() = default;

  // All A and AAAA addresses of a normalized name (lower case, no trailing
  // dot), deduplicated and sorted.
  // Errors: a name that does not exist (NXDOMAIN) or has no address records
  // -> FailedPrecondition (rejected: the policy cannot be enforced);
  // a timeout, SERVFAIL or refused query -> Unavailable (retryable).
  virtual absl::StatusOr<std::vector<IpAddress>> Resolve(
      absl::string_view name) = 0;
};

struct ResolverOptions {
  // Servers to ask; empty means the host's /etc/resolv.conf.
  std::vector<HostPort> servers;
  absl::Duration timeout = absl::Seconds(2);  // per try
  int tries = 2;
};

// A resolver backed by c-ares.
absl::StatusOr<std::unique_ptr<Resolver>> MakeCaresResolver(
    const ResolverOptions& options);

// The nameservers named in a resolv.conf file (port 53), in file order.
absl::StatusOr<std::vector<HostPort>> ReadResolvConf(
    const std::string& path = "/etc/resolv.conf");

}  // namespace sandfence

#endif  // SANDFENCE_RESOLVE_RESOLVER_H_
