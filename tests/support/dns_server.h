// DNS servers on loopback for tests: nothing a test resolves ever leaves the
// machine.
//
//   SANDFENCE_REQUIRE_DNSMASQ();
//   auto dns = TestDnsServer::Start({{"model.test", {"10.1.2.3", "fd00::3"}}});
//   ASSERT_TRUE(dns.ok()) << dns.status();
//   ResolverOptions options;
//   options.servers = {(*dns)->address()};
#ifndef SANDFENCE_TESTS_SUPPORT_DNS_SERVER_H_
#define SANDFENCE_TESTS_SUPPORT_DNS_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ip.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"

namespace sandfence {

// Skips the current test, with the reason, when dnsmasq is not installed.
#define SANDFENCE_REQUIRE_DNSMASQ()                                    \
  do {                                                                 \
    if (!::sandfence::TestDnsServer::Available()) {                    \
      GTEST_SKIP() << "needs " << ::sandfence::TestDnsServer::kDnsmasq \
                   << " (Debian package dnsmasq-base; "                \
                      "scripts/install-deps.sh --test installs it)";          \
    }                                                                  \
  } while (0)

// A dnsmasq child serving fixed records on 127.0.0.1:<free port>, with no
// upstream server at all.
// - each name is answered exactly (not its subdomains) with the listed
//   addresses, IPv4 as A and IPv6 as AAAA records; a name may be listed
//   several times, its addresses add up;
// - a name listed with no address exists but has no A or AAAA record (the
//   server answers NODATA, like a name that has only a TXT record);
// - any name not listed does not exist (NXDOMAIN).
// Runs until destroyed; the destructor kills and reaps it. The child also
// dies with the test process (PR_SET_PDEATHSIG), so no server outlives a
// crashed test.
class TestDnsServer {
 public:
  static constexpr const char* kDnsmasq = "/usr/sbin/dnsmasq";

  using Records = std::vector<std::pair<std::string, std::vector<std::string>>>;

  // True when dnsmasq is installed and executable.
  static bool Available();

  // Starts the server and returns once it answers queries. InvalidArgument
  // for a record whose address is not an IP literal or whose name could
  // not be passed to dnsmasq; Unavailable when dnsmasq is missing or does
  // not come up (the message carries its log).
  // `port` 0 picks a free one; another port serves there (e.g. to restart
  // a server with new records where its clients already point).
  static absl::StatusOr<std::unique_ptr<TestDnsServer>> Start(
      const Records& records, uint16_t port = 0);

  TestDnsServer(const TestDnsServer&) = delete;
  TestDnsServer& operator=(const TestDnsServer&) = delete;
  ~TestDnsServer();

  // 127.0.0.1 and the server's port (UDP and TCP).
  HostPort address() const;

  // What dnsmasq wrote so far (start-up messages and every query it got):
  // worth printing when a test fails.
  std::string log() const;

 private:
  TestDnsServer(pid_t pid, uint16_t port, UniqueFd log)
      : pid_(pid), port_(port), log_(std::move(log)) {}

  pid_t pid_;
  uint16_t port_;
  UniqueFd log_;  // a memfd holding dnsmasq's stdout and stderr
};

// A "DNS server" on 127.0.0.1 that takes every query and never answers:
// UDP datagrams queue up unread and TCP connections are accepted by the
// kernel but never read. For timeout tests.
class TestSilentDnsServer {
 public:
  static absl::StatusOr<std::unique_ptr<TestSilentDnsServer>> Start();

  // 127.0.0.1 and the port, the same for UDP and TCP.
  HostPort address() const;

 private:
  TestSilentDnsServer(UniqueFd udp, UniqueFd tcp, uint16_t port)
      : udp_(std::move(udp)), tcp_(std::move(tcp)), port_(port) {}

  UniqueFd udp_;
  UniqueFd tcp_;
  uint16_t port_;
};

// A 127.0.0.1 port that is free for both UDP and TCP at the time of the
// call (nothing listens there: a query to it is refused by the kernel).
// Another process may take it later; tests on one machine rarely race.
absl::StatusOr<uint16_t> PickFreeLoopbackPort();

}  // namespace sandfence

#endif  // SANDFENCE_TESTS_SUPPORT_DNS_SERVER_H_
