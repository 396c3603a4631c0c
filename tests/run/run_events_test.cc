// `sandfence run --events-out` (issue 38), end to end: the real binary, a
// model_only command that makes one allowed and one denied connect on
// loopback, a DNS-filtered one with a dnsmasq upstream on loopback, a
// refused policy, and the same lines in OCSF and on standard output. Every
// line must parse as JSON, carry time, rollout, phase, kind and verdict,
// and name what was decided.
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "support/dns_server.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "support/test_files.h"
#include "tests/egress/egress_fixture.h"
#include "tests/run/run_fixture.h"

namespace sandfence::testing {
namespace {

using google::protobuf::Struct;

std::string Str(const Struct& s, const std::string& name) {
  auto it = s.fields().find(name);
  return it == s.fields().end() ? "" : it->second.string_value();
}
const Struct& Sub(const Struct& s, const std::string& name) {
  static const Struct kEmpty;
  auto it = s.fields().find(name);
  return it == s.fields().end() ? kEmpty : it->second.struct_value();
}

// Every line of `text`, parsed; a line that is not JSON fails the test.
std::vector<Struct> ParseLines(const std::string& text) {
  std::vector<Struct> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    Struct s;
    const auto status =
        google::protobuf::util::JsonStringToMessage(std::string(line), &s);
    EXPECT_TRUE(status.ok()) << status.ToString() << ": " << line;
    if (status.ok()) out.push_back(s);
  }
  return out;
}

// How a run ended, on one line: its status and the ends of its output.
std::string OneLine(const Result& r) {
  auto tail = [](std::string text) {
    if (text.size() > 900) text = "..." + text.substr(text.size() - 900);
    return absl::StrReplaceAll(text, {{"\n", " | "}});
  };
  return absl::StrCat("[run ended with status ", r.status,
                      "; stdout: ", tail(r.out), "; stderr: ", tail(r.err),
                      "]");
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class RunEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    REQUIRE_KERNEL_FOR_RUN();
    model_ = Listen("127.0.0.2");
    other_ = Listen("127.0.0.4");
    absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<ScopedTempDir>(*std::move(dir));
  }
  std::string ModelUrl() const {
    return absl::StrCat("http://127.0.0.2:", model_.port, "/v1");
  }
  std::string AllowedAndDenied() const {
    return absl::StrCat("exec 3<>/dev/tcp/127.0.0.2/", model_.port,
                        " && echo model-reached; exec 4<>/dev/tcp/127.0.0.4/",
                        other_.port, " || echo other-refused");
  }
  // Every line has the fields the schema promises on every line.
  static void ExpectCommonFields(const std::vector<Struct>& lines) {
    for (const Struct& l : lines) {
      EXPECT_EQ(Str(l, "schema"), "sandfence.events.v1");
      EXPECT_TRUE(absl::EndsWith(Str(l, "time"), "Z")) << Str(l, "time");
      EXPECT_TRUE(absl::StartsWith(Str(l, "rollout"), "run-"));
      EXPECT_FALSE(Str(l, "kind").empty());
      EXPECT_FALSE(Str(l, "verdict").empty());
    }
  }

  Listener model_, other_;
  std::unique_ptr<ScopedTempDir> dir_;
};

TEST_F(RunEventsTest, AnAllowedAndADeniedConnectAreLinesOfTheFile) {
  const std::string events = dir_->Path("events.jsonl");
  Result r = Sandfence({"run", "--network-access", "model_only", "--model",
                        ModelUrl(), "--events-out", events, "--", "bash", "-c",
                        AllowedAndDenied()});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  ASSERT_TRUE(absl::StrContains(r.out, "model-reached")) << r.out << r.err;
  ASSERT_TRUE(absl::StrContains(r.out, "other-refused")) << r.out << r.err;
  const std::vector<Struct> lines = ParseLines(Slurp(events));
  ASSERT_GE(lines.size(), 2u) << Slurp(events);
  ExpectCommonFields(lines);
  int allowed = 0, denied = 0, phases = 0, ended = 0;
  for (const Struct& l : lines) {
    if (Str(l, "kind") == "phase") {
      ++phases;
      if (l.fields().count("ended")) ++ended;
      continue;
    }
    if (Str(l, "kind") != "network") continue;
    const Struct& dest = Sub(l, "destination");
    const int port = static_cast<int>(dest.fields().at("port").number_value());
    if (Str(l, "verdict") == "allowed" && Str(dest, "address") == "127.0.0.2" &&
        port == model_.port) {
      ++allowed;
    }
    if (Str(l, "verdict") == "denied" && Str(dest, "address") == "127.0.0.4" &&
        port == other_.port) {
      ++denied;
      EXPECT_EQ(Str(l, "protocol"), "tcp");
      EXPECT_EQ(Str(l, "hook"), "connect4");
      EXPECT_EQ(Str(Sub(l, "process"), "comm"), "bash");
    }
  }
  EXPECT_EQ(allowed, 1) << Slurp(events);
  EXPECT_EQ(denied, 1) << Slurp(events);
  EXPECT_EQ(phases, 2) << "the start and the end";
  EXPECT_EQ(ended, 1);
}

// The egress budget from the command line: the second connection to the
// model is past a budget of one, denied with the budget's reason, a line of
// the stream; the record holds the counts and `records show` prints them.
TEST_F(RunEventsTest, AConnectPastTheEgressBudgetIsADeniedLine) {
  const std::string events = dir_->Path("events.jsonl");
  const std::string record = dir_->Path("budget.sfrec");
  const std::string port = std::to_string(model_.port);
  Result r = Sandfence(
      {"run", "--network-access", "model_only", "--model", ModelUrl(),
       "--egress-budget-connections", "1", "--events-out", events, "--record",
       record, "--", "bash", "-c",
       absl::StrCat("exec 3<>/dev/tcp/127.0.0.2/", port,
                    " && echo first-reached; exec 4<>/dev/tcp/127.0.0.2/", port,
                    " || echo second-refused")});
  ASSERT_EQ(r.status, 0) << OneLine(r);
  EXPECT_TRUE(absl::StrContains(r.out, "first-reached")) << OneLine(r);
  EXPECT_TRUE(absl::StrContains(r.out, "second-refused")) << OneLine(r);
  int past = 0;
  for (const Struct& l : ParseLines(Slurp(events))) {
    if (Str(l, "kind") == "network" && Str(l, "verdict") == "denied" &&
        Str(l, "reason") == "budget: connections") {
      ++past;
      EXPECT_EQ(Str(Sub(l, "destination"), "address"), "127.0.0.2");
    }
  }
  EXPECT_EQ(past, 1) << Slurp(events);
  Result show = Sandfence({"records", "show", record});
  ASSERT_EQ(show.status, 0) << OneLine(show);
  EXPECT_TRUE(absl::StrContains(show.out, "1 of 1 connections")) << show.out;
}

// A sandbox with its own network namespace owns its loopback: a server
// there and its client exchange far more than the byte budget, and none of
// it is counted (the budget is for what leaves the sandbox).
TEST_F(RunEventsTest, TheSandboxesOwnLoopbackSpendsNoBudget) {
  const std::string record = dir_->Path("own-loopback.sfrec");
  constexpr char kExchange[] = R"(
import socket, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
got = []
def serve():
    c, _ = srv.accept(); c.settimeout(10); n = 0
    while True:
        b = c.recv(65536)
        if not b: break
        n += len(b)
    got.append(n)
t = threading.Thread(target=serve, daemon=True); t.start()
c = socket.create_connection(srv.getsockname(), timeout=10)
c.sendall(b"x" * 1000000); c.close(); t.join(10)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(20): s.sendto(b"y" * 1000, u.getsockname())
u.settimeout(5); n = sum(len(u.recv(2000)) for _ in range(20))
print("tcp", got[0] if got else -1, "udp", n)
)";
  // The model's address is only a rule here (nothing connects to it): a
  // private namespace cannot reach the host's loopback.
  Result r = Sandfence({"run", "--network-access", "model_only", "--model",
                        "http://192.0.2.1:80/v1", "--netns", "private",
                        "--egress-budget-bytes", "1000", "--record", record,
                        "--", "/usr/bin/python3", "-c", kExchange});
  ASSERT_EQ(r.status, 0) << OneLine(r);
  EXPECT_TRUE(absl::StrContains(r.out, "tcp 1000000 udp 20000")) << OneLine(r);
  Result show = Sandfence({"records", "show", record});
  ASSERT_EQ(show.status, 0) << OneLine(show);
  EXPECT_TRUE(absl::StrContains(show.out, "0 of 1000 bytes")) << show.out;
}

TEST_F(RunEventsTest, StandardOutputAndOcsf) {
  Result r =
      Sandfence({"run", "--network-access", "model_only", "--model", ModelUrl(),
                 "--events-out", "-", "--events-format", "ocsf", "--", "bash",
                 "-c", absl::StrCat("{ ", AllowedAndDenied(), "; } >&2")});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::vector<Struct> lines = ParseLines(r.out);
  bool refused = false;
  for (const Struct& l : lines) {
    EXPECT_EQ(Str(Sub(Sub(l, "metadata"), "product"), "name"), "sandfence");
    if (l.fields().at("class_uid").number_value() == 4001 &&
        l.fields().at("action_id").number_value() == 2) {
      refused = Str(Sub(l, "dst_endpoint"), "ip") == "127.0.0.4";
    }
  }
  EXPECT_TRUE(refused) << r.out;
}

// `run --json`: the summary is one line of JSON, the last on stderr.
TEST_F(RunEventsTest, TheSummaryAsJson) {
  Result r =
      Sandfence({"run", "--network-access", "model_only", "--model", ModelUrl(),
                 "--json", "--", "bash", "-c",
                 absl::StrCat("{ ", AllowedAndDenied(), "; } 2>/dev/null")});
  // Every failure below says, on its last line, how the run ended: a flake
  // in CI must be diagnosable from the tail of its log alone (it failed
  // there twice, never here).
  std::string why = OneLine(r);
  ASSERT_EQ(r.status, 0) << why;
  // The summary is the last line sandfence itself writes; it is found by
  // its first key, so a line the kernel or a library adds cannot hide it.
  std::vector<std::string> summaries;
  for (absl::string_view line :
       absl::StrSplit(r.err, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "{\"exit_status\":")) {
      summaries.emplace_back(line);
    }
  }
  ASSERT_EQ(summaries.size(), 1u) << why;
  const std::vector<Struct> parsed = ParseLines(summaries[0]);
  ASSERT_EQ(parsed.size(), 1u) << why;
  const Struct& s = parsed[0];
  // The counters and the denied list, whole: the tail in `why` may not
  // reach them (the guard's report comes after).
  std::string counted;
  (void)google::protobuf::util::MessageToJsonString(Sub(s, "counters"),
                                                    &counted);
  std::string listed;
  (void)google::protobuf::util::MessageToJsonString(s.fields().at("denied"),
                                                    &listed);
  // First on the line: CI's digest cuts each line at 700 characters.
  why = absl::StrCat("[counters: ", counted, "; denied: ", listed,
                     "; events_read: ",
                     s.fields().at("events_read").number_value(), "] ", why);
  EXPECT_EQ(Str(s, "network_access"), "model_only") << why;
  EXPECT_EQ(s.fields().at("exit_status").number_value(), 0) << why;
  // Only the TCP denial is the command's. Its bash may add others: without
  // SHELL in the environment (as in CI) bash asks getpwuid, and glibc tries
  // nscd's Unix socket twice, which a model_only sandbox rightly denies.
  // The counter must still agree with the list.
  const auto& denied = s.fields().at("denied").list_value();
  double listed_count = 0;
  std::vector<std::string> tcp;
  for (const auto& d : denied.values()) {
    listed_count += d.struct_value().fields().at("count").number_value();
    if (Str(d.struct_value(), "protocol") == "tcp") {
      tcp.push_back(Str(d.struct_value(), "destination"));
    }
  }
  EXPECT_EQ(Sub(s, "counters").fields().at("denied").number_value(),
            listed_count)
      << why;
  EXPECT_THAT(tcp,
              ::testing::ElementsAre(absl::StrCat("127.0.0.4:", other_.port)))
      << why;
  EXPECT_FALSE(Str(Sub(s, "guard"), "enforcer").empty()) << why;
}

// A policy that cannot be enforced is refused before anything starts, and
// the stream says so: a refusal line, typed and not retryable.
TEST_F(RunEventsTest, ARefusalIsALine) {
  const std::string events = dir_->Path("refused.jsonl");
  Result r = Sandfence({"run", "--network-access", "model_only", "--model",
                        ModelUrl(), "--required-tool",
                        "http://no-such-host.invalid:1/x", "--resolver",
                        "127.0.0.1:1", "--events-out", events, "--", "true"});
  ASSERT_NE(r.status, 0) << r.err;
  const std::vector<Struct> lines = ParseLines(Slurp(events));
  ASSERT_EQ(lines.size(), 1u) << Slurp(events);
  EXPECT_EQ(Str(lines[0], "kind"), "refusal");
  EXPECT_EQ(Str(lines[0], "verdict"), "refused");
  EXPECT_FALSE(Str(lines[0], "cause").empty());
  EXPECT_FALSE(Str(lines[0], "reason").empty());
}

TEST_F(RunEventsTest, AnEventsFileBehindALinkIsRefusedBeforeTheCommandRuns) {
  const std::string target = dir_->Path("elsewhere");
  const std::string link = dir_->Path("events.jsonl");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  Result r = Sandfence({"run", "--network-access", "inherit", "--events-out",
                        link, "--", "touch", dir_->Path("ran")});
  EXPECT_EQ(r.status, 73) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--events-out")) << r.err;
  EXPECT_NE(::access(dir_->Path("ran").c_str(), F_OK), 0);
  EXPECT_NE(::access(target.c_str(), F_OK), 0);
}

TEST_F(RunEventsTest, DnsQueriesAreLines) {
  SANDFENCE_REQUIRE_DNSMASQ();
  if (access("/usr/bin/python3", X_OK) != 0) {
    GTEST_SKIP() << "needs /usr/bin/python3 for the stub resolver";
  }
  absl::StatusOr<std::unique_ptr<TestDnsServer>> dns =
      TestDnsServer::Start({{"a.tool.test", {"127.0.0.5"}},
                            {"secret.attacker.test", {"127.0.0.7"}}});
  ASSERT_TRUE(dns.ok()) << dns.status();
  const std::string policy = dir_->Path("dns.policy");
  std::ofstream(policy) << absl::StrCat(
      "name: \"dns\"\n"
      "phase { name: \"agent\" network_access: MODEL_AND_TOOLS\n"
      "  model: \"",
      ModelUrl(),
      "\"\n"
      "  allow { host: \"*.tool.test\" port: 443 }\n"
      "  dns { mode: FILTERED resolver: \"",
      (*dns)->address().ToString(),
      "\" answers_may_point_at: \"127.0.0.0/8\" } }\n");
  const std::string query =
      absl::StrCat("/usr/bin/python3 ", SANDFENCE_SOURCE,
                   "/tests/run/dns_query.py 127.0.0.53 53 ");
  const std::string events = dir_->Path("dns.jsonl");
  Result r = Sandfence(
      {"run", policy, "--resolver", (*dns)->address().ToString(),
       "--events-out", events, "--", "bash", "-c",
       absl::StrCat(query, "a.tool.test; ", query, "secret.attacker.test")});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::vector<Struct> lines = ParseLines(Slurp(events));
  ExpectCommonFields(lines);
  bool allowed = false, denied = false;
  for (const Struct& l : lines) {
    if (Str(l, "kind") != "dns") continue;
    EXPECT_EQ(Str(l, "phase"), "agent");
    if (Str(l, "name") == "a.tool.test" && Str(l, "verdict") == "allowed") {
      allowed = true;
      EXPECT_EQ(Str(l, "matched"), "*.tool.test");
      ASSERT_EQ(l.fields().at("answers").list_value().values_size(), 1);
      EXPECT_EQ(l.fields().at("answers").list_value().values(0).string_value(),
                "127.0.0.5");
    }
    if (Str(l, "name") == "secret.attacker.test" &&
        Str(l, "verdict") == "denied") {
      denied = true;
      EXPECT_EQ(Str(l, "rcode"), "NXDOMAIN");
    }
  }
  EXPECT_TRUE(allowed) << Slurp(events);
  EXPECT_TRUE(denied) << Slurp(events);
}

}  // namespace
}  // namespace sandfence::testing
