// How the A and AAAA answers of one name combine into a result or a refusal:
// every c-ares outcome a server can cause, without a server.
#include "resolve/answer.h"

#include <ares.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandfence {
namespace {

using ::testing::HasSubstr;

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

struct Case {
  const char* what;
  FamilyAnswer a;
  FamilyAnswer aaaa;
  Refusal want;
  std::vector<std::string> addrs;  // when want is kNone
  std::string message;             // part of the message otherwise
};

TEST(CombineAnswersTest, EachOutcomeHasItsClass) {
  const FamilyAnswer nodata{ARES_ENODATA, {}};
  const FamilyAnswer nxdomain{ARES_ENOTFOUND, {}};
  const FamilyAnswer timeout{ARES_ETIMEOUT, {}};
  const FamilyAnswer v4{ARES_SUCCESS, {Ip("10.0.0.2"), Ip("10.0.0.1")}};
  const FamilyAnswer v6{ARES_SUCCESS, {Ip("fd00::1")}};
  const Case cases[] = {
      {"both families answer: all addresses, IPv4 first",
       v4,
       v6,
       Refusal::kNone,
       {"10.0.0.1", "10.0.0.2", "fd00::1"},
       ""},
      {"IPv4 only: AAAA NODATA is fine",
       v4,
       nodata,
       Refusal::kNone,
       {"10.0.0.1", "10.0.0.2"},
       ""},
      {"IPv6 only: A NODATA is fine",
       nodata,
       v6,
       Refusal::kNone,
       {"fd00::1"},
       ""},
      {"a repeated address is listed once",
       {ARES_SUCCESS, {Ip("10.0.0.1"), Ip("10.0.0.1")}},
       nodata,
       Refusal::kNone,
       {"10.0.0.1"},
       ""},
      {"NXDOMAIN is rejected",
       nxdomain,
       nxdomain,
       Refusal::kRejected,
       {},
       "does not exist (NXDOMAIN from 127.0.0.1:53)"},
      {"NXDOMAIN is final even if the other query timed out",
       nxdomain,
       timeout,
       Refusal::kRejected,
       {},
       "does not exist"},
      {"no address record at all is rejected",
       nodata,
       nodata,
       Refusal::kRejected,
       {},
       "has no A or AAAA record"},
      {"a timeout is unavailable",
       timeout,
       timeout,
       Refusal::kUnavailable,
       {},
       "DNS timeout: no answer to the A query for \"x.test\""},
      {"half an answer is unavailable, not half a policy",
       v4,
       timeout,
       Refusal::kUnavailable,
       {},
       "the AAAA query for \"x.test\""},
      {"SERVFAIL is unavailable",
       {ARES_ESERVFAIL, {}},
       v6,
       Refusal::kUnavailable,
       {},
       "SERVFAIL"},
      {"REFUSED is unavailable",
       {ARES_EREFUSED, {}},
       {ARES_EREFUSED, {}},
       Refusal::kUnavailable,
       {},
       "refused"},
      {"a refused connection is unavailable",
       {ARES_ECONNREFUSED, {}},
       {ARES_ECONNREFUSED, {}},
       Refusal::kUnavailable,
       {},
       "connection refused"},
      {"a refusal is reported rather than the other query's timeout",
       timeout,
       {ARES_ECONNREFUSED, {}},
       Refusal::kUnavailable,
       {},
       "connection refused by the DNS server on the AAAA query"},
      {"a garbled answer is unavailable",
       {ARES_EBADRESP, {}},
       nodata,
       Refusal::kUnavailable,
       {},
       "bad DNS answer"},
      {"a bad name is malformed",
       {ARES_EBADNAME, {}},
       {ARES_EBADNAME, {}},
       Refusal::kMalformed,
       {},
       "not a valid DNS name"},
      {"out of memory is internal",
       {ARES_ENOMEM, {}},
       nodata,
       Refusal::kInternal,
       {},
       "x.test"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<std::vector<IpAddress>> got =
        CombineAnswers("x.test", "127.0.0.1:53", c.a, c.aaaa);
    EXPECT_EQ(RefusalName(RefusalOf(got.status())), RefusalName(c.want))
        << got.status();
    if (got.ok()) {
      std::vector<std::string> addrs;
      for (const IpAddress& addr : *got) addrs.push_back(addr.ToString());
      EXPECT_EQ(addrs, c.addrs);
    } else {
      EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.message));
      EXPECT_THAT(std::string(got.status().message()), HasSubstr("x.test"));
    }
  }
}

}  // namespace
}  // namespace sandfence
