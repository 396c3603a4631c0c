// `sandfence run` with a DNS-filtered policy (issue 14), end to end: the
// real binary, a real dnsmasq upstream on loopback with a query log, a
// Python stub resolver inside the sandbox asking 127.0.0.53:53 (loopback:
// a filter that failed open would send nothing off the machine).
//   - a blocked name gets NXDOMAIN and never reaches the upstream;
//   - an allowed name resolves, and a wildcard's answer opens its port;
//   - the wildcard's apex is blocked;
//   - TCP queries are filtered the same way;
//   - the record lists each name with its verdict;
//   - a sandbox with its own network namespace is served there, and cannot
//     reach the filters' range through its own loopback;
//   - after the upstream's answer changes, a new query opens the new
//     address and the old one expires after TTL + grace.
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "support/dns_server.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "support/test_files.h"
#include "tests/egress/egress_fixture.h"
#include "tests/run/run_fixture.h"

namespace sandfence::testing {
namespace {

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size())) {
    ++n;
  }
  return n;
}

class RunDnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    SANDFENCE_REQUIRE_DNSMASQ();
    REQUIRE_KERNEL_FOR_RUN();
    if (access("/usr/bin/python3", X_OK) != 0) {
      GTEST_SKIP() << "needs /usr/bin/python3 for the stub resolver";
    }
    model_ = Listen("127.0.0.2");
    tool_ = Listen("127.0.0.5");
    apex_ = Listen("127.0.0.6");
    absl::StatusOr<std::unique_ptr<TestDnsServer>> dns =
        TestDnsServer::Start({{"api.model.test", {"127.0.0.2"}},
                              {"a.b.tool.test", {"127.0.0.5"}},
                              {"tool.test", {"127.0.0.6"}},
                              {"secret.attacker.test", {"127.0.0.7"}},
                              {"rebind.tool.test", {"127.0.0.1"}}});
    ASSERT_TRUE(dns.ok()) << dns.status();
    dns_ = *std::move(dns);
    absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<ScopedTempDir>(*std::move(dir));
    policy_ = WritePolicy("dns.policy", "");
  }

  // The test policy, with `dns_extra` in its dns block. Its names answer
  // with loopback addresses (where the test's servers are), which the
  // filter opens only because the policy grants them (DNS rebinding).
  std::string WritePolicy(const std::string& name, const std::string& dns_extra,
                          bool grant_loopback = true) {
    const std::string path = dir_->Path(name);
    std::ofstream(path) << absl::StrCat(
        "name: \"dns\"\n"
        "phase { name: \"agent\" network_access: MODEL_AND_TOOLS\n"
        "  model: \"http://api.model.test:",
        model_.port,
        "/v1\"\n"
        "  allow { host: \"*.tool.test\" port: ",
        tool_.port,
        " }\n"
        "  dns { mode: FILTERED resolver: \"",
        dns_->address().ToString(), "\" ",
        grant_loopback ? "answers_may_point_at: \"127.0.0.0/8\" " : "",
        dns_extra, " } }\n");
    return path;
  }

  // `sandfence run` of a shell script in the sandbox, with the record.
  Result Run(const std::string& script, const std::string& policy = "") {
    return Sandfence({"run", policy.empty() ? policy_ : policy, "--resolver",
                      dns_->address().ToString(), "--record", Record(),
                      "--guard", "off", "--", "bash", "-c", script});
  }
  std::string Record() { return dir_->Path("run.record"); }
  static std::string Query(const std::string& name, bool tcp = false,
                           const std::string& server = "127.0.0.53") {
    return absl::StrCat("/usr/bin/python3 ", SANDFENCE_SOURCE,
                        "/tests/run/dns_query.py ", tcp ? "--tcp " : "", server,
                        " 53 ", name);
  }
  static std::string Connect(const char* addr, uint16_t port) {
    return absl::StrCat("timeout 5 bash -c 'exec 3<>/dev/tcp/", addr, "/", port,
                        "'");
  }

  Listener model_, tool_, apex_;
  std::unique_ptr<TestDnsServer> dns_;
  std::unique_ptr<ScopedTempDir> dir_;
  std::string policy_;
};

TEST_F(RunDnsTest, ABlockedNameGetsNxdomainAndNeverReachesTheUpstream) {
  Result r = Run(Query("secret.attacker.test"));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "rcode 3")) << r.out << r.err;
  EXPECT_FALSE(absl::StrContains(r.out, "addr ")) << r.out;
  EXPECT_FALSE(absl::StrContains(dns_->log(), "secret.attacker.test"))
      << "the upstream was asked:\n"
      << dns_->log();
}

TEST_F(RunDnsTest, AnAllowedNameResolvesAndAWildcardAnswerOpensItsPort) {
  // Before the query the tool's address is closed; after it, open.
  const std::string script = absl::StrCat(
      "if ", Connect("127.0.0.5", tool_.port), "; then echo early-open; fi; ",
      Query("api.model.test"), " && ", Query("a.b.tool.test"), " && ",
      Connect("127.0.0.5", tool_.port), " && echo tool-open");
  Result r = Run(script);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_FALSE(absl::StrContains(r.out, "early-open")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "addr 127.0.0.2")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "addr 127.0.0.5")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "tool-open")) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(dns_->log(), "a.b.tool.test")) << dns_->log();
}

// A tool grant's host may be a wildcard too (issue 14, item 4): an answer
// for a name below it opens the tool URL's port, and nothing is open
// before.
TEST_F(RunDnsTest, AWildcardToolGrantOpensItsPortForAnsweredNames) {
  const std::string path = dir_->Path("tool.policy");
  {
    std::ofstream(path) << absl::StrCat(
        "name: \"dns\"\n"
        "phase { name: \"agent\" network_access: MODEL_AND_TOOLS\n"
        "  model: \"http://api.model.test:",
        model_.port,
        "/v1\"\n"
        "  dns { mode: FILTERED resolver: \"",
        dns_->address().ToString(),
        "\" answers_may_point_at: \"127.0.0.0/8\" } }\n");
  }
  const std::string script = absl::StrCat(
      "if ", Connect("127.0.0.5", tool_.port), "; then echo early-open; fi; ",
      Query("a.b.tool.test"), " && ", Connect("127.0.0.5", tool_.port),
      " && echo tool-open");
  Result r =
      Sandfence({"run", path, "--tool",
                 absl::StrCat("cdn=http://*.tool.test:", tool_.port, "/mcp"),
                 "--resolver", dns_->address().ToString(), "--guard", "off",
                 "--", "bash", "-c", script});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_FALSE(absl::StrContains(r.out, "early-open")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "addr 127.0.0.5")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "tool-open")) << r.out << r.err;
}

TEST_F(RunDnsTest, TheWildcardsApexIsBlockedAndItsAddressStaysClosed) {
  Result r = Run(absl::StrCat(Query("tool.test"), "; ",
                              Connect("127.0.0.6", apex_.port),
                              " || echo apex-closed"));
  EXPECT_TRUE(absl::StrContains(r.out, "rcode 3")) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "apex-closed")) << r.out << r.err;
}

TEST_F(RunDnsTest, TcpQueriesAreFilteredTheSameWay) {
  Result r = Run(absl::StrCat(Query("secret.attacker.test", true), " && ",
                              Query("a.b.tool.test", true)));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "rcode 3")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "addr 127.0.0.5")) << r.out;
  EXPECT_FALSE(absl::StrContains(dns_->log(), "secret.attacker.test"))
      << dns_->log();
}

TEST_F(RunDnsTest, AQueryToAnyAddressesPort53IsFilteredTheSameWay) {
  // Loopback addresses where nothing listens: only the filter can answer,
  // and a filter that failed open would send nothing off the machine.
  Result r =
      Run(absl::StrCat(Query("secret.attacker.test", false, "127.0.0.99"),
                       " && ", Query("a.b.tool.test", false, "127.1.2.3")));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "rcode 3")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "addr 127.0.0.5")) << r.out;
}

TEST_F(RunDnsTest,
       ALearnedAddressExpiresAfterItsTtlAndGraceAndAQueryReopensIt) {
  // TTL clamped to 1 s, 1 s of grace: the address closes within a few
  // seconds (polled, at most 15 s), and asking again opens it again.
  const std::string policy = WritePolicy(
      "short.policy", "min_ttl_seconds: 1 max_ttl_seconds: 1 grace_seconds: 1");
  const std::string connect = Connect("127.0.0.5", tool_.port);
  const std::string script = absl::StrCat(
      Query("a.b.tool.test"), " >/dev/null && ", connect,
      " && echo opened; for i in $(seq 150); do if ! ", connect,
      " 2>/dev/null; then echo expired; break; fi; sleep 0.1; done; ",
      Query("a.b.tool.test"), " >/dev/null && ", connect, " && echo reopened");
  Result r = Run(script, policy);
  EXPECT_TRUE(absl::StrContains(r.out, "opened\nexpired\nreopened"))
      << r.out << r.err;
}

TEST_F(RunDnsTest, TheRecordListsEachNameWithItsVerdict) {
  Result r = Run(absl::StrCat(Query("secret.attacker.test"), "; ",
                              Query("a.b.tool.test")));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  Result show = Sandfence({"records", "show", "--json", Record()});
  ASSERT_EQ(show.status, 0) << show.err;
  EXPECT_TRUE(absl::StrContains(show.out, "secret.attacker.test")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "a.b.tool.test")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "\"blocked\"")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "\"allowed\"")) << show.out;
  // The allowed query names the wildcard it matched and what it opened.
  EXPECT_TRUE(absl::StrContains(show.out, "*.tool.test")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "127.0.0.5")) << show.out;
}

// DNS rebinding, as the agent would try it: a name its phase grants (under
// the tool's wildcard) whose servers answer 127.0.0.1, where a host
// service listens on the granted port. Without a grant of loopback the
// answer is refused and 127.0.0.1 stays closed; granting it opens it (the
// same script, so the first result is not an accident of the setup).
TEST_F(RunDnsTest, RebindingToLoopbackThroughAGrantedNameDoesNotOpenIt) {
  Listener host_service = Listen("127.0.0.1");
  auto policy = [&](const std::string& name, const std::string& grant) {
    const std::string path = dir_->Path(name);
    std::ofstream(path) << absl::StrCat(
        "name: \"rebind\"\n"
        "phase { name: \"agent\" network_access: MODEL_AND_TOOLS\n"
        "  model: \"http://192.0.2.1:9/v1\"\n"
        "  allow { host: \"*.tool.test\" port: ",
        host_service.port,
        " }\n"
        "  dns { mode: FILTERED resolver: \"",
        dns_->address().ToString(), "\" ", grant, " } }\n");
    return path;
  };
  const std::string script = absl::StrCat(
      Query("rebind.tool.test"), "; ", Connect("127.0.0.1", host_service.port),
      " 2>/dev/null && echo loopback-open || echo loopback-closed");
  Result refused = Run(script, policy("nogrant.policy", ""));
  ASSERT_EQ(refused.status, 0) << refused.out << refused.err;
  EXPECT_TRUE(absl::StrContains(refused.out, "rcode 5")) << refused.out;
  EXPECT_FALSE(absl::StrContains(refused.out, "addr 127.0.0.1")) << refused.out;
  EXPECT_TRUE(absl::StrContains(refused.out, "loopback-closed"))
      << refused.out << refused.err;
  Result show = Sandfence({"records", "show", "--json", Record()});
  ASSERT_EQ(show.status, 0) << show.err;
  EXPECT_TRUE(absl::StrContains(show.out, "\"rebinding\"")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "dns.answers_may_point_at"))
      << show.out;

  Result granted = Run(
      script, policy("grant.policy", "answers_may_point_at: \"127.0.0.1\""));
  ASSERT_EQ(granted.status, 0) << granted.out << granted.err;
  EXPECT_TRUE(absl::StrContains(granted.out, "addr 127.0.0.1")) << granted.out;
  EXPECT_TRUE(absl::StrContains(granted.out, "loopback-open"))
      << granted.out << granted.err;
}

TEST_F(RunDnsTest, ASandboxWithItsOwnNetworkNamespaceIsServedThere) {
  // No loopback endpoint in the policy: the host's loopback is not the
  // sandbox's. The model is a documentation address (RFC 5737) nothing
  // connects to; in the sandbox's namespace (only lo) it has no route
  // anyway. The filter listens in the sandbox's namespace and asks the
  // upstream (on the host's loopback) from the host's.
  const std::string policy = dir_->Path("netns.policy");
  std::ofstream(policy) << absl::StrCat(
      "name: \"netns\"\n"
      "phase { name: \"agent\" network_access: MODEL_AND_TOOLS\n"
      "  model: \"http://192.0.2.1:9/v1\"\n"
      "  allow { host: \"*.tool.test\" port: ",
      tool_.port,
      " }\n"
      "  dns { mode: FILTERED resolver: \"",
      dns_->address().ToString(),
      "\" answers_may_point_at: \"127.0.0.0/8\" } }\n");
  char host_ns[64] = {};
  ASSERT_GT(readlink("/proc/self/ns/net", host_ns, sizeof(host_ns) - 1), 0);
  const std::string script = absl::StrCat(
      "echo ns $(readlink /proc/self/ns/net); ", Query("a.b.tool.test"), "; ",
      Query("secret.attacker.test"), "; ", Query("a.b.tool.test", true), "; ",
      // Its own loopback is free, except the filters' range: a listener
      // of its own there is out of reach, and so is its port 53.
      "/usr/bin/python3 ", SANDFENCE_SOURCE,
      "/tests/run/loopback_reach.py 5353 127.0.0.9 127.83.0.77; ",
      Query("a.b.tool.test", false, "127.83.0.78"), " 2>&1; true");
  Result r = Sandfence({"run", policy, "--netns", "private", "--resolver",
                        dns_->address().ToString(), "--record", Record(),
                        "--guard", "off", "--", "bash", "-c", script});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "ns net:[")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, absl::StrCat("ns ", host_ns)))
      << "the command ran in the host's network namespace:\n"
      << r.out;
  // UDP and TCP: the allowed name answered, twice; the blocked one not.
  EXPECT_EQ(CountOf(r.out, "addr 127.0.0.5"), 2) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "rcode 3")) << r.out;
  EXPECT_TRUE(absl::StrContains(dns_->log(), "a.b.tool.test")) << dns_->log();
  EXPECT_FALSE(absl::StrContains(dns_->log(), "secret.attacker.test"))
      << "the upstream was asked:\n"
      << dns_->log();
  EXPECT_TRUE(absl::StrContains(r.out, "reached 127.0.0.9")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "refused 127.83.0.77 errno 1")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Operation not permitted")) << r.out;
}

TEST_F(RunDnsTest, ANewAnswerOpensTheNewAddressAndTheOldOneExpires) {
  // The upstream restarts with a new address for the name (same port, as a
  // rotated load balancer would answer): a new query opens the new
  // address, and the old one closes after its TTL (clamped to 1 s) plus
  // 1 s of grace. The command and the test meet through files; every wait
  // is a bounded poll.
  Listener moved = Listen("127.0.0.8", tool_.port);
  ASSERT_TRUE(moved.tcp) << "a listener on 127.0.0.8:" << tool_.port;
  const std::string policy = WritePolicy(
      "moved.policy", "min_ttl_seconds: 1 max_ttl_seconds: 1 grace_seconds: 1");
  const std::string asked = dir_->Path("asked");
  const std::string restarted = dir_->Path("restarted");
  const std::string old_addr = Connect("127.0.0.5", tool_.port);
  const std::string new_addr = Connect("127.0.0.8", tool_.port);
  const std::string script = absl::StrCat(
      Query("a.b.tool.test"), " && ", old_addr, " && echo old-open; ", "if ",
      new_addr, " 2>/dev/null; then echo new-early; fi; ", "touch ", asked,
      "; for i in $(seq 300); do [ -e ", restarted,
      " ] && break; sleep 0.1; done; ", Query("a.b.tool.test"), " && ",
      new_addr, " && echo new-open; for i in $(seq 150); do if ! ", old_addr,
      " 2>/dev/null; then echo old-expired; break; fi; sleep 0.1; done");
  SandfenceProcess run({"run", policy, "--resolver", dns_->address().ToString(),
                        "--guard", "off", "--", "bash", "-c", script});
  // The first answer was used: restart the upstream with the new address.
  bool seen = false;
  for (int i = 0; i < 300 && !seen; ++i) {
    seen = access(asked.c_str(), F_OK) == 0;
    if (!seen) usleep(100 * 1000);
  }
  ASSERT_TRUE(seen) << "the command never asked:\n" << run.Wait().err;
  const uint16_t port = dns_->address().port;
  dns_.reset();
  absl::StatusOr<std::unique_ptr<TestDnsServer>> dns =
      TestDnsServer::Start({{"a.b.tool.test", {"127.0.0.8"}}}, port);
  ASSERT_TRUE(dns.ok()) << dns.status();
  dns_ = *std::move(dns);
  std::ofstream(restarted) << "\n";
  Result r = run.Wait();
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "addr 127.0.0.5\nold-open\n"))
      << r.out << r.err;
  EXPECT_FALSE(absl::StrContains(r.out, "new-early")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "addr 127.0.0.8\nnew-open\nold-expired"))
      << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(dns_->log(), "a.b.tool.test")) << dns_->log();
}

}  // namespace
}  // namespace sandfence::testing
