// The DNS filter's e2e fixture: a FilterServer on its own thread with
// listeners for two sandboxes (and one address that serves none), hooks
// that record what they see, and helpers to read answers.
#ifndef SANDFENCE_TESTS_DNS_FILTER_FIXTURE_H_
#define SANDFENCE_TESTS_DNS_FILTER_FIXTURE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "dns/fake_upstream.h"
#include "dns/filter_server.h"
#include "gtest/gtest.h"

namespace sandfence::dns::testing {

inline constexpr absl::Duration kWait = absl::Seconds(10);
inline const NameGrant kModelPort{L4::kTcp, 8000, 8000};
inline const NameGrant kHttps{L4::kTcp, 443, 443};

inline IpAddress Ip(const char* s) { return *IpAddress::Parse(s); }

inline std::vector<IpAddress> Addresses(const Message& m) {
  std::vector<IpAddress> out;
  for (const ResourceRecord& rr : m.answers) {
    if (rr.type == kTypeA || rr.type == kTypeAaaa) {
      out.push_back(IpAddress::FromBytes(
          rr.type == kTypeA ? AF_INET : AF_INET6,
          reinterpret_cast<const uint8_t*>(rr.rdata.data())));
    }
  }
  return out;
}

inline Message MustParse(const std::string& wire) {
  absl::StatusOr<Message> m = ParseMessage(wire);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : Message{};
}

inline std::shared_ptr<const SandboxDnsPolicy> Policy(
    std::vector<NameRule> rules, uint64_t generation = 1,
    std::string phase = "agent") {
  auto p = std::make_shared<SandboxDnsPolicy>();
  absl::StatusOr<PhaseNameRules> r = PhaseNameRules::Build(rules);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) p->rules = *std::move(r);
  p->generation = generation;
  p->phase = std::move(phase);
  // The filter's own rate only: tests that ask fast set one when they mean to.
  p->budget.queries_per_second = 0;
  return p;
}

// A FilterServer on its own thread. Listeners: UDP and TCP on one
// 127.0.0.1 port for sandbox 1, and a UDP one for sandbox 2.
class Filter {
 public:
  static constexpr SandboxId kSandbox1 = 1;
  static constexpr SandboxId kSandbox2 = 2;

  explicit Filter(ForwarderOptions fwd,
                  std::function<void(FilterServerOptions&)> tweak = nullptr) {
    FilterServerOptions options;
    options.forwarder = std::move(fwd);
    if (tweak) tweak(options);
    FilterHooks hooks;
    hooks.identify = [this](const QueryOrigin& o) -> std::optional<SandboxId> {
      if (o.listener == udp_ || o.listener == tcp_ || o.listener == udp6_) {
        return kSandbox1;
      }
      if (o.listener == udp2_) return kSandbox2;
      return std::nullopt;
    };
    hooks.learn = [this](const LearnRequest& r) {
      absl::MutexLock lock(&mu_);
      learned_.push_back(r);
      return learn_ ? learn_(r) : absl::OkStatus();
    };
    hooks.outcome = [this](const QueryOutcome& o) {
      absl::MutexLock lock(&mu_);
      outcomes_.push_back(o);
    };
    absl::StatusOr<std::unique_ptr<FilterServer>> s =
        FilterServer::Create(std::move(options), std::move(hooks));
    if (!s.ok()) {
      status_ = s.status();
      return;
    }
    server_ = *std::move(s);
    status_ = Listen();
    if (status_.ok()) {
      thread_ = std::thread([this] { (void)server_->Run(); });
    }
  }
  ~Filter() {
    if (thread_.joinable()) {
      server_->Stop();
      thread_.join();
    }
  }

  const absl::Status& status() const { return status_; }
  FilterServer& server() { return *server_; }
  HostPort udp() const { return udp_addr_; }
  HostPort udp2() const { return udp2_addr_; }
  HostPort unserved() const { return udp3_addr_; }
  HostPort tcp() const { return tcp_addr_; }
  // A UDP listener on [::1] for sandbox 1; call before the queries to it.
  absl::StatusOr<HostPort> ListenUdp6() {
    absl::StatusOr<ListenerId> id =
        server_->ListenUdp({*IpAddress::Parse("::1"), 0});
    if (!id.ok()) return id.status();
    udp6_ = *id;
    return server_->local_address(*id);
  }

  // Set before queries run; called on the filter's thread under mu_.
  void set_learn(std::function<absl::Status(const LearnRequest&)> f) {
    absl::MutexLock lock(&mu_);
    learn_ = std::move(f);
  }
  std::vector<LearnRequest> learned() {
    absl::MutexLock lock(&mu_);
    return learned_;
  }
  // The outcome hook runs right after the reply is sent, so a client can
  // have its answer a moment before the outcome is in: wait for `n` (at
  // most kWait), then return what is there.
  std::vector<QueryOutcome> outcomes(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return outcomes_.size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return outcomes_;
  }

 private:
  absl::Status Listen() {
    const IpAddress lo = IpAddress::V4(0x7f000001);
    for (int attempt = 0; attempt < 20; ++attempt) {
      absl::StatusOr<ListenerId> udp = server_->ListenUdp({lo, 0});
      if (!udp.ok()) return udp.status();
      udp_addr_ = *server_->local_address(*udp);
      absl::StatusOr<ListenerId> tcp = server_->ListenTcp(udp_addr_);
      if (!tcp.ok()) continue;  // that port's TCP side was taken
      udp_ = *udp;
      tcp_ = *tcp;
      tcp_addr_ = udp_addr_;
      break;
    }
    if (tcp_ == 0) return absl::UnavailableError("no UDP+TCP port");
    {
      absl::StatusOr<ListenerId> udp2 = server_->ListenUdp({lo, 0});
      if (!udp2.ok()) return udp2.status();
      udp2_ = *udp2;
      udp2_addr_ = *server_->local_address(udp2_);
      absl::StatusOr<ListenerId> udp3 = server_->ListenUdp({lo, 0});
      if (!udp3.ok()) return udp3.status();
      udp3_addr_ = *server_->local_address(*udp3);
    }
    return absl::OkStatus();
  }

  absl::Status status_;
  std::unique_ptr<FilterServer> server_;
  std::thread thread_;
  ListenerId udp_ = 0, tcp_ = 0, udp2_ = 0;
  std::atomic<ListenerId> udp6_{0};
  HostPort udp_addr_, tcp_addr_, udp2_addr_, udp3_addr_;
  absl::Mutex mu_;
  std::function<absl::Status(const LearnRequest&)> learn_ ABSL_GUARDED_BY(mu_);
  std::vector<LearnRequest> learned_ ABSL_GUARDED_BY(mu_);
  std::vector<QueryOutcome> outcomes_ ABSL_GUARDED_BY(mu_);
};

inline FakeName Answers(std::vector<std::string> addrs) {
  FakeName n;
  n.addrs = std::move(addrs);
  return n;
}
inline FakeName Tc(std::vector<std::string> addrs) {
  FakeName n = Answers(std::move(addrs));
  n.tc_over_udp = true;
  return n;
}
inline FakeName Alias(std::string cname, std::vector<std::string> addrs) {
  FakeName n = Answers(std::move(addrs));
  n.cname = std::move(cname);
  return n;
}
inline FakeName Silent() {
  FakeName n;
  n.silent = true;
  return n;
}

inline ForwarderOptions To(const HostPort& upstream) {
  ForwarderOptions f;
  f.servers = {upstream};
  f.attempt_timeout = absl::Milliseconds(500);
  f.query_timeout = absl::Seconds(2);
  return f;
}

}  // namespace sandfence::dns::testing

#endif  // SANDFENCE_TESTS_DNS_FILTER_FIXTURE_H_
