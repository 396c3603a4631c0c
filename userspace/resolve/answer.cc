#include "resolve/answer.h"

#include <ares.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sandfence {
namespace {

bool IsAbsent(int status) {
  return status == ARES_ENOTFOUND || status == ARES_ENODATA;
}

}  // namespace

absl::Status CaresError(int ares_status, absl::string_view name,
                        absl::string_view query, absl::string_view servers) {
  const std::string where = absl::StrCat("the ", query, " query for \"", name,
                                         "\" (asked ", servers, ")");
  switch (ares_status) {
    case ARES_ENOTFOUND:
      return Rejected(absl::StrCat(
          "name \"", name, "\" does not exist (NXDOMAIN from ", servers, ")"));
    case ARES_ENODATA:
      return Rejected(absl::StrCat(
          "name \"", name, "\" has no A or AAAA record (asked ", servers, ")"));
    case ARES_EBADNAME:
      return Malformed(absl::StrCat("\"", name, "\" is not a valid DNS name"));
    case ARES_ETIMEOUT:
      return Unavailable(
          absl::StrCat("DNS timeout: no answer to ", where, "; retry later"));
    case ARES_ESERVFAIL:
      return Unavailable(absl::StrCat("DNS server failure (SERVFAIL) on ",
                                      where, "; retry later"));
    case ARES_EREFUSED:
      return Unavailable(absl::StrCat("DNS server refused ", where));
    case ARES_ECONNREFUSED:
      return Unavailable(
          absl::StrCat("connection refused by the DNS server on ", where));
    // A server that answers garbage or hangs up is a fault of the path to
    // the name, not a fact about the name: retryable.
    case ARES_EFORMERR:
    case ARES_ENOTIMP:
    case ARES_EBADRESP:
    case ARES_EOF:
      return Unavailable(absl::StrCat("bad DNS answer to ", where, ": ",
                                      ares_strerror(ares_status)));
    default:
      return absl::InternalError(
          absl::StrCat(where, " failed: ", ares_strerror(ares_status)));
  }
}

absl::StatusOr<std::vector<IpAddress>> CombineAnswers(
    absl::string_view name, absl::string_view servers, const FamilyAnswer& a,
    const FamilyAnswer& aaaa) {
  std::vector<IpAddress> addrs;
  for (const FamilyAnswer* answer : {&a, &aaaa}) {
    if (answer->ares_status == ARES_SUCCESS) {
      addrs.insert(addrs.end(), answer->addrs.begin(), answer->addrs.end());
    }
  }
  std::sort(addrs.begin(), addrs.end());
  addrs.erase(std::unique(addrs.begin(), addrs.end()), addrs.end());

  const bool nxdomain =
      a.ares_status == ARES_ENOTFOUND || aaaa.ares_status == ARES_ENOTFOUND;
  if (nxdomain && addrs.empty()) {
    return CaresError(ARES_ENOTFOUND, name, "", servers);
  }
  // A malformed name fails both queries alike; report it before any
  // transient failure so that the user fixes the name first.
  for (const FamilyAnswer* answer : {&a, &aaaa}) {
    if (answer->ares_status == ARES_EBADNAME) {
      return CaresError(ARES_EBADNAME, name, "", servers);
    }
  }
  const bool a_failed =
      a.ares_status != ARES_SUCCESS && !IsAbsent(a.ares_status);
  const bool aaaa_failed =
      aaaa.ares_status != ARES_SUCCESS && !IsAbsent(aaaa.ares_status);
  // When both failed, a timeout says the least: report the other failure.
  // (A refused UDP port often shows as a timeout of the first query: its
  // ICMP error is consumed by the second query's send.)
  const bool aaaa_says_more = aaaa_failed && a.ares_status == ARES_ETIMEOUT &&
                              aaaa.ares_status != ARES_ETIMEOUT;
  if (a_failed && !aaaa_says_more) {
    return CaresError(a.ares_status, name, "A", servers);
  }
  if (aaaa_failed) return CaresError(aaaa.ares_status, name, "AAAA", servers);
  if (addrs.empty()) return CaresError(ARES_ENODATA, name, "", servers);
  return addrs;
}

}  // namespace sandfence
