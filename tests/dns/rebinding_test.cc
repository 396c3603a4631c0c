// Which answer addresses count as pointing at the host or its link
// (dns/rebinding.h): every spelling an attacker's name server could use.
#include "dns/rebinding.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandfence::dns {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

IpAddress Ip(const char* text) {
  std::optional<IpAddress> a = IpAddress::Parse(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(IpAddress());
}

TEST(ProtectedRange, EveryWayToTheHostAndItsLinkIsProtected) {
  struct Case {
    const char* addr;
    const char* why;
  };
  for (const Case& c : std::vector<Case>{
           {"127.0.0.1", "loopback"},
           {"127.255.255.254", "loopback"},
           {"::1", "loopback"},
           {"::ffff:127.0.0.1", "loopback"},  // mapped: judged as IPv4
           {"0.0.0.0", "this network"},       // connect() reaches the host
           {"0.1.2.3", "this network"},
           {"::", "unspecified"},
           {"169.254.169.254", "link-local"},  // cloud metadata
           {"::ffff:169.254.169.254", "link-local"},
           {"fe80::1", "link-local"},
           {"febf::1", "link-local"},
           {"224.0.0.1", "multicast"},
           {"239.255.255.250", "multicast"},
           {"ff02::1", "multicast"},
           {"255.255.255.255", "broadcast"},
           {"240.0.0.1", "reserved"},
       }) {
    std::optional<std::string> why = ProtectedRange(Ip(c.addr), {});
    ASSERT_TRUE(why.has_value()) << c.addr;
    EXPECT_THAT(*why, HasSubstr(c.why)) << c.addr;
  }
}

TEST(ProtectedRange, OrdinaryAddressesAreNot) {
  for (const char* addr :
       {"10.1.2.3", "192.168.1.1", "172.16.0.1", "8.8.8.8", "128.0.0.1",
        "126.255.255.255", "169.253.0.1", "223.255.255.255", "fd00::1",
        "2001:db8::1", "fec0::1", "::2", "::ffff:10.0.0.1"}) {
    EXPECT_FALSE(ProtectedRange(Ip(addr), {}).has_value()) << addr;
  }
}

TEST(ProtectedRange, PrivateRangesOnlyForANameOnlyAWildcardAllows) {
  for (const char* addr :
       {"10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.0.1", "100.64.0.1",
        "100.127.255.255", "fc00::1", "fdff::1", "::ffff:10.1.1.1"}) {
    EXPECT_FALSE(ProtectedRange(Ip(addr), {}, Protect::kHost).has_value())
        << addr;
    EXPECT_THAT(
        ProtectedRange(Ip(addr), {}, Protect::kHostAndPrivate).value_or(""),
        HasSubstr("private"))
        << addr;
  }
  for (const char* addr : {"172.32.0.1", "172.15.0.1", "100.128.0.1",
                           "192.169.0.1", "fe00::1", "192.0.2.1"}) {
    EXPECT_FALSE(
        ProtectedRange(Ip(addr), {}, Protect::kHostAndPrivate).has_value())
        << addr;
  }
}

TEST(ProtectedRange, TheHostsOwnAddressesAreProtectedInEitherSpelling) {
  const std::vector<IpAddress> host = {Ip("10.9.8.7"), Ip("fd00::7")};
  EXPECT_THAT(ProtectedRange(Ip("10.9.8.7"), host).value_or(""),
              HasSubstr("the host's own"));
  EXPECT_THAT(ProtectedRange(Ip("::ffff:10.9.8.7"), host).value_or(""),
              HasSubstr("the host's own"));
  EXPECT_THAT(ProtectedRange(Ip("fd00::7"), host).value_or(""),
              HasSubstr("the host's own"));
  EXPECT_FALSE(ProtectedRange(Ip("10.9.8.6"), host).has_value());
  // Before the private ranges: the host's own is the more telling reason.
  EXPECT_THAT(
      ProtectedRange(Ip("10.9.8.7"), host, Protect::kHostAndPrivate)
          .value_or(""),
      HasSubstr("the host's own"));
}

TEST(HostAddresses, ReadsTheInterfacesAndKeepsThemUntilTheyAge) {
  absl::StatusOr<std::vector<IpAddress>> now = ReadHostAddresses();
  ASSERT_TRUE(now.ok()) << now.status();
  // Every host has loopback up, in this network namespace as in any.
  EXPECT_THAT(*now, Contains(Ip("127.0.0.1")));
  HostAddresses cache(absl::Seconds(10));
  const absl::Time t0 = absl::Now();
  absl::StatusOr<absl::Span<const IpAddress>> first = cache.Get(t0);
  ASSERT_TRUE(first.ok()) << first.status();
  const IpAddress* data = first->data();
  absl::StatusOr<absl::Span<const IpAddress>> again =
      cache.Get(t0 + absl::Seconds(1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data(), data) << "read again before max_age";
  EXPECT_EQ(again->size(), first->size());
}

}  // namespace
}  // namespace sandfence::dns
