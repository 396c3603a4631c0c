// DnsFilterHost without the kernel: targets in 127.83.0.0/16 (loopback),
// identity by listener, and adding and removing sandboxes while another
// sandbox's queries keep the filter's thread busy (the filter's thread
// takes the host's lock for every query: Add must never wait for that
// thread while holding it). Binding port 53 needs root.
#include "sandbox/dns_filter_host.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "sandbox/netns.h"
#include "support/test_env.h"

namespace sandfence::testing {
namespace {

// A query for `name` (A, IN), as a stub resolver sends it.
std::string Query(uint16_t id, const std::string& name) {
  std::string q = {static_cast<char>(id >> 8),
                   static_cast<char>(id & 0xff),
                   1,
                   0,
                   0,
                   1,
                   0,
                   0,
                   0,
                   0,
                   0,
                   0};
  size_t start = 0;
  while (start < name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    q.push_back(static_cast<char>(dot - start));
    q.append(name, start, dot - start);
    start = dot + 1;
  }
  q.append({0, 0, 1, 0, 1});
  return q;
}

// Sends one query to target and returns the reply's rcode, or -1.
int Ask(const HostPort& target, const std::string& name) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  timeval tv{.tv_sec = 2, .tv_usec = 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(target.port);
  std::memcpy(&a.sin_addr, target.addr.bytes(), 4);
  const std::string q = Query(0x4242, name);
  int rcode = -1;
  if (sendto(s, q.data(), q.size(), 0, reinterpret_cast<sockaddr*>(&a),
             sizeof(a)) == static_cast<ssize_t>(q.size())) {
    char buf[512];
    ssize_t n = recv(s, buf, sizeof(buf), 0);
    if (n >= 4) rcode = buf[3] & 0xf;
  }
  close(s);
  return rcode;
}

CompiledPhase FilteredPhase() {
  CompiledPhase p;
  p.name = "agent";
  p.access = v1::MODEL_ONLY;
  p.dns_filtered = true;
  p.name_rules = {{"api.model.test", {{L4::kTcp, 8000, 8000}}, "model"}};
  return p;
}

class DnsFilterHostTest : public ::testing::Test {
 protected:
  void SetUp() override { SANDFENCE_REQUIRE_ROOT(); }
  // A loopback upstream nobody answers: only blocked names are asked here.
  const std::vector<HostPort> upstreams_ = {
      *HostPort::Parse("127.0.0.1:9", 53)};
};

TEST_F(DnsFilterHostTest, EachSandboxGetsItsOwnTargetAndIsKnownByIt) {
  std::vector<uint64_t> outcome_sandboxes;
  absl::Mutex mu;
  DnsFilterHost host(7, [](uint64_t, uint32_t, std::vector<LearnedEntry>) {
    return absl::OkStatus();
  });
  auto record = [&](const dns::QueryOutcome& o) {
    absl::MutexLock lock(&mu);
    outcome_sandboxes.push_back(o.sandbox.value_or(0));
  };
  absl::StatusOr<HostPort> a = host.AddSandbox(1001, upstreams_, record);
  absl::StatusOr<HostPort> b = host.AddSandbox(1002, upstreams_, record);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(a->addr, b->addr);
  for (const HostPort* t : {&*a, &*b}) {
    EXPECT_EQ(t->port, 53);
    uint32_t be;
    std::memcpy(&be, t->addr.bytes(), 4);
    EXPECT_EQ(ntohl(be) >> 16, 0x7f53u) << t->addr.ToString();
  }
  EXPECT_EQ(host.AddSandbox(1001, upstreams_, record).status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(host.SetPhase(1001, FilteredPhase(), 5).ok());
  ASSERT_TRUE(host.SetPhase(1002, FilteredPhase(), 6).ok());
  EXPECT_EQ(Ask(*a, "secret.attacker.test"), 3);  // NXDOMAIN, not asked
  EXPECT_EQ(Ask(*b, "secret.attacker.test"), 3);
  // The outcome is reported right after the reply is sent: wait for it
  // (bounded), never sleep a fixed time.
  {
    absl::MutexLock lock(&mu);
    mu.AwaitWithTimeout(
        absl::Condition(
            +[](std::vector<uint64_t>* v) { return v->size() >= 2; },
            &outcome_sandboxes),
        absl::Seconds(5));
    EXPECT_EQ(outcome_sandboxes, (std::vector<uint64_t>{1001, 1002}));
  }
  host.RemoveSandbox(1001);
  EXPECT_EQ(Ask(*a, "secret.attacker.test"), -1) << "its target is closed";
  EXPECT_EQ(host.sandboxes(), 1u);
}

TEST_F(DnsFilterHostTest, ATargetInASandboxsOwnNamespaceIsServedThereOnly) {
  // A namespace of the test's own, its loopback left down: Add brings it
  // up (127.83.x.y cannot be bound otherwise).
  UniqueFd netns;
  std::thread([&] {
    if (unshare(CLONE_NEWNET) == 0) {
      netns.reset(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    }
  }).join();
  ASSERT_TRUE(netns) << "a network namespace for the test: "
                     << std::strerror(errno);
  DnsFilterHost host(9, [](uint64_t, uint32_t, std::vector<LearnedEntry>) {
    return absl::OkStatus();
  });
  absl::StatusOr<HostPort> t =
      host.AddSandbox(2001, upstreams_, nullptr, netns.get());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(host.SetPhase(2001, FilteredPhase(), 1).ok());
  int inside = -2;
  ASSERT_TRUE(InNetns(netns.get(), [&] {
                inside = Ask(*t, "secret.attacker.test");
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(inside, 3) << "answered in the sandbox's namespace";
  EXPECT_EQ(Ask(*t, "secret.attacker.test"), -1)
      << "nothing listens at the target in the host's namespace";
  host.RemoveSandbox(2001);
}

TEST_F(DnsFilterHostTest, WithNoUpstreamAllowedNamesGetServfailOthersNxdomain) {
  // A defaulted FILTERED on a host whose nameservers are unknown: the
  // filter still blocks, and says it has nowhere to ask for the rest.
  DnsFilterHost host(10, [](uint64_t, uint32_t, std::vector<LearnedEntry>) {
    return absl::OkStatus();
  });
  absl::StatusOr<HostPort> t = host.AddSandbox(3001, {}, nullptr);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(host.SetPhase(3001, FilteredPhase(), 1).ok());
  EXPECT_EQ(Ask(*t, "api.model.test"), 2);  // SERVFAIL
  EXPECT_EQ(Ask(*t, "secret.attacker.test"), 3);
  host.RemoveSandbox(3001);
}

TEST_F(DnsFilterHostTest, AddAndRemoveWhileAnotherSandboxFloodsTheFilter) {
  DnsFilterHost host(8, [](uint64_t, uint32_t, std::vector<LearnedEntry>) {
    return absl::OkStatus();
  });
  absl::StatusOr<HostPort> busy = host.AddSandbox(1, upstreams_, nullptr);
  ASSERT_TRUE(busy.ok()) << busy.status();
  ASSERT_TRUE(host.SetPhase(1, FilteredPhase(), 1).ok());
  std::atomic<bool> stop{false};
  std::thread flood([&] {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(busy->port);
    std::memcpy(&a.sin_addr, busy->addr.bytes(), 4);
    const std::string q = Query(1, "flood.attacker.test");
    while (!stop) {
      sendto(s, q.data(), q.size(), MSG_DONTWAIT,
             reinterpret_cast<sockaddr*>(&a), sizeof(a));
    }
    close(s);
  });
  // A deadlock hangs here (ctest's timeout fails the test).
  for (uint64_t id = 100; id < 150; ++id) {
    absl::StatusOr<HostPort> t = host.AddSandbox(id, upstreams_, nullptr);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE(host.SetPhase(id, FilteredPhase(), 2).ok());
    EXPECT_EQ(Ask(*t, "x.attacker.test"), 3);
    host.RemoveSandbox(id);
  }
  stop = true;
  flood.join();
  EXPECT_EQ(host.sandboxes(), 1u);
}

}  // namespace
}  // namespace sandfence::testing
