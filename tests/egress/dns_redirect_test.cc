// The kernel side of the DNS filter, end to end: real sandboxes, the real
// programs, real sockets on loopback. A DNS-filtered sandbox's queries to
// port 53 land on its filter target (a socket this test binds in
// 127.83.0.0/16) and the client sees the server it asked; nothing in the
// sandbox reaches the filters' range directly; learned addresses open
// their grants until they expire. The attacker's cases come first.
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>

#include <cerrno>
#include <optional>

#include "common/status.h"
#include "common/unique_fd.h"
#include "egress/net_event.h"
#include "host/host_state.h"
#include "support/egress_kernel_fixture.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/egress/egress_fixture.h"

namespace sandfence::testing {
namespace {

std::string Port(uint16_t p) { return std::to_string(p); }

uint64_t BootNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + ts.tv_nsec;
}

CompiledPhase Filtered(std::vector<Rule> rules = {}) {
  CompiledPhase p = Phase(v1::MODEL_ONLY, std::move(rules));
  p.dns_filtered = true;
  return p;
}

// A filter target: UDP and TCP sockets on 127.83.0.<n>, one kernel port.
struct Target {
  Listener sockets;
  std::string addr;
  HostPort host_port() const {
    return HostPort{*IpAddress::Parse(addr), sockets.port};
  }
};

Target MakeTarget(int n) {
  Target t;
  t.addr = absl::StrCat("127.83.0.", n);
  t.sockets = Listen(t.addr.c_str());
  return t;
}

// Waits up to 5 s for one datagram on s and answers it from s.
bool AnswerUdp(int s) {
  pollfd p{.fd = s, .events = POLLIN, .revents = 0};
  if (poll(&p, 1, 5000) != 1) return false;
  char buf[512];
  sockaddr_storage from{};
  socklen_t len = sizeof(from);
  ssize_t n = recvfrom(s, buf, sizeof(buf), 0,
                       reinterpret_cast<sockaddr*>(&from), &len);
  if (n <= 0) return false;
  return sendto(s, "answer", 6, 0, reinterpret_cast<sockaddr*>(&from), len) ==
         6;
}

// Waits up to 5 s for one connection on a listening socket, reads the
// query and answers it.
bool AnswerTcp(int listener) {
  pollfd p{.fd = listener, .events = POLLIN, .revents = 0};
  if (poll(&p, 1, 5000) != 1) return false;
  UniqueFd c(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!c) return false;
  char buf[512];
  pollfd q{.fd = c.get(), .events = POLLIN, .revents = 0};
  if (poll(&q, 1, 5000) != 1 || read(c.get(), buf, sizeof(buf)) <= 0) {
    return false;
  }
  return write(c.get(), "answer", 6) == 6;
}

// Whether anything is queued on a socket (a datagram, a connection).
bool Pending(int s) {
  pollfd p{.fd = s, .events = POLLIN, .revents = 0};
  return poll(&p, 1, 0) == 1;
}

class DnsRedirectTest : public EgressKernelTest {
 protected:
  void SetUp() override {
    EgressKernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    model_ = Listen("127.0.0.2");
  }

  void SetTarget(const Cgroup& sb, const Target& t) {
    absl::Status s = controller_->SetDnsTarget(sb.id(), t.host_port());
    ASSERT_TRUE(s.ok()) << s;
  }

  // A query from the sandbox that the target answers: the probe's status
  // (0: answered, and the client saw the server it asked).
  int Query(const Cgroup& sb, const Target& t, const char* op,
            const char* addr) {
    const bool tcp = std::string(op) == "tcp-query";
    pid_t pid = Start(sb, {NetProbePath(), op, addr, "53"});
    const bool answered =
        tcp ? AnswerTcp(t.sockets.tcp.get()) : AnswerUdp(t.sockets.udp.get());
    const int status = Wait(pid);
    EXPECT_TRUE(answered || status != 0)
        << op << " " << addr << ": the probe succeeded with no answer";
    if (!answered) return status == 0 ? -2 : status;
    return status;
  }

  Listener model_;
};

// --- The attacker's cases ---------------------------------------------------

// The filters' range is unreachable, even for a policy that allows all of
// loopback: else a sandbox could ask another sandbox's filter and be taken
// for it.
TEST_F(DnsRedirectTest, TheFilterRangeIsUnreachableDirectly) {
  Target own = MakeTarget(1), other = MakeTarget(2);
  const std::vector<Rule> all_loopback = {TcpRule("127.0.0.0/8", 1, 65535),
                                          UdpRule("127.0.0.0/8", 1, 65535)};
  Cgroup filtered = NewSandbox(Filtered(all_loopback));
  SetTarget(filtered, own);
  Cgroup unfiltered = NewSandbox(Phase(v1::MODEL_ONLY, all_loopback));
  Cgroup other_sb = NewSandbox(Filtered());
  SetTarget(other_sb, other);
  const std::string op = Port(own.sockets.port), ot = Port(other.sockets.port);
  struct Case {
    const char* name;
    const Cgroup* sb;
    std::vector<std::string> args;
  };
  // clang-format off
  const Case cases[] = {
      {"UDP to the own target", &filtered, {"udp-sendto", own.addr, op}},
      {"TCP to the own target", &filtered, {"tcp-connect", own.addr, op}},
      {"connected UDP to the own target", &filtered,
       {"udp-connect", own.addr, op}},
      {"UDP to another sandbox's target", &filtered,
       {"udp-sendto", other.addr, ot}},
      {"TCP to another sandbox's target", &filtered,
       {"tcp-connect", other.addr, ot}},
      {"IPv4-mapped TCP to another sandbox's target", &filtered,
       {"tcp-connect", "::ffff:" + other.addr, ot}},
      {"IPv4-mapped UDP to the own target", &filtered,
       {"udp-sendto", "::ffff:" + own.addr, op}},
      {"port 53 inside the range", &filtered,
       {"udp-sendto", other.addr, "53"}},
      {"an unfiltered sandbox to a target", &unfiltered,
       {"udp-sendto", other.addr, ot}},
      {"an unfiltered sandbox, TCP", &unfiltered,
       {"tcp-connect", own.addr, op}},
      {"TCP Fast Open to a target", &unfiltered,
       {"tcp-fastopen", own.addr, op}},
  };
  // clang-format on
  for (const Case& c : cases) {
    EXPECT_EQ(Probe(*c.sb, c.args), EPERM) << c.name;
  }
  for (const Target* t : {&own, &other}) {
    EXPECT_FALSE(Pending(t->sockets.udp.get()))
        << "a datagram reached " << t->addr;
    EXPECT_FALSE(Pending(t->sockets.tcp.get()))
        << "a connection reached " << t->addr;
  }
}

TEST_F(DnsRedirectTest, AFilteredPhaseWithoutATargetDeniesDns) {
  Target t = MakeTarget(3);
  Cgroup sb = NewSandbox(Filtered({UdpRule("127.0.0.0/8", 1, 65535)}));
  EXPECT_EQ(Probe(sb, {"udp-sendto", "127.0.0.53", "53"}), EPERM);
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.53", "53"}), EPERM);
  EXPECT_EQ(Probe(sb, {"udp-connect", "::1", "53"}), EPERM);
  // Set, then cleared: denied again, never passed through.
  SetTarget(sb, t);
  EXPECT_EQ(Query(sb, t, "udp-query", "127.0.0.53"), 0);
  ASSERT_TRUE(controller_->ClearDnsTarget(sb.id()).ok());
  EXPECT_EQ(Probe(sb, {"udp-sendto", "127.0.0.53", "53"}), EPERM);
  EXPECT_FALSE(Pending(t.sockets.udp.get()));
}

// The backstop: a socket connected while the sandbox was unrestricted
// sends no addressed message, so no sock_addr hook judges its datagrams;
// cgroup_skb drops those into the filters' range, except to the sandbox's
// own target.
TEST_F(DnsRedirectTest, TheBackstopDropsPacketsIntoTheRangeButNotToTheTarget) {
  Target own = MakeTarget(4), other = MakeTarget(5);
  Cgroup sb = NewSandbox(Phase(v1::INHERIT, {}));
  ASSERT_TRUE(controller_->SetDnsTarget(sb.id(), own.host_port()).ok());
  // A child in the sandbox connects two UDP sockets now, and sends on
  // both once the phase has switched; it reports the two send errnos.
  int ready[2], go[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(go, O_CLOEXEC), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string procs = sb.path() + "/cgroup.procs", me = Port(getpid());
    int fd = open(procs.c_str(), O_WRONLY);
    if (fd < 0 || write(fd, me.data(), me.size()) < 0) _exit(200);
    int s[2];
    const Target* to[2] = {&own, &other};
    for (int i = 0; i < 2; ++i) {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(to[i]->sockets.port);
      inet_pton(AF_INET, to[i]->addr.c_str(), &a.sin_addr);
      s[i] = socket(AF_INET, SOCK_DGRAM, 0);
      if (connect(s[i], reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        _exit(201);
      }
    }
    char c = 0;
    if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(202);
    int own_err = send(s[0], "x", 1, 0) == 1 ? 0 : errno;
    int other_err = send(s[1], "x", 1, 0) == 1 ? 0 : errno;
    _exit(own_err * 16 + other_err);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  // A policy that allows all of loopback: only the range closes it.
  ASSERT_TRUE(
      controller_
          ->SwitchPhase(sb.id(), Filtered({UdpRule("127.0.0.0/8", 1, 65535)}))
          .ok());
  ASSERT_EQ(write(go[1], &c, 1), 1);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) close(fd);
  const int status = Wait(pid);
  EXPECT_EQ(status / 16, 0) << "the send to the own target failed";
  EXPECT_EQ(status % 16, EPERM)
      << "the send into the filters' range was not dropped";
  EXPECT_TRUE(Pending(own.sockets.udp.get()));
  EXPECT_FALSE(Pending(other.sockets.udp.get()));
}

// --- The redirect -----------------------------------------------------------

TEST_F(DnsRedirectTest, QueriesToPort53GoToTheFilterAndSeeTheServerAsked) {
  SANDFENCE_REQUIRE_HOST(HostIpv6Loopback());
  Target t = MakeTarget(6);
  Cgroup sb = NewSandbox(Filtered());
  SetTarget(sb, t);
  struct Case {
    const char* name;
    const char* op;
    const char* addr;
  };
  // clang-format off
  const Case cases[] = {
      {"UDP sendto; recvfrom shows the server", "udp-query", "127.0.0.53"},
      {"connected UDP; getpeername and recvfrom show the server",
       "udp-connected-query", "127.0.0.53"},
      {"TCP; accepted on the target, getpeername shows the server",
       "tcp-query", "127.0.0.53"},
      {"any address, not just a resolver's", "udp-query", "127.0.0.9"},
      {"IPv6 connected UDP to ::1", "udp-connected-query", "::1"},
      {"IPv6 TCP to ::1", "tcp-query", "::1"},
      {"IPv4-mapped IPv6 sendto (the kernel sends it through sendmsg4)",
       "udp-query", "::ffff:127.0.0.53"},
      {"IPv4-mapped IPv6 connected UDP", "udp-connected-query",
       "::ffff:127.0.0.53"},
  };
  // clang-format on
  for (const Case& c : cases) {
    EXPECT_EQ(Query(sb, t, c.op, c.addr), 0) << c.name;
  }
}

// Limits of the IPv4 target, both fail closed: the query never leaves.
TEST_F(DnsRedirectTest, Ipv6QueriesTheKernelCannotRedirectAreRefused) {
  SANDFENCE_REQUIRE_HOST(HostIpv6Loopback());
  Target t = MakeTarget(7);
  Cgroup sb = NewSandbox(Filtered({UdpRule("::1", 53)}));
  SetTarget(sb, t);
  // udpv6_sendmsg refuses a sendmsg6 rewrite to an IPv4-mapped address:
  // the hook denies it, even though a rule names ::1 port 53.
  EXPECT_EQ(Probe(sb, {"udp-sendto", "::1", "53"}), EPERM);
  // An IPV6_V6ONLY socket cannot reach ::ffff:127.83.0.x.
  EXPECT_EQ(Probe(sb, {"udp6only-connect", "::1", "53"}), ENETUNREACH);
  EXPECT_FALSE(Pending(t.sockets.udp.get()));
}

TEST_F(DnsRedirectTest, AnUnfilteredPhaseJudgesPort53ByItsRules) {
  Target t = MakeTarget(8);
  Listener resolver = Listen("127.0.0.154", 53);
  Listener other = Listen("127.0.0.155", 53);
  Cgroup sb = NewSandbox(Phase(v1::MODEL_ONLY, {UdpRule("127.0.0.154", 53)}));
  // A target set for the sandbox changes nothing while DNS is unfiltered.
  SetTarget(sb, t);
  EXPECT_EQ(Probe(sb, {"udp-sendto", "127.0.0.154", "53"}), 0);
  EXPECT_TRUE(Pending(resolver.udp.get()));
  EXPECT_EQ(Probe(sb, {"udp-sendto", "127.0.0.155", "53"}), EPERM);
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.154", "53"}), EPERM);
  EXPECT_FALSE(Pending(other.udp.get()));
  EXPECT_FALSE(Pending(t.sockets.udp.get()));
}

// Issue 15: an audit-only judge redirects as ever (its filter answers, and
// records what it would block); where it would deny a query (no filter
// target), the query goes to the rules of every sandbox instead: passed as
// its would-deny, unless an enforcing sandbox around it denies.
TEST_F(DnsRedirectTest, AnAuditJudgeRedirectsAndLeavesItsDenialsToTheRules) {
  Target t = MakeTarget(12);
  Listener resolver = Listen("127.0.0.154", 53);
  CompiledPhase audit = Filtered();
  audit.audit_only = true;
  Cgroup sb = NewSandbox(audit);
  SetTarget(sb, t);
  EXPECT_EQ(Query(sb, t, "udp-query", "127.0.0.53"), 0);
  EXPECT_FALSE(Pending(resolver.udp.get()));
  ASSERT_TRUE(controller_->ClearDnsTarget(sb.id()).ok());
  EXPECT_EQ(Probe(sb, {"udp-sendto", "127.0.0.154", "53"}), 0);
  EXPECT_TRUE(Pending(resolver.udp.get())) << "not passed as a would-deny";
  auto counters = controller_->Counters(sb.id());
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ(counters->audit_denied, 1u);
  char buf[64];
  while (recv(resolver.udp.get(), buf, sizeof(buf), MSG_DONTWAIT) >= 0) {
  }

  // Inside an enforcing sandbox with no rule for port 53: denied there.
  Cgroup outer = NewSandbox(Phase(v1::MODEL_ONLY, {TcpRule("127.0.0.3", 9)}));
  Cgroup inner = NewSandbox(audit, outer.path());
  EXPECT_EQ(Probe(inner, {"udp-sendto", "127.0.0.154", "53"}), EPERM);
  EXPECT_FALSE(Pending(resolver.udp.get()));
}

TEST_F(DnsRedirectTest, AnInheritPhaseIsUntouched) {
  Target t = MakeTarget(9);
  Listener resolver = Listen("127.0.0.154", 53);
  CompiledPhase inherit = Phase(v1::INHERIT, {});
  inherit.dns_filtered = true;  // meaningless without restrictions
  Cgroup sb = NewSandbox(inherit);
  SetTarget(sb, t);
  EXPECT_EQ(Probe(sb, {"udp-sendto", "127.0.0.154", "53"}), 0);
  EXPECT_TRUE(Pending(resolver.udp.get()));
  EXPECT_FALSE(Pending(t.sockets.udp.get()));
  // Nor is the range closed to it: it is not restricted at all.
  EXPECT_EQ(Probe(sb, {"udp-sendto", t.addr, Port(t.sockets.port)}), 0);
  EXPECT_TRUE(Pending(t.sockets.udp.get()));
}

// The deepest restricted sandbox judges DNS; its ancestors do not deny the
// redirected query, but still judge everything else.
TEST_F(DnsRedirectTest, NestedSandboxesTheDeepestRestrictedOneJudgesDns) {
  Target inner_t = MakeTarget(10), outer_t = MakeTarget(11);
  Cgroup outer = NewSandbox(Phase(v1::MODEL_ONLY, {TcpRule("127.0.0.3", 9)}));
  Cgroup inner =
      NewSandbox(Filtered({TcpRule("127.0.0.2", model_.port)}), outer.path());
  SetTarget(inner, inner_t);
  EXPECT_EQ(Query(inner, inner_t, "udp-query", "127.0.0.53"), 0)
      << "the outer sandbox denied the inner one's redirected query";
  EXPECT_EQ(Query(inner, inner_t, "tcp-query", "127.0.0.53"), 0);
  EXPECT_EQ(Probe(inner, {"tcp-connect", "127.0.0.2", Port(model_.port)}),
            EPERM)
      << "the outer sandbox allows no model";
  // The later runs of the hook (one per sandbox) do not open the target
  // to a direct send.
  EXPECT_EQ(
      Probe(inner, {"udp-sendto", inner_t.addr, Port(inner_t.sockets.port)}),
      EPERM);

  // The other way round: a filtered parent, an unfiltered child. The child
  // judges port 53 by its rules (none): denied, nothing redirected.
  SetTarget(outer, outer_t);
  ASSERT_TRUE(controller_->SwitchPhase(outer.id(), Filtered()).ok());
  ASSERT_TRUE(controller_
                  ->SwitchPhase(inner.id(), Phase(v1::MODEL_ONLY,
                                                  {TcpRule("127.0.0.3", 9)}))
                  .ok());
  EXPECT_EQ(Probe(inner, {"udp-sendto", "127.0.0.53", "53"}), EPERM);
  EXPECT_FALSE(Pending(outer_t.sockets.udp.get()));
  EXPECT_FALSE(Pending(inner_t.sockets.udp.get()));
}

TEST_F(DnsRedirectTest, RedirectsAndLearnedAllowsAreReportedAsSuch) {
  Target t = MakeTarget(12);
  Cgroup sb = NewSandbox(Filtered());
  SetTarget(sb, t);
  auto gen = controller_->Generation(sb.id());
  ASSERT_TRUE(gen.ok());
  std::vector<NetEvent> events;
  auto reader =
      NetEventReader::Create(controller_->events_fd(), [&](const NetEvent& e) {
        if (e.sandbox == sb.id()) events.push_back(e);
      });
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->Drain().ok());
  events.clear();

  EXPECT_EQ(Query(sb, t, "udp-query", "127.0.0.53"), 0);
  LearnedEntry e{*IpAddress::Parse("127.0.0.2"),
                 L4::kTcp,
                 {{model_.port, model_.port, 7}},
                 BootNowNs() + 600'000'000'000};
  ASSERT_TRUE(controller_->Learn(sb.id(), *gen, {e}).ok());
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(model_.port)}), 0);
  ASSERT_TRUE(controller_->ClearDnsTarget(sb.id()).ok());
  EXPECT_EQ(Probe(sb, {"udp-sendto", "127.0.0.53", "53"}), EPERM);
  ASSERT_TRUE((*reader)->Drain().ok());

  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].verdict, SF_VERDICT_ALLOW);
  EXPECT_EQ(events[0].reason, SF_REASON_DNS_REDIRECT);
  EXPECT_EQ(events[0].addr.ToString(), "127.0.0.53")
      << "the record names the server asked, not the filter";
  EXPECT_EQ(events[0].port, 53);
  EXPECT_EQ(ReasonName(events[0].reason), "redirected to the DNS filter");
  EXPECT_EQ(events[1].verdict, SF_VERDICT_ALLOW);
  EXPECT_EQ(events[1].reason, SF_REASON_LEARNED);
  EXPECT_EQ(events[1].rule_id, 7u);
  EXPECT_EQ(events[2].verdict, SF_VERDICT_DENY);
  EXPECT_EQ(events[2].reason, SF_REASON_DNS_NO_TARGET);
}

// --- Learned addresses ------------------------------------------------------

TEST_F(DnsRedirectTest, ALearnedAddressOpensItsPortUntilItExpires) {
  Listener other_port = Listen("127.0.0.2");
  Cgroup sb = NewSandbox(Filtered());
  auto gen = controller_->Generation(sb.id());
  ASSERT_TRUE(gen.ok());
  const std::string m = Port(model_.port);
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", m}), EPERM)
      << "nothing learned yet";
  // Long enough for the first probe on a loaded machine; the expiry is
  // then awaited with a bound, not a sleep.
  const uint64_t expires = BootNowNs() + 3'000'000'000;
  ASSERT_TRUE(controller_
                  ->Learn(sb.id(), *gen,
                          {{*IpAddress::Parse("127.0.0.2"),
                            L4::kTcp,
                            {{model_.port, model_.port, 0}},
                            expires}})
                  .ok());
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", m}), 0);
  EXPECT_EQ(Probe(sb, {"tcp-connect", "::ffff:127.0.0.2", m}), 0)
      << "IPv4-mapped IPv6 is judged by the IPv4 entry";
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(other_port.port)}),
            EPERM)
      << "another port of a learned address";
  EXPECT_EQ(Probe(sb, {"udp-sendto", "127.0.0.2", m}), EPERM)
      << "another protocol";
  int after = -1;
  for (int i = 0; i < 200 && after != EPERM; ++i) {
    after = Probe(sb, {"tcp-connect", "127.0.0.2", m});
    if (after != EPERM) usleep(100'000);
  }
  EXPECT_EQ(after, EPERM) << "still allowed 20 s after it expired";
  EXPECT_GE(BootNowNs(), expires);
  // The kernel judged it absent before anyone collected it.
  auto count = controller_->LearnedCount(sb.id());
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 1u);
  EXPECT_EQ(controller_->CollectExpired(BootNowNs()), 1u);
  EXPECT_EQ(*controller_->LearnedCount(sb.id()), 0u);
}

TEST_F(DnsRedirectTest, LearningIntoAnOldGenerationOpensNothing) {
  Cgroup sb = NewSandbox(Filtered());
  auto old_gen = controller_->Generation(sb.id());
  ASSERT_TRUE(old_gen.ok());
  ASSERT_TRUE(controller_->SwitchPhase(sb.id(), Filtered()).ok());
  const LearnedEntry e{*IpAddress::Parse("127.0.0.2"),
                       L4::kTcp,
                       {{model_.port, model_.port, 0}},
                       BootNowNs() + 600'000'000'000};
  absl::Status s = controller_->Learn(sb.id(), *old_gen, {e});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(model_.port)}), EPERM);
  EXPECT_EQ(*controller_->LearnedCount(sb.id()), 0u);
  // Nor into a phase that does not filter DNS.
  auto gen = controller_->SwitchPhase(sb.id(), Phase(v1::MODEL_ONLY, {}));
  ASSERT_TRUE(gen.ok());
  s = controller_->Learn(sb.id(), *gen, {e});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(model_.port)}), EPERM);
}

TEST_F(DnsRedirectTest, APhaseSwitchDropsLearnedAddresses) {
  Cgroup sb = NewSandbox(Filtered());
  auto gen = controller_->Generation(sb.id());
  ASSERT_TRUE(gen.ok());
  const LearnedEntry e{*IpAddress::Parse("127.0.0.2"),
                       L4::kTcp,
                       {{model_.port, model_.port, 0}},
                       BootNowNs() + 600'000'000'000};
  ASSERT_TRUE(controller_->Learn(sb.id(), *gen, {e}).ok());
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(model_.port)}), 0);
  auto next = controller_->SwitchPhase(sb.id(), Filtered());
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(model_.port)}), EPERM);
  EXPECT_EQ(*controller_->LearnedCount(sb.id()), 0u);
  // Learned again under the new generation: open again.
  ASSERT_TRUE(controller_->Learn(sb.id(), *next, {e}).ok());
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(model_.port)}), 0);
}

TEST_F(DnsRedirectTest, LearningExtendsAndUnionsAndCollectExpiredFreesMaps) {
  Listener second = Listen("127.0.0.2");
  Cgroup sb = NewSandbox(Filtered());
  auto gen = controller_->Generation(sb.id());
  ASSERT_TRUE(gen.ok());
  const uint64_t now = BootNowNs();
  const IpAddress a = *IpAddress::Parse("127.0.0.2");
  // Already expired, then learned again with a later expiry and another
  // port: both ports open (the union), and it lives to the later expiry.
  ASSERT_TRUE(controller_
                  ->Learn(sb.id(), *gen,
                          {{a, L4::kTcp, {{model_.port, model_.port, 0}}, 1}})
                  .ok());
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(model_.port)}), EPERM)
      << "an expired entry judges as absent";
  ASSERT_TRUE(
      controller_
          ->Learn(sb.id(), *gen,
                  {{a,
                    L4::kTcp,
                    {{second.port, second.port, 1}},
                    now + 600'000'000'000},
                   {*IpAddress::Parse("::1"), L4::kUdp, {{53, 53, 2}}, 2}})
          .ok());
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(model_.port)}), 0);
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(second.port)}), 0);
  EXPECT_EQ(*controller_->LearnedCount(sb.id()), 2u);
  // ::1 expired at 2 ns after boot; 127.0.0.2 lives on.
  EXPECT_EQ(controller_->CollectExpired(BootNowNs()), 1u);
  EXPECT_EQ(*controller_->LearnedCount(sb.id()), 1u);
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(second.port)}), 0);
  EXPECT_EQ(controller_->CollectExpired(now + 600'000'000'000), 1u);
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(second.port)}), EPERM);
}

// --- The controller API -----------------------------------------------------

TEST_F(DnsRedirectTest, BadTargetsAndEntriesAreRefusedByName) {
  Cgroup sb = NewSandbox(Filtered());
  Cgroup other = NewSandbox(Filtered());
  auto target = [](const char* addr, uint16_t port) {
    return HostPort{*IpAddress::Parse(addr), port};
  };
  struct Case {
    HostPort target;
    absl::StatusCode code;
    const char* names;
  };
  const Case cases[] = {
      {target("127.0.0.53", 53), absl::StatusCode::kInvalidArgument,
       "127.0.0.53:53"},
      {target("127.84.0.1", 53), absl::StatusCode::kInvalidArgument,
       "127.84.0.1:53"},
      {target("::ffff:127.83.0.1", 53), absl::StatusCode::kInvalidArgument,
       "127.83.0.1"},
      {target("127.83.0.1", 0), absl::StatusCode::kInvalidArgument,
       "127.83.0.1:0"},
  };
  for (const Case& c : cases) {
    absl::Status s = controller_->SetDnsTarget(sb.id(), c.target);
    EXPECT_EQ(s.code(), c.code) << c.target.ToString() << ": " << s;
    EXPECT_NE(s.message().find(c.names), std::string::npos) << s;
  }
  ASSERT_TRUE(
      controller_->SetDnsTarget(sb.id(), target("127.83.9.9", 5353)).ok());
  absl::Status taken =
      controller_->SetDnsTarget(other.id(), target("127.83.9.9", 5353));
  EXPECT_EQ(taken.code(), absl::StatusCode::kAlreadyExists) << taken;
  EXPECT_EQ(controller_->SetDnsTarget(12345, target("127.83.9.10", 53)).code(),
            absl::StatusCode::kNotFound);

  auto gen = controller_->Generation(sb.id());
  ASSERT_TRUE(gen.ok());
  const uint64_t later = BootNowNs() + 600'000'000'000;
  std::vector<PortRangeRef> nine;
  for (uint16_t p = 1; p <= 9; ++p)
    nine.push_back({uint16_t(p * 10), uint16_t(p * 10), p});
  struct Bad {
    LearnedEntry entry;
    absl::StatusCode code;
    const char* names;
  };
  const Bad bad[] = {
      {{*IpAddress::Parse("0.0.0.0"), L4::kTcp, {{80, 80, 0}}, later},
       absl::StatusCode::kInvalidArgument,
       "0.0.0.0"},
      {{*IpAddress::Parse("127.83.0.1"), L4::kTcp, {{80, 80, 0}}, later},
       absl::StatusCode::kInvalidArgument,
       "127.83.0.1"},
      {{*IpAddress::Parse("10.0.0.1"), L4::kTcp, {{90, 80, 0}}, later},
       absl::StatusCode::kInvalidArgument,
       "90-80"},
      {{*IpAddress::Parse("10.0.0.1"), L4::kTcp, {}, later},
       absl::StatusCode::kInvalidArgument,
       "no port ranges"},
      {{*IpAddress::Parse("10.0.0.1"), L4::kTcp, nine, later},
       absl::StatusCode::kFailedPrecondition,
       "9 distinct port ranges"},
  };
  for (const Bad& b : bad) {
    absl::Status s = controller_->Learn(sb.id(), *gen, {b.entry});
    EXPECT_EQ(s.code(), b.code) << b.names << ": " << s;
    EXPECT_NE(s.message().find(b.names), std::string::npos) << s;
  }
  EXPECT_EQ(*controller_->LearnedCount(sb.id()), 0u) << "nothing written";
  // Removing the sandbox clears its target: another may take it.
  ASSERT_TRUE(controller_->RemoveSandbox(sb.id()).ok());
  EXPECT_TRUE(
      controller_->SetDnsTarget(other.id(), target("127.83.9.9", 5353)).ok());
}

// A sandbox pinned by a build before the DNS filter has no reply-side
// links: adopting it attaches them (they judge nothing, so nothing ran
// unenforced) instead of reporting it unenforced; its learned addresses
// are found in the maps.
TEST_F(DnsRedirectTest, AdoptionAttachesMissingReplySideHooksAndFindsLearned) {
  const std::string root =
      absl::StrCat("/sys/fs/bpf/sandfence-dnsk-", getpid());
  auto host = HostState::Open({.pin_root = root});
  ASSERT_TRUE(host.ok()) << host.status();
  Target t = MakeTarget(13);
  auto cg = Cgroup::Create(absl::StrCat(TestCgroupRoot(), "/adopt"));
  ASSERT_TRUE(cg.ok()) << cg.status();
  {
    auto first = EgressController::Create(host->get());
    ASSERT_TRUE(first.ok()) << first.status();
    auto gen = (*first)->AddSandbox(cg->fd(), cg->ref(), Filtered());
    ASSERT_TRUE(gen.ok()) << gen.status();
    ASSERT_TRUE((*first)->SetDnsTarget(cg->id(), t.host_port()).ok());
    ASSERT_TRUE((*first)
                    ->Learn(cg->id(), *gen,
                            {{*IpAddress::Parse("127.0.0.2"),
                              L4::kTcp,
                              {{model_.port, model_.port, 0}},
                              BootNowNs() + 600'000'000'000}})
                    .ok());
  }  // the process "dies": everything stays pinned
  for (const char* hook : {"recvmsg4", "getpeername4"}) {
    const std::string pin = (*host)->pins().SandboxLink(cg->id(), hook);
    ASSERT_EQ(unlink(pin.c_str()), 0) << pin << ": " << strerror(errno);
  }
  auto second = EgressController::Create(host->get());
  ASSERT_TRUE(second.ok()) << second.status();
  auto adopted = (*second)->AdoptSandbox(cg->id());
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_TRUE(adopted->missing_hooks.empty()) << adopted->missing_hooks.front();
  EXPECT_EQ(*(*second)->LearnedCount(cg->id()), 1u);

  SpawnOptions o;
  o.cgroup_fd = cg->fd();
  o.argv = {NetProbePath(), "udp-connected-query", "127.0.0.53", "53"};
  auto pid = SpawnInCgroup(o);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_TRUE(AnswerUdp(t.sockets.udp.get()));
  EXPECT_EQ(Wait(*pid), 0) << "the reattached hooks did not restore the peer";
  o.argv = {NetProbePath(), "tcp-connect", "127.0.0.2", Port(model_.port)};
  EXPECT_EQ(Wait(*SpawnInCgroup(o)), 0) << "the learned address was lost";

  // A phase switch by the adopter drops what its predecessor learned.
  ASSERT_TRUE((*second)->SwitchPhase(cg->id(), Filtered()).ok());
  EXPECT_EQ(Wait(*SpawnInCgroup(o)), EPERM);
  ASSERT_TRUE((*second)->RemoveSandbox(cg->id()).ok());
  second->reset();
  host->reset();
  EXPECT_TRUE(EgressController::RemovePins(root).ok());
}

}  // namespace
}  // namespace sandfence::testing
