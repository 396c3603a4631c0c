// The names of DNS record types and response codes, for messages and
// records. Here, not in userspace/dns, because records name them too and
// must not link the DNS filter.
#ifndef SANDFENCE_COMMON_DNS_NAMES_H_
#define SANDFENCE_COMMON_DNS_NAMES_H_

#include <cstdint>
#include <string>

namespace sandfence {

// "A", "AAAA", "HTTPS", ... or "TYPE<n>" (RFC 3597).
std::string DnsTypeName(uint16_t type);
// "NOERROR", "NXDOMAIN", ... or "RCODE<n>".
std::string DnsRcodeName(uint16_t rcode);

}  // namespace sandfence

#endif  // SANDFENCE_COMMON_DNS_NAMES_H_
