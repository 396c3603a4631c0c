// Test doubles for the DNS filter's e2e tests and its benchmark:
//  - FakeUpstream: a scripted DNS server on 127.0.0.1 (UDP and TCP, one
//    port) whose answers a test chooses per name: addresses (optionally
//    behind a CNAME), silence, or a truncated answer over UDP; it logs every
//    query with its transport. Unknown names get NXDOMAIN.
//  - UdpExchange / TcpExchange: a raw client, one query, one answer.
#ifndef SANDFENCE_TESTS_DNS_FAKE_UPSTREAM_H_
#define SANDFENCE_TESTS_DNS_FAKE_UPSTREAM_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/ip.h"
#include "common/unique_fd.h"

namespace sandfence::dns::testing {

struct FakeName {
  std::vector<std::string> addrs;  // IPv4 as A, IPv6 as AAAA
  uint32_t ttl = 60;
  std::string cname;         // when set: name CNAME cname, addresses on cname
  bool silent = false;       // never answered
  bool tc_over_udp = false;  // UDP gets an empty TC answer; TCP the records
};

struct SeenQuery {
  std::string name;
  uint16_t type = 0;
  bool tcp = false;
  uint16_t flags = 0;  // the header's (RD, CD, AD: what the filter sent)
  bool edns = false;
  bool dnssec_ok = false;
};

class FakeUpstream {
 public:
  static absl::StatusOr<std::unique_ptr<FakeUpstream>> Start(
      std::map<std::string, FakeName> names);
  ~FakeUpstream();

  HostPort address() const { return {IpAddress::V4(0x7f000001), port_}; }
  std::vector<SeenQuery> seen() const;

 private:
  FakeUpstream() = default;
  void Serve();
  std::string AnswerFor(const std::string& query, bool tcp, bool* reply);

  std::map<std::string, FakeName> names_;
  UniqueFd udp_;
  UniqueFd tcp_;
  UniqueFd stop_;  // eventfd
  uint16_t port_ = 0;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<SeenQuery> seen_ ABSL_GUARDED_BY(mu_);
};

// One query over UDP from a fresh socket; the answer and where it came from.
struct UdpAnswer {
  std::string wire;
  HostPort from;
};
absl::StatusOr<UdpAnswer> UdpExchange(const HostPort& server,
                                      const std::string& query,
                                      absl::Duration timeout);
absl::StatusOr<std::string> TcpExchange(const HostPort& server,
                                        const std::string& query,
                                        absl::Duration timeout);
// Several queries pipelined on one TCP connection; the answers in the order
// they came.
absl::StatusOr<std::vector<std::string>> TcpExchangeMany(
    const HostPort& server, const std::vector<std::string>& queries,
    absl::Duration timeout);

}  // namespace sandfence::dns::testing

#endif  // SANDFENCE_TESTS_DNS_FAKE_UPSTREAM_H_
