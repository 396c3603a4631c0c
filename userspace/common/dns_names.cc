#include "common/dns_names.h"

#include "absl/strings/str_cat.h"

namespace sandfence {

std::string DnsTypeName(uint16_t type) {
  switch (type) {
    case 1:
      return "A";
    case 2:
      return "NS";
    case 5:
      return "CNAME";
    case 6:
      return "SOA";
    case 12:
      return "PTR";
    case 15:
      return "MX";
    case 16:
      return "TXT";
    case 28:
      return "AAAA";
    case 33:
      return "SRV";
    case 35:
      return "NAPTR";
    case 41:
      return "OPT";
    case 43:
      return "DS";
    case 46:
      return "RRSIG";
    case 48:
      return "DNSKEY";
    case 64:
      return "SVCB";
    case 65:
      return "HTTPS";
    case 251:
      return "IXFR";
    case 252:
      return "AXFR";
    case 255:
      return "ANY";
    case 257:
      return "CAA";
  }
  return absl::StrCat("TYPE", type);
}

std::string DnsRcodeName(uint16_t rcode) {
  switch (rcode) {
    case 0:
      return "NOERROR";
    case 1:
      return "FORMERR";
    case 2:
      return "SERVFAIL";
    case 3:
      return "NXDOMAIN";
    case 4:
      return "NOTIMP";
    case 5:
      return "REFUSED";
    case 16:
      return "BADVERS";
  }
  return absl::StrCat("RCODE", rcode);
}

}  // namespace sandfence
