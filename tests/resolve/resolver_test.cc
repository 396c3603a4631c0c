// The c-ares resolver against real DNS servers on loopback: dnsmasq serving
// fixed records, a server that never answers, and a port where nothing
// listens.
#include "resolve/resolver.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/dns_server.h"
#include "support/test_files.h"

namespace sandfence {
namespace {

using ::testing::HasSubstr;

// Short enough to keep the timeout tests quick, long enough that a loaded
// machine still gets dnsmasq's answers on the first try.
constexpr absl::Duration kShortTimeout = absl::Milliseconds(300);

std::vector<std::string> Strings(const std::vector<IpAddress>& addrs) {
  std::vector<std::string> out;
  for (const IpAddress& addr : addrs) out.push_back(addr.ToString());
  return out;
}

class ResolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_DNSMASQ();
    absl::StatusOr<std::unique_ptr<TestDnsServer>> started =
        TestDnsServer::Start({
            {"v4only.test", {"10.0.0.1"}},
            {"v6only.test", {"fd00::1"}},
            {"dual.test", {"10.0.0.2", "fd00::2"}},
            {"many.test",
             {"10.0.0.5", "fd00::5", "10.0.0.3", "fd00::4", "10.0.0.4"}},
            {"twice.test", {"10.0.0.7"}},
            {"twice.test", {"10.0.0.7", "10.0.0.8"}},
            {"nodata.test", {}},
            {"model.internal", {"10.1.2.3"}},
        });
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }

  void TearDown() override {
    if (HasFailure() && server_ != nullptr) {
      std::fprintf(stderr, "dnsmasq log:\n%s\n", server_->log().c_str());
    }
  }

  std::unique_ptr<Resolver> MakeResolver(std::vector<HostPort> servers) {
    ResolverOptions options;
    options.servers = std::move(servers);
    options.timeout = kShortTimeout;
    options.tries = 1;
    absl::StatusOr<std::unique_ptr<Resolver>> resolver =
        MakeCaresResolver(options);
    EXPECT_TRUE(resolver.ok()) << resolver.status();
    return resolver.ok() ? *std::move(resolver) : nullptr;
  }

  std::unique_ptr<TestDnsServer> server_;
};

TEST_F(ResolverTest, NamesResolveToAllTheirAddressesSortedAndOnce) {
  struct Case {
    const char* what;
    const char* name;
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {"a name with only an A record", "v4only.test", {"10.0.0.1"}},
      {"a name with only an AAAA record", "v6only.test", {"fd00::1"}},
      {"a name with both A and AAAA", "dual.test", {"10.0.0.2", "fd00::2"}},
      {"several addresses of each family come back sorted, IPv4 first",
       "many.test",
       {"10.0.0.3", "10.0.0.4", "10.0.0.5", "fd00::4", "fd00::5"}},
      {"an address served twice is listed once",
       "twice.test",
       {"10.0.0.7", "10.0.0.8"}},
      {"DNS ignores case", "DUAL.Test", {"10.0.0.2", "fd00::2"}},
      {"the model endpoint of the README example",
       "model.internal",
       {"10.1.2.3"}},
      {"an IPv4 literal is itself, no query", "192.0.2.1", {"192.0.2.1"}},
      {"an IPv6 literal is itself, no query", "2001:db8::1", {"2001:db8::1"}},
  };
  // One resolver for every row: it must be reusable.
  std::unique_ptr<Resolver> resolver = MakeResolver({server_->address()});
  ASSERT_NE(resolver, nullptr);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<std::vector<IpAddress>> got = resolver->Resolve(c.name);
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
    EXPECT_EQ(Strings(*got), c.want) << c.name;
  }
}

TEST_F(ResolverTest, NamesThatCannotBeResolvedAreRefusedWithTheirClass) {
  struct Case {
    const char* what;
    std::string name;
    Refusal want;
    std::string message;  // part of the message the user sees
  };
  const std::string server = server_->address().ToString();
  const Case cases[] = {
      {"a name that does not exist is rejected", "nx.test", Refusal::kRejected,
       "\"nx.test\" does not exist"},
      {"the rejection names the server asked", "nx.test", Refusal::kRejected,
       server},
      {"a subdomain of a served name does not exist", "www.dual.test",
       Refusal::kRejected, "does not exist"},
      {"a name with no address record is rejected", "nodata.test",
       Refusal::kRejected, "\"nodata.test\" has no A or AAAA record"},
      {"an empty name is malformed", "", Refusal::kMalformed, "empty name"},
      {"an empty label is malformed", "a..test", Refusal::kMalformed,
       "empty label"},
      {"a trailing dot is not normalized: malformed", "dual.test.",
       Refusal::kMalformed, "empty label"},
      {"a label over 63 characters is malformed",
       std::string(64, 'a') + ".test", Refusal::kMalformed, "longer than 63"},
      {"a name over 253 characters is malformed",
       absl::StrJoin(std::vector<std::string>(64, "abc"), "."),
       Refusal::kMalformed, "longer than 253"},
      {"a space is malformed", "bad name.test", Refusal::kMalformed,
       "not a letter, digit"},
      {"a wildcard is malformed", "*.dual.test", Refusal::kMalformed,
       "not a letter, digit"},
      {"a bracketed IPv6 literal is malformed", "[::1]", Refusal::kMalformed,
       "not a letter, digit"},
  };
  std::unique_ptr<Resolver> resolver = MakeResolver({server_->address()});
  ASSERT_NE(resolver, nullptr);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<std::vector<IpAddress>> got = resolver->Resolve(c.name);
    ASSERT_FALSE(got.ok()) << c.name << " resolved to "
                           << absl::StrJoin(Strings(*got), ", ");
    EXPECT_EQ(RefusalName(RefusalOf(got.status())), RefusalName(c.want))
        << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.message));
  }
}

TEST_F(ResolverTest, ServerThatNeverAnswersIsUnavailable) {
  absl::StatusOr<std::unique_ptr<TestSilentDnsServer>> silent =
      TestSilentDnsServer::Start();
  ASSERT_TRUE(silent.ok()) << silent.status();
  std::unique_ptr<Resolver> resolver = MakeResolver({(*silent)->address()});
  ASSERT_NE(resolver, nullptr);

  absl::StatusOr<std::vector<IpAddress>> got = resolver->Resolve("dual.test");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(RefusalOf(got.status()), Refusal::kUnavailable) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("timeout"));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("\"dual.test\""));
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr((*silent)->address().ToString()));
}

TEST_F(ResolverTest, PortWithNothingListeningIsUnavailable) {
  absl::StatusOr<uint16_t> port = PickFreeLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  const HostPort closed{IpAddress::V4(0x7f000001), *port};
  std::unique_ptr<Resolver> resolver = MakeResolver({closed});
  ASSERT_NE(resolver, nullptr);

  absl::StatusOr<std::vector<IpAddress>> got = resolver->Resolve("dual.test");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(RefusalOf(got.status()), Refusal::kUnavailable) << got.status();
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr(closed.ToString()));
}

TEST_F(ResolverTest, SilentFirstServerFallsBackToTheSecond) {
  absl::StatusOr<std::unique_ptr<TestSilentDnsServer>> silent =
      TestSilentDnsServer::Start();
  ASSERT_TRUE(silent.ok()) << silent.status();
  std::unique_ptr<Resolver> resolver =
      MakeResolver({(*silent)->address(), server_->address()});
  ASSERT_NE(resolver, nullptr);

  absl::StatusOr<std::vector<IpAddress>> got = resolver->Resolve("dual.test");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Strings(*got), (std::vector<std::string>{"10.0.0.2", "fd00::2"}));

  // The second server's NXDOMAIN is final too, not a timeout.
  got = resolver->Resolve("nx.test");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(RefusalOf(got.status()), Refusal::kRejected) << got.status();
}

// True when some socket listens on UDP port 53 (any address): a query to a
// loopback address could then reach a real resolver that forwards it off
// the machine.
bool SomethingServesUdpPort53() {
  for (const char* table : {"/proc/net/udp", "/proc/net/udp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      // "  sl  local_address ...": the local port is the hex after ':'.
      std::istringstream fields(line);
      std::string slot, local;
      fields >> slot >> local;
      if (absl::EndsWith(local, ":0035")) return true;
    }
  }
  return false;
}

TEST(SystemResolverTest, AsksTheNameserversOfResolvConf) {
  if (SomethingServesUdpPort53()) {
    GTEST_SKIP() << "a DNS server listens on port 53 here; the test would "
                    "query it";
  }
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  // A loopback address where nothing listens: the query is refused or
  // times out, and the refusal names the server that was asked.
  absl::StatusOr<std::string> conf = dir->WriteFile(
      "resolv.conf", "search corp.example\nnameserver 127.83.70.1\n");
  ASSERT_TRUE(conf.ok()) << conf.status();
  ResolverOptions options;
  options.resolv_conf = *conf;
  options.timeout = kShortTimeout;
  options.tries = 1;
  absl::StatusOr<std::unique_ptr<Resolver>> resolver =
      MakeCaresResolver(options);
  ASSERT_TRUE(resolver.ok()) << resolver.status();

  absl::StatusOr<std::vector<IpAddress>> got =
      (*resolver)->Resolve("model.test");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(RefusalOf(got.status()), Refusal::kUnavailable) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("127.83.70.1:53"));
}

TEST(ResolverOptionsTest, BadOptionsAreMalformed) {
  struct Case {
    const char* what;
    ResolverOptions options;
  };
  ResolverOptions no_tries;
  no_tries.tries = 0;
  ResolverOptions no_timeout;
  no_timeout.timeout = absl::ZeroDuration();
  ResolverOptions port_zero;
  port_zero.servers = {HostPort{IpAddress::V4(0x7f000001), 0}};
  const Case cases[] = {
      {"zero tries", no_tries},
      {"a zero timeout", no_timeout},
      {"a server on port 0", port_zero},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<std::unique_ptr<Resolver>> resolver =
        MakeCaresResolver(c.options);
    ASSERT_FALSE(resolver.ok());
    EXPECT_EQ(RefusalOf(resolver.status()), Refusal::kMalformed)
        << resolver.status();
  }
}

TEST(ResolverOptionsTest, UnreadableResolvConfIsUnavailable) {
  ResolverOptions options;
  options.resolv_conf = "/nonexistent/sandfence/resolv.conf";
  absl::StatusOr<std::unique_ptr<Resolver>> resolver =
      MakeCaresResolver(options);
  ASSERT_FALSE(resolver.ok());
  EXPECT_EQ(RefusalOf(resolver.status()), Refusal::kUnavailable)
      << resolver.status();
  EXPECT_THAT(std::string(resolver.status().message()),
              HasSubstr("/nonexistent/sandfence/resolv.conf"));
}

}  // namespace
}  // namespace sandfence
