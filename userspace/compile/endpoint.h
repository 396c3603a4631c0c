// Host and endpoint normalization: the one place where sandfence decides
// what a host in a policy means (design.md, "Host rules").
//
//   - names are lower-cased; one trailing dot is stripped ("a.b." is "a.b"),
//     two are rejected; internationalized names become punycode (IDNA2008,
//     UTS #46 non-transitional, as browsers do);
//   - IPv6 literals are written in brackets in URLs and stored without;
//     IPv4-mapped IPv6 literals (::ffff:a.b.c.d) become IPv4;
//   - no wildcards (NamePattern and ParseToolUrl take "*.suffix"); no
//     numeric host forms other than dotted quads (an HTTP client would
//     read "0x7f.1" or "2130706433" as 127.0.0.1);
//   - in URLs: http and https only, `user:pass@` ignored, the port from the
//     URL or else the scheme's default (http 80, https 443), a host required.
//
// Errors are Malformed (InvalidArgument) with the reason only; callers add
// which field and phase the value came from.
#ifndef SANDFENCE_COMPILE_ENDPOINT_H_
#define SANDFENCE_COMPILE_ENDPOINT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ip.h"
#include "compile/compiled_policy.h"

namespace sandfence {

// A normalized host: a DNS name, or an address block (a single address is a
// host prefix).
struct Host {
  // Lower-case ASCII, punycode for IDN, no trailing dot. Empty for literals.
  std::string name;
  // The literal, when name is empty. Never an IPv4-mapped IPv6 host.
  IpPrefix prefix = IpPrefix::Host(IpAddress());

  bool is_name() const { return !name.empty(); }
  // The name, or the address ("10.0.0.1", "2001:db8::1", "10.0.0.0/8").
  std::string ToString() const;

  friend bool operator==(const Host&, const Host&) = default;
};

enum class HostForm {
  kAddressOrName,        // URL hosts: a name or one address
  kAddressNameOrPrefix,  // allow rules: a CIDR is accepted too
};

// Normalizes a host as written in a policy (brackets around an IPv6 literal
// are accepted and dropped).
absl::StatusOr<Host> NormalizeHost(absl::string_view text, HostForm form);

// Only the name part of NormalizeHost: `text` must not be an IP literal.
absl::StatusOr<std::string> NormalizeHostName(absl::string_view text);

// A name pattern for DNS filtering: a host name, or "*.suffix", which
// matches every name below suffix but not suffix itself. The suffix is
// normalized by NormalizeHostName; "*" alone and a '*' anywhere but as the
// whole first label are Malformed. Endpoint URLs never take patterns.
struct NamePattern {
  std::string name;  // the normalized name, or the suffix of a wildcard
  bool wildcard = false;

  std::string ToString() const;  // "api.test" or "*.tool.test"

  friend bool operator==(const NamePattern&, const NamePattern&) = default;
};
absl::StatusOr<NamePattern> NormalizeNamePattern(absl::string_view text);

// An allow rule's host as the policy language takes it, wherever it is
// written (a policy file, --allow): a leading '*' makes a name pattern (the
// compiler then asks for dns FILTERED), anything else is one host or
// prefix (NormalizeHost, kAddressNameOrPrefix).
struct AllowHost {
  Host host;                           // when not a pattern
  std::optional<NamePattern> pattern;  // a wildcard
};
absl::StatusOr<AllowHost> ParseAllowHost(absl::string_view text);

struct Endpoint {
  std::string scheme;  // "http" or "https"
  Host host;           // never a CIDR
  uint16_t port = 0;

  // "model.internal:8000", "10.0.0.1:80", "[2001:db8::1]:443".
  std::string HostPortString() const;

  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

// Parses an endpoint URL ("https://user@Model.Internal.:8443/v1?x#y").
// The path, query and fragment are ignored: sandfence allows host + port.
absl::StatusOr<Endpoint> ParseEndpointUrl(absl::string_view url);

// A tool grant's URL, whose host may also be a wildcard
// ("https://*.tool.test:8443/mcp", issue 14): then `pattern` is set and
// `endpoint.host` is empty; the port is the URL's (or the scheme's).
// Model URLs stay concrete (ParseEndpointUrl).
struct ToolEndpoint {
  Endpoint endpoint;
  std::optional<NamePattern> pattern;
};
absl::StatusOr<ToolEndpoint> ParseToolUrl(absl::string_view url);

// "localhost" and names under ".localhost" (RFC 6761): loopback, always,
// and never sent to DNS.
bool IsLocalhostName(absl::string_view normalized_name);

// Why a sandbox in `context` can never reach `dest`, in words for a user;
// "" when it can. Unreachable: the unspecified address (0.0.0.0, ::) always;
// host loopback (127/8, ::1) when the sandbox has its own network namespace,
// unless `own_loopback_by_rules` (then loopback means the namespace's own,
// and a rule for it is meaningful).
std::string UnreachableReason(const IpPrefix& dest,
                              const CompileContext& context,
                              bool own_loopback_by_rules = false);

}  // namespace sandfence

#endif  // SANDFENCE_COMPILE_ENDPOINT_H_
