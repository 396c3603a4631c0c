// Host and URL normalization, the one place sandfence decides what a host
// means. Each row: the text a user writes, and what sandfence makes of it.
#include "compile/endpoint.h"

#include <cctype>
#include <ostream>
#include <string>

#include "common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandfence {
namespace {

using ::testing::HasSubstr;

struct UrlCase {
  const char* title;
  const char* url;
  // On success: "scheme host:port" as Endpoint prints it
  // ("http model.internal:8000"). On failure: empty.
  const char* expect;
  const char* error_part;  // on failure: part of the Malformed message
};

void PrintTo(const UrlCase& c, std::ostream* os) { *os << c.title; }

std::string CaseName(const ::testing::TestParamInfo<UrlCase>& param) {
  std::string name;
  for (const char* p = param.param.title; *p; ++p) {
    name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  }
  return name;
}

class EndpointUrlTest : public ::testing::TestWithParam<UrlCase> {};

TEST_P(EndpointUrlTest, Normalizes) {
  const UrlCase& c = GetParam();
  absl::StatusOr<Endpoint> ep = ParseEndpointUrl(c.url);
  if (c.expect[0] != '\0') {
    ASSERT_TRUE(ep.ok()) << c.url << ": " << ep.status();
    EXPECT_EQ(ep->scheme + " " + ep->HostPortString(), c.expect) << c.url;
  } else {
    ASSERT_FALSE(ep.ok()) << c.url << " was accepted as "
                          << ep->HostPortString();
    EXPECT_EQ(RefusalOf(ep.status()), Refusal::kMalformed) << ep.status();
    EXPECT_THAT(ep.status().message(), HasSubstr(c.error_part)) << c.url;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Normalization, EndpointUrlTest,
    ::testing::Values(
        UrlCase{"plain http with port", "http://model.internal:8000/v1",
                "http model.internal:8000", ""},
        UrlCase{"http default port is 80", "http://model.internal/v1",
                "http model.internal:80", ""},
        UrlCase{"https default port is 443", "https://model.internal",
                "https model.internal:443", ""},
        UrlCase{"empty port means the default", "http://model.internal:/",
                "http model.internal:80", ""},
        UrlCase{"upper case host and scheme are lowered",
                "HTTP://Model.INTERNAL:8000/V1", "http model.internal:8000",
                ""},
        UrlCase{"one trailing dot is stripped", "http://model.internal.:8000",
                "http model.internal:8000", ""},
        UrlCase{"two trailing dots are rejected",
                "http://model.internal..:8000", "", "two dots"},
        UrlCase{"IDN becomes punycode",
                "http://b\xc3\xbc"
                "cher.example/",
                "http xn--bcher-kva.example:80", ""},
        UrlCase{"upper-case IDN is folded first",
                "http://B\xc3\x9c"
                "CHER.example/",
                "http xn--bcher-kva.example:80", ""},
        UrlCase{"punycode as written is kept", "http://xn--bcher-kva.example/",
                "http xn--bcher-kva.example:80", ""},
        UrlCase{"broken punycode is rejected", "http://xn--zz.example/", "",
                "internationalized"},
        UrlCase{"IPv6 literal in brackets is stored without",
                "http://[2001:DB8::1]:8000/", "http [2001:db8::1]:8000", ""},
        UrlCase{"IPv6 literal without brackets is rejected",
                "http://2001:db8::1/", "", "brackets"},
        UrlCase{"IPv4-mapped IPv6 literal becomes IPv4",
                "http://[::ffff:10.0.0.5]:8000/", "http 10.0.0.5:8000", ""},
        UrlCase{"IPv4 in brackets is rejected", "http://[10.0.0.5]:80/", "",
                "brackets are for IPv6"},
        UrlCase{"userinfo is ignored",
                "https://user:secret@model.internal:8443/v1",
                "https model.internal:8443", ""},
        UrlCase{"an @ in the password is ignored too",
                "https://user:p@ss@model.internal/", "https model.internal:443",
                ""},
        UrlCase{"query and fragment are ignored",
                "http://model.internal?x=1#frag", "http model.internal:80", ""},
        UrlCase{"missing host", "http:///v1", "", "has no host"},
        UrlCase{"only userinfo, no host", "http://user@:80/", "",
                "has no host"},
        UrlCase{"ftp scheme is rejected", "ftp://model.internal/", "",
                "scheme \"ftp\" is not supported"},
        UrlCase{"no scheme at all", "model.internal:8000", "", "is not a URL"},
        UrlCase{"wildcard host is rejected", "http://*.internal/", "",
                "wildcard"},
        UrlCase{"port above 65535", "http://model.internal:65536/", "",
                "port \"65536\""},
        UrlCase{"port 0", "http://model.internal:0/", "", "port \"0\""},
        UrlCase{"non-numeric port", "http://model.internal:http/", "",
                "port \"http\""},
        UrlCase{"32-bit numeric host is rejected", "http://2130706433/", "",
                "numeric form"},
        UrlCase{"hex host is rejected", "http://0x7f.1/", "", "numeric form"},
        UrlCase{"octal-looking dotted quad is rejected", "http://0177.0.0.1/",
                "", "numeric form"},
        UrlCase{"IPv4 literal with trailing dot", "http://10.0.0.5./",
                "http 10.0.0.5:80", ""},
        UrlCase{"space in host", "http://model internal/", "", "' '"},
        UrlCase{"empty label", "http://model..internal/", "", "empty label"},
        UrlCase{"label starting with a hyphen", "http://-model.internal/", "",
                "starts or ends with '-'"}),
    CaseName);

// "http://10.0.0.0/8" is not a block of addresses: "/8" is the path.
TEST(EndpointUrl, ASlashAfterTheHostIsAPath) {
  absl::StatusOr<Endpoint> ep = ParseEndpointUrl("http://10.0.0.0/8");
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_EQ(ep->HostPortString(), "10.0.0.0:80");
}

struct HostCase {
  const char* title;
  const char* host;
  const char* expect;  // Host::ToString(), or "" for an error
};

void PrintTo(const HostCase& c, std::ostream* os) { *os << c.title; }

std::string HostCaseName(const ::testing::TestParamInfo<HostCase>& param) {
  std::string name;
  for (const char* p = param.param.title; *p; ++p) {
    name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  }
  return name;
}

class RuleHostTest : public ::testing::TestWithParam<HostCase> {};

TEST_P(RuleHostTest, Normalizes) {
  const HostCase& c = GetParam();
  absl::StatusOr<Host> host =
      NormalizeHost(c.host, HostForm::kAddressNameOrPrefix);
  if (c.expect[0] == '\0') {
    EXPECT_FALSE(host.ok()) << c.host << " accepted as " << host->ToString();
    return;
  }
  ASSERT_TRUE(host.ok()) << c.host << ": " << host.status();
  EXPECT_EQ(host->ToString(), c.expect);
}

INSTANTIATE_TEST_SUITE_P(
    Normalization, RuleHostTest,
    ::testing::Values(
        HostCase{"name", "Search.Internal.", "search.internal"},
        HostCase{"IPv4 CIDR", "10.0.0.0/8", "10.0.0.0/8"},
        HostCase{"IPv6 CIDR in brackets", "[FD00::/8]", "fd00::/8"},
        HostCase{"mapped CIDR becomes IPv4", "::ffff:10.0.0.0/104",
                 "10.0.0.0/8"},
        HostCase{"mapped host becomes IPv4", "::ffff:127.0.0.1", "127.0.0.1"},
        HostCase{"CIDR with host bits set", "10.0.0.1/8", ""},
        HostCase{"prefix length too long", "10.0.0.0/33", ""},
        HostCase{"prefix length with a sign", "10.0.0.0/+8", ""},
        HostCase{"prefix length with a space", "10.0.0.0/ 8", ""},
        HostCase{"wildcard name", "*.example.com", ""},
        HostCase{"zone index is not an address", "fe80::1%eth0", ""}),
    HostCaseName);

TEST(Unreachable, TheUnspecifiedAddressAlways) {
  for (const char* text : {"0.0.0.0", "::", "::ffff:0.0.0.0"}) {
    IpPrefix p = IpPrefix::Host(*IpAddress::Parse(text));
    EXPECT_THAT(UnreachableReason(p, CompileContext{}),
                HasSubstr("unspecified address"))
        << text;
  }
  // A block that contains it is a deliberate "any" rule, not an endpoint.
  EXPECT_EQ(UnreachableReason(*IpPrefix::Parse("0.0.0.0/0"), {}), "");
}

TEST(Unreachable, LoopbackOnlyFromAnOwnNetworkNamespace) {
  CompileContext own{.own_netns = true, .borrowed = false};
  for (const char* text :
       {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "127.0.0.0/8",
        "127.0.0.0/16", "::ffff:127.0.0.0/104"}) {
    IpPrefix p = *IpPrefix::Parse(text);
    EXPECT_EQ(UnreachableReason(p, CompileContext{}), "") << text;
    EXPECT_THAT(UnreachableReason(p, own), HasSubstr("loopback")) << text;
    EXPECT_EQ(UnreachableReason(p, own, /*own_loopback_by_rules=*/true), "")
        << text;
  }
  EXPECT_EQ(UnreachableReason(*IpPrefix::Parse("126.0.0.0/7"), own), "");
}

// Name patterns for the DNS filter: a name as NormalizeHostName has it, or
// "*.suffix" with the suffix normalized the same way.
TEST(NamePattern, NormalizesNamesAndWildcardSuffixes) {
  struct Case {
    const char* text;
    const char* expect;  // NamePattern::ToString(), or "" for an error
    bool wildcard;
  };
  const Case cases[] = {
      {"Model.Internal.", "model.internal", false},
      {"*.Tool.Test.", "*.tool.test", true},
      {"*.githubusercontent.com", "*.githubusercontent.com", true},
      {"*.Bücher.Example", "*.xn--bcher-kva.example", true},
      {"*", "", false},
      {"*.", "", false},
      {"*.*.test", "", false},
      {"a.*.test", "", false},
      {"*a.test", "", false},
      {"*.test..", "", false},
      {"*..test", "", false},
      {"*.1.2.3.4", "", false},
  };
  for (const Case& c : cases) {
    absl::StatusOr<NamePattern> p = NormalizeNamePattern(c.text);
    if (c.expect[0] == '\0') {
      EXPECT_FALSE(p.ok()) << c.text << " accepted as " << p->ToString();
      if (!p.ok()) {
        EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
      }
      continue;
    }
    ASSERT_TRUE(p.ok()) << c.text << ": " << p.status();
    EXPECT_EQ(p->ToString(), c.expect) << c.text;
    EXPECT_EQ(p->wildcard, c.wildcard) << c.text;
  }
  EXPECT_THAT(NormalizeNamePattern("*").status().message(),
              HasSubstr("matches every name"));
}

TEST(LocalhostNames, AreRecognized) {
  EXPECT_TRUE(IsLocalhostName("localhost"));
  EXPECT_TRUE(IsLocalhostName("app.localhost"));
  EXPECT_FALSE(IsLocalhostName("localhost.example"));
  EXPECT_FALSE(IsLocalhostName("notlocalhost"));
}

}  // namespace
}  // namespace sandfence
