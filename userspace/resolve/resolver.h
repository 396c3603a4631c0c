// Name resolution for the policy compiler: a name becomes every A and AAAA
// address it has, once, at compile time.
#ifndef SANDFENCE_RESOLVE_RESOLVER_H_
#define SANDFENCE_RESOLVE_RESOLVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/ip.h"

namespace sandfence {

// Thread safety: a Resolver may be used by one thread at a time (it owns one
// c-ares channel). Use one Resolver per thread, or guard it with a mutex.
class Resolver {
 public:
  virtual ~Resolver() = default;

  // All A and AAAA addresses of a normalized name (lower case, no trailing
  // dot), deduplicated and sorted (IPv4 first, then IPv6, by bytes).
  // The name is looked up as given: no search domains are appended, so that a
  // policy means the same thing on every host.
  // An IP literal is returned as itself without a query.
  // Errors, each message naming the name and the server(s) asked:
  // a name that is not a valid DNS name (empty label, label over 63 bytes,
  // characters other than letters, digits, '-' and '_') -> InvalidArgument;
  // a name that does not exist (NXDOMAIN) or has no address records
  // -> FailedPrecondition (rejected: the policy cannot be enforced);
  // a timeout, SERVFAIL, refused query, refused connection or a broken
  // answer -> Unavailable (retryable).
  virtual absl::StatusOr<std::vector<IpAddress>> Resolve(
      absl::string_view name) = 0;
};

struct ResolverOptions {
  // Servers to ask, in order (the next one is tried when one times out or
  // fails); empty means the nameservers of `resolv_conf`.
  std::vector<HostPort> servers;
  // Per try. c-ares doubles it for each later round over all the servers,
  // so one silent server with tries = 2 costs timeout * 3 before Unavailable.
  absl::Duration timeout = absl::Seconds(2);
  int tries = 2;  // rounds over the server list
  // Read only when `servers` is empty. When it names no nameserver, the
  // local one (127.0.0.1:53) is asked, as glibc and c-ares do. With explicit
  // servers only DNS is asked; otherwise /etc/hosts is consulted first when
  // nsswitch.conf says so, as every other program on the host would.
  std::string resolv_conf = "/etc/resolv.conf";
};

// A resolver backed by c-ares. Errors: InvalidArgument for bad options
// (tries < 1, timeout under 1 ms, port 0); Unavailable when `resolv_conf`
// cannot be read; Internal when c-ares cannot be initialized.
absl::StatusOr<std::unique_ptr<Resolver>> MakeCaresResolver(
    const ResolverOptions& options);

// A c-ares resolver made on first use, so that its set-up errors (no usable
// resolv.conf) matter only to policies that name hosts: a policy without
// names needs no DNS at all.
class LazyResolver : public Resolver {
 public:
  explicit LazyResolver(ResolverOptions options)
      : options_(std::move(options)) {}

  absl::StatusOr<std::vector<IpAddress>> Resolve(
      absl::string_view name) override;

 private:
  ResolverOptions options_;
  bool made_ = false;
  std::unique_ptr<Resolver> resolver_;
  absl::Status error_;
};

// The nameservers named in a resolv.conf file (port 53), in file order, read
// the way glibc reads them, so that the list is the one programs on the host
// actually use:
// - `nameserver ADDR` lines only; anything after ADDR on the line is ignored;
//   lines starting with '#' or ';' are comments;
// - an ADDR that is not an IPv4 or IPv6 literal is skipped (glibc skips it);
// - a scoped IPv6 address (`fe80::1%eth0`) keeps its address and loses its
//   scope: allow rules are keyed by address and port and cannot name an
//   interface, and a link-local server is on-link anyway;
// - only the first 3 valid addresses count (glibc's MAXNS: a fourth
//   nameserver is never asked); duplicates among them are dropped;
// - a file with no nameserver gives an empty list (see ResolverOptions).
// A file that cannot be read -> Unavailable (retryable: resolv.conf is often
// a symlink that a network manager replaces), with the errno text.
absl::StatusOr<std::vector<HostPort>> ReadResolvConf(
    const std::string& path = "/etc/resolv.conf");

// Parses resolv.conf text as ReadResolvConf does; never fails.
std::vector<HostPort> ParseResolvConf(absl::string_view text);

}  // namespace sandfence

#endif  // SANDFENCE_RESOLVE_RESOLVER_H_
