// Learn and prove on a real rollout (issue 15, part 3): `sandfence run`
// records a command that resolves three names through the DNS filter and
// connects to each (under a broad learning policy: any name below .test,
// any port); `records suggest` turns the record into a policy; `check
// --against` replays the record against it (nothing denied), and against
// the policy with one host taken out (exactly that host denied). The real
// binary throughout; a dnsmasq upstream and listeners on loopback only.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "records/journal.h"
#include "support/dns_server.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "support/test_files.h"
#include "tests/egress/egress_fixture.h"
#include "tests/run/run_fixture.h"

namespace sandfence::testing {
namespace {

std::string WithoutLines(const std::string& text, const std::string& needle) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StrContains(line, needle)) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

class RunLearnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    SANDFENCE_REQUIRE_DNSMASQ();
    REQUIRE_KERNEL_FOR_RUN();
    if (access("/usr/bin/python3", X_OK) != 0) {
      GTEST_SKIP() << "needs /usr/bin/python3 for the stub resolver";
    }
    model_ = Listen("127.0.0.2");
    a_ = Listen("127.0.0.3");
    b_ = Listen("127.0.0.4");
    c_ = Listen("127.0.0.5");
    absl::StatusOr<std::unique_ptr<TestDnsServer>> dns =
        TestDnsServer::Start({{"a.test", {"127.0.0.3"}},
                              {"b.test", {"127.0.0.4"}},
                              {"c.test", {"127.0.0.5"}}});
    ASSERT_TRUE(dns.ok()) << dns.status();
    dns_ = *std::move(dns);
    absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<ScopedTempDir>(*std::move(dir));
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_->Path(name);
    std::ofstream(path) << text;
    return path;
  }
  static std::string Query(const std::string& name) {
    return absl::StrCat("/usr/bin/python3 ", SANDFENCE_SOURCE,
                        "/tests/run/dns_query.py 127.0.0.53 53 ", name);
  }
  static std::string Connect(const char* addr, uint16_t port) {
    return absl::StrCat("timeout 5 bash -c 'exec 3<>/dev/tcp/", addr, "/", port,
                        "'");
  }

  Listener model_, a_, b_, c_;
  std::unique_ptr<TestDnsServer> dns_;
  std::unique_ptr<ScopedTempDir> dir_;
};

TEST_F(RunLearnTest, ARecordedRunLearnsAPolicyThatDeniesNothingOfIt) {
  // Learning: every name below .test on any port, the rest denied (the
  // command also tries an address by itself: denied, and learned too).
  const std::string learning = Write(
      "learning.textproto",
      absl::StrCat("name: \"learning\"\n"
                   "phase { name: \"agent\" network_access: MODEL_ONLY\n"
                   "  model: \"http://127.0.0.2:",
                   model_.port,
                   "/v1\"\n"
                   "  allow { host: \"*.test\" port_range { first: 1 last: "
                   "65535 } }\n"
                   "  dns { mode: FILTERED resolver: \"",
                   dns_->address().ToString(),
                   "\" answers_may_point_at: \"127.0.0.0/8\" } }\n"));
  const std::string record = dir_->Path("run.sfrec");
  const std::string script = absl::StrCat(
      Query("a.test"), " && ", Query("b.test"), " && ", Query("c.test"), " && ",
      Connect("127.0.0.2", model_.port), " && ", Connect("127.0.0.3", a_.port),
      " && ", Connect("127.0.0.4", b_.port), " && ",
      Connect("127.0.0.5", c_.port), " && echo all-connected; ",
      Connect("127.0.0.9", a_.port), " 2>/dev/null || echo denied-by-address");
  Result run = Sandfence({"run", learning, "--resolver",
                          dns_->address().ToString(), "--record", record,
                          "--guard", "off", "--", "bash", "-c", script});
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  ASSERT_TRUE(absl::StrContains(run.out, "all-connected")) << run.out;
  ASSERT_TRUE(absl::StrContains(run.out, "denied-by-address")) << run.out;

  // The replay against the policy the run was made under gives back the
  // kernel's verdicts, as many denials as the record holds: the address
  // tried by itself, and where SHELL is unset (as in CI) nscd's socket,
  // which the C library tries on its own for getpwuid and the policy
  // lists no name for.
  absl::StatusOr<v1::RolloutRecord> recorded = ReadRecordFile(record);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  uint64_t kernel_denied = 0;
  uint64_t kernel_denied_net = 0;
  for (const v1::NetAttempt& a : recorded->net_attempt()) {
    if (a.verdict() != v1::VERDICT_DENY) continue;
    kernel_denied += a.count();
    if (a.protocol() != "unix") kernel_denied_net += a.count();
  }
  EXPECT_EQ(kernel_denied_net, 1u) << recorded->DebugString();
  const std::string denied = absl::StrCat("127.0.0.9:", a_.port);
  Result self = Sandfence({"check", learning, "--resolver",
                           dns_->address().ToString(), "--against", record});
  EXPECT_EQ(self.status, 1) << self.out << self.err;
  EXPECT_TRUE(absl::StrContains(self.out, denied)) << self.out;
  EXPECT_TRUE(absl::StrContains(
      self.out, absl::StrCat("summary: would deny ", kernel_denied, " of ")))
      << self.out;

  Result suggest = Sandfence({"records", "suggest", record});
  ASSERT_EQ(suggest.status, 0) << suggest.err;
  for (const auto& [host, port] :
       {std::pair{"a.test", a_.port}, std::pair{"b.test", b_.port},
        std::pair{"c.test", c_.port}}) {
    EXPECT_TRUE(absl::StrContains(
        suggest.out, absl::StrCat("allow { host: \"", host, "\" port: ", port,
                                  " protocol: TCP }")))
        << suggest.out;
  }
  EXPECT_TRUE(absl::StrContains(
      suggest.out, absl::StrCat("model: \"http://127.0.0.2:", model_.port)))
      << suggest.out;
  EXPECT_TRUE(absl::StrContains(
      suggest.out, absl::StrCat("allow { host: \"127.0.0.9\" port: ", a_.port)))
      << suggest.out;
  // The answers pointed at loopback, which the run's policy granted: the
  // suggestion keeps each address it saw opened, and no wider range.
  for (const char* addr : {"127.0.0.3", "127.0.0.4", "127.0.0.5"}) {
    EXPECT_TRUE(absl::StrContains(
        suggest.out, absl::StrCat("answers_may_point_at: \"", addr, "\"")))
        << suggest.out;
  }
  EXPECT_FALSE(absl::StrContains(suggest.out, "127.0.0.0/8")) << suggest.out;
  const std::string suggested = Write("suggested.textproto", suggest.out);

  Result all = Sandfence({"check", suggested, "--resolver",
                          dns_->address().ToString(), "--against", record});
  EXPECT_EQ(all.status, 0) << all.out << all.err << "\npolicy:\n"
                           << suggest.out;
  EXPECT_TRUE(absl::StrContains(all.out, "would deny: nothing")) << all.out;

  const std::string fewer =
      Write("fewer.textproto", WithoutLines(suggest.out, "b.test"));
  Result one = Sandfence({"check", fewer, "--resolver",
                          dns_->address().ToString(), "--against", record});
  EXPECT_EQ(one.status, 1) << one.out << one.err;
  EXPECT_TRUE(absl::StrContains(one.out, absl::StrCat("127.0.0.4:", b_.port)))
      << one.out;
  EXPECT_TRUE(absl::StrContains(one.out, "b.test (A)")) << one.out;
  // Exactly that host: two rows (its query, its connection), nothing else.
  const std::string table =
      one.out.substr(one.out.find("would deny:"),
                     one.out.find("summary:") - one.out.find("would deny:"));
  EXPECT_FALSE(absl::StrContains(table, "127.0.0.3")) << one.out;
  EXPECT_FALSE(absl::StrContains(table, "127.0.0.5")) << one.out;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 5) << one.out;
}

}  // namespace
}  // namespace sandfence::testing
