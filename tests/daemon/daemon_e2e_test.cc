// End to end against a real `sandfence daemon` process on a temporary
// socket, with real sandboxes and loopback listeners: 127.0.0.2 plays the
// model server, 127.0.0.3 a tool, 127.0.0.4 somewhere forbidden.
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/unique_fd.h"
#include "daemon/call_pool.h"
#include "daemon/daemon_fixture.h"
#include "daemon/grpc_service.h"
#include "egress/egress_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "records/journal.h"
#include "support/dns_server.h"
#include "support/test_env.h"

namespace sandfence::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kDenied = 1;  // net_probe exits with the errno: EPERM

// Three phases as a rollout framework uses them. DNS is off so that the
// host's resolv.conf (a server off this machine) plays no part.
std::string PolicyText(uint16_t tool_port) {
  return absl::StrCat(
      R"pb(
        name: "gym"
        phase {
          name: "setup"
          network_access: MODEL_ONLY
          dns { mode: NONE }
          audit { allowed: ALL }
        }
        phase { name: "agent" network_access: MODEL_AND_TOOLS
                dns { mode: NONE }
                audit { allowed: ALL }
                tool { name: "search" url: "http://127.0.0.3:)pb",
      tool_port, R"pb(" } }
                      phase {
                        name: "verify"
                        network_access: MODEL_ONLY
                        dns { mode: NONE }
                        audit { allowed: ALL }
                      }
      )pb");
}

class DaemonTest : public DaemonTestBase {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    model_ = Listen("127.0.0.2");
    tool_ = Listen("127.0.0.3");
    forbidden_ = Listen("127.0.0.4");
    daemon_ = std::make_unique<DaemonProcess>(MakeDaemonDirs("e2e"), Extra());
    daemon_->Start();
  }

  virtual std::vector<std::string> Extra() { return {}; }

  v1::StartRolloutRequest Request(const std::string& id) {
    v1::StartRolloutRequest req;
    req.set_rollout_id(id);
    req.mutable_sandbox()->set_create(true);
    req.set_policy_text(PolicyText(tool_.port));
    req.mutable_endpoints()->add_model(
        absl::StrCat("http://127.0.0.2:", model_.port, "/v1"));
    return req;
  }

  // The attempts of a record as "phase tcp addr:port verdict".
  static std::multiset<std::string> Attempts(const v1::RolloutRecord& r) {
    std::multiset<std::string> out;
    for (const v1::NetAttempt& a : r.net_attempt()) {
      out.insert(absl::StrCat(
          a.phase(), " ", a.protocol(), " ", a.address(), ":", a.port(), " ",
          a.verdict() == v1::VERDICT_DENY ? "deny" : "allow"));
    }
    return out;
  }

  Listener model_, tool_, forbidden_;
};

// Every sandbox holds a link fd per hook. Started with a low soft fd limit
// (systemd's default is 1,024), the daemon raises it to the hard one, or it
// would refuse rollouts past ~120.
TEST(DaemonLimits, RaisesItsSoftFdLimitToTheHardOne) {
  SANDFENCE_REQUIRE_ROOT();
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max <= 256) {
    GTEST_SKIP() << "SKIPPED: the hard fd limit here (" << saved.rlim_max
                 << ") leaves no soft limit below it to raise from";
  }
  rlimit low = saved;
  low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0) << strerror(errno);
  DaemonProcess daemon(MakeDaemonDirs("fdlimit"));
  daemon.Start();  // the child inherits the low soft limit
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0) << strerror(errno);
  std::ifstream f(absl::StrCat("/proc/", daemon.pid(), "/limits"));
  std::string line;
  std::string soft;
  while (std::getline(f, line)) {
    if (absl::StartsWith(line, "Max open files")) {
      std::vector<std::string> words = absl::StrSplit(
          line.substr(strlen("Max open files")), ' ', absl::SkipEmpty());
      if (!words.empty()) soft = words[0];
    }
  }
  const std::string want = saved.rlim_max == RLIM_INFINITY
                               ? "unlimited"
                               : absl::StrCat(saved.rlim_max);
  EXPECT_EQ(soft, want) << "the daemon kept a soft limit below the hard one";
}

TEST_F(DaemonTest, SocketIsRootOnly) {
  struct stat st {};
  ASSERT_EQ(stat(daemon_->dirs().socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);
}

TEST_F(DaemonTest, HealthSaysWhatEnforces) {
  grpc::ClientContext ctx;
  v1::HealthResponse h;
  ASSERT_TRUE(daemon_->stub()->Health(&ctx, {}, &h).ok());
  EXPECT_EQ(h.egress(), "cgroup-bpf");
  EXPECT_EQ(h.pin_dir(), daemon_->dirs().pin_dir);
  EXPECT_FALSE(h.kernel_release().empty());
  EXPECT_FALSE(h.version().empty());
  EXPECT_TRUE(absl::StartsWith(h.guard(), "lsm") ||
              absl::StartsWith(h.guard(), "signal"))
      << h.guard();
}

// The whole life of a rollout: start in setup, switch to agent (the tool
// opens), to verify (it closes), end, and the record says all of it.
TEST_F(DaemonTest, LifecycleEnforcesEachPhaseAndRecordsIt) {
  v1::StartRolloutResponse started;
  grpc::Status s = Start(Request("life-1"), &started);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon_->Log();
  EXPECT_EQ(started.phase(), "setup");
  ASSERT_EQ(started.phase_policy_size(), 3);
  EXPECT_EQ(started.phase_policy(0).rule_size(), 1);  // the model only
  EXPECT_EQ(started.phase_policy(1).rule_size(), 2);  // model + tool
  const std::string cg = started.cgroup_path();
  EXPECT_EQ(cg, daemon_->dirs().cgroups + "/life-1");

  struct Step {
    const char* phase;  // nullptr: stay
    const char* addr;
    uint16_t port;
    int want;
  };
  const Step steps[] = {
      {nullptr, "127.0.0.2", model_.port, 0},
      {nullptr, "127.0.0.3", tool_.port, kDenied},
      {nullptr, "127.0.0.4", forbidden_.port, kDenied},
      {"agent", "127.0.0.3", tool_.port, 0},
      {nullptr, "127.0.0.4", forbidden_.port, kDenied},
      {"verify", "127.0.0.3", tool_.port, kDenied},
      {nullptr, "127.0.0.2", model_.port, 0},
  };
  for (const Step& step : steps) {
    if (step.phase != nullptr) {
      v1::SetPhaseResponse sw;
      ASSERT_TRUE(SetPhase("life-1", step.phase, &sw).ok()) << step.phase;
      EXPECT_EQ(sw.phase(), step.phase);
      // A retried switch changes nothing: same generation, no new span.
      v1::SetPhaseResponse retry;
      ASSERT_TRUE(SetPhase("life-1", step.phase, &retry).ok());
      EXPECT_EQ(retry.generation(), sw.generation());
    }
    EXPECT_EQ(ProbeIn(cg, "tcp-connect", step.addr, step.port), step.want)
        << "connect to " << step.addr << " after switching to "
        << (step.phase ? step.phase : "(same phase)");
  }

  v1::ListRolloutsResponse list = List();
  ASSERT_EQ(list.rollout_size(), 1);
  EXPECT_EQ(list.rollout(0).phase(), "verify");

  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("life-1", &ended).ok());
  const v1::RolloutRecord& rec = ended.record();
  EXPECT_EQ(rec.rollout_id(), "life-1");
  EXPECT_TRUE(rec.complete());
  EXPECT_FALSE(rec.lossy()) << absl::StrJoin(WarningTexts(rec), "\n");
  ASSERT_EQ(rec.timeline_size(), 3);
  EXPECT_EQ(rec.timeline(0).name(), "setup");
  EXPECT_EQ(rec.timeline(2).name(), "verify");
  const std::string model = absl::StrCat("127.0.0.2:", model_.port);
  const std::string tool = absl::StrCat("127.0.0.3:", tool_.port);
  const std::string bad = absl::StrCat("127.0.0.4:", forbidden_.port);
  EXPECT_EQ(Attempts(rec), (std::multiset<std::string>{
                               "setup tcp " + model + " allow",
                               "setup tcp " + tool + " deny",
                               "setup tcp " + bad + " deny",
                               "agent tcp " + tool + " allow",
                               "agent tcp " + bad + " deny",
                               "verify tcp " + tool + " deny",
                               "verify tcp " + model + " allow",
                           }));
  // Written under the records directory; the sandbox is gone.
  struct stat st {};
  EXPECT_EQ(stat(ended.record_path().c_str(), &st), 0) << ended.record_path();
  EXPECT_NE(stat(cg.c_str(), &st), 0) << cg << " still exists";
  EXPECT_EQ(List().rollout_size(), 0);

  // GetRecord of an ended rollout reads the written record.
  grpc::ClientContext ctx;
  v1::GetRecordRequest get;
  get.set_rollout_id("life-1");
  v1::GetRecordResponse got;
  ASSERT_TRUE(daemon_->stub()->GetRecord(&ctx, get, &got).ok());
  EXPECT_FALSE(got.open());
  EXPECT_EQ(got.record().net_attempt_size(), rec.net_attempt_size());
}

// Every refusal class, with its gRPC code and a message that says why; and
// nothing is left attached, created or recorded.
// Every refusal has its code, a typed Refusal in its status details (so
// that no client parses the message), the same answer from the dry run,
// and leaves nothing behind.
TEST_F(DaemonTest, RefusalsHaveTheirCodesAndChangeNothing) {
  struct Case {
    const char* name;
    std::function<void(v1::StartRolloutRequest*)> mutate;
    grpc::StatusCode code;
    const char* says;
    // The Refusal's field and value ("*": any, not checked) and its phase.
    const char* field;
    const char* value;
    const char* phase = "";
  };
  const std::string model_url =
      absl::StrCat("http://127.0.0.2:", model_.port, "/v1");
  const std::vector<Case> cases = {
      {"id with a slash", [](auto* r) { r->set_rollout_id("../etc"); },
       grpc::INVALID_ARGUMENT, "rollout_id", "rollout_id", "../etc"},
      {"empty id", [](auto* r) { r->set_rollout_id(""); },
       grpc::INVALID_ARGUMENT, "rollout_id is empty", "rollout_id", ""},
      {"huge id", [](auto* r) { r->set_rollout_id(std::string(5000, 'a')); },
       grpc::INVALID_ARGUMENT, "at most 128", "rollout_id", "*"},
      {"no policy", [](auto* r) { r->clear_policy_text(); },
       grpc::INVALID_ARGUMENT, "no policy", "policy", ""},
      {"no sandbox", [](auto* r) { r->clear_sandbox(); },
       grpc::INVALID_ARGUMENT, "sandbox", "sandbox", ""},
      {"policy that does not parse",
       [](auto* r) { r->set_policy_text("phase { nme: \"x\" }"); },
       grpc::INVALID_ARGUMENT, "nme", "*", "*"},
      {"unknown initial phase", [](auto* r) { r->set_initial_phase("deploy"); },
       grpc::INVALID_ARGUMENT, "deploy", "initial_phase", "deploy"},
      {"model URL that does not parse",
       [](auto* r) { r->mutable_endpoints()->set_model(0, "ftp://x:1"); },
       grpc::INVALID_ARGUMENT, "ftp", "model", "ftp://x:1", "setup"},
      {"huge request",
       [](auto* r) {
         r->set_policy_text(std::string(2 << 20, ' ') + "name: \"x\"");
       },
       grpc::INVALID_ARGUMENT, "bytes", "request", ""},
      {"required tool under model_only",
       [](auto* r) {
         v1::ToolGrant* t = r->mutable_endpoints()->add_tool();
         t->set_url("http://127.0.0.5:9000");
         t->set_required(true);
         t->set_name("grader");
       },
       grpc::FAILED_PRECONDITION, "127.0.0.5", "tool", "http://127.0.0.5:9000",
       "setup"},
      {"restricted phase without a model",
       [](auto* r) { r->mutable_endpoints()->clear_model(); },
       grpc::FAILED_PRECONDITION, "model", "network_access", "model_only",
       "setup"},
      {"borrowed sandbox with a restricted mode",
       [](auto* r) { r->set_borrowed(true); }, grpc::FAILED_PRECONDITION,
       "inherit", "network_access", "model_only", "setup"},
      {"sandbox path that is not a cgroup",
       [](auto* r) { r->mutable_sandbox()->set_cgroup_path("/tmp"); },
       grpc::INVALID_ARGUMENT, "not a cgroup v2 directory",
       "sandbox.cgroup_path", "/tmp"},
      {"sandbox path that is relative",
       [](auto* r) { r->mutable_sandbox()->set_cgroup_path("sandfence/x"); },
       grpc::INVALID_ARGUMENT, "absolute", "sandbox.cgroup_path",
       "sandfence/x"},
      {"policy file without a policy dir",
       [](auto* r) { r->set_policy_file("gym.textproto"); },
       grpc::FAILED_PRECONDITION, "policy-dir", "policy_file", "gym.textproto"},
      {"netns_path without own_netns",
       [](auto* r) { r->set_netns_path("/proc/self/ns/net"); },
       grpc::INVALID_ARGUMENT, "own_netns", "netns_path", "/proc/self/ns/net"},
      {"DNS that does not answer",
       [](auto* r) {
         r->mutable_endpoints()->set_model(0, "http://model.test:8000");
       },
       grpc::UNAVAILABLE, "model.test", "model", "http://model.test:8000",
       "setup"},
  };
  for (const Case& c : cases) {
    v1::StartRolloutRequest req = Request("refused-1");
    c.mutate(&req);
    // The dry run first: it must refuse exactly as the start does.
    v1::CheckRolloutResponse checked;
    grpc::Status dry = daemon_->Check(req, &checked);
    v1::StartRolloutResponse resp;
    grpc::Status s = Start(req, &resp);
    for (const grpc::Status* got : {&dry, &s}) {
      const char* which = got == &dry ? "CheckRollout" : "StartRollout";
      EXPECT_EQ(got->error_code(), c.code)
          << c.name << " (" << which << "): got " << got->error_code() << " "
          << got->error_message();
      EXPECT_THAT(got->error_message(), HasSubstr(c.says)) << c.name;
      EXPECT_LT(got->error_message().size(), 2000u) << c.name;
      std::optional<v1::Refusal> refusal = RefusalOfGrpc(*got);
      ASSERT_TRUE(refusal.has_value())
          << c.name << " (" << which << "): no Refusal in the status details";
      const v1::Refusal::Cause cause =
          c.code == grpc::INVALID_ARGUMENT      ? v1::Refusal::MALFORMED
          : c.code == grpc::FAILED_PRECONDITION ? v1::Refusal::REJECTED
                                                : v1::Refusal::UNAVAILABLE;
      EXPECT_EQ(refusal->cause(), cause) << c.name;
      EXPECT_EQ(refusal->retryable(), c.code == grpc::UNAVAILABLE) << c.name;
      if (std::string(c.field) != "*") {
        EXPECT_EQ(refusal->field(), c.field) << c.name << " (" << which << ")";
      }
      if (std::string(c.value) != "*") {
        EXPECT_EQ(refusal->value(), c.value) << c.name << " (" << which << ")";
      }
      EXPECT_EQ(refusal->phase(), c.phase) << c.name << " (" << which << ")";
      EXPECT_FALSE(refusal->reason().empty()) << c.name;
      // The reason is the message's own tail, not a second wording.
      EXPECT_THAT(got->error_message(), HasSubstr(refusal->reason())) << c.name;
    }
    struct stat st {};
    EXPECT_NE(stat((daemon_->dirs().cgroups + "/refused-1").c_str(), &st), 0)
        << c.name << ": a sandbox was created";
    EXPECT_NE(
        stat((daemon_->dirs().records() + "/refused-1.record").c_str(), &st), 0)
        << c.name << ": a record was left";
    EXPECT_EQ(List().rollout_size(), 0) << c.name;
  }
  // The same id works once the request is right.
  v1::StartRolloutResponse ok;
  ASSERT_TRUE(Start(Request("refused-1"), &ok).ok());
  v1::EndRolloutResponse ended;
  EXPECT_TRUE(End("refused-1", &ended).ok());
}

// The dry run compiles what the start would and creates, reserves and
// records nothing: a checked request then starts, with the same policy.
TEST_F(DaemonTest, CheckRolloutCompilesWhatStartWouldAndLeavesNothing) {
  v1::StartRolloutRequest req = Request("checked-1");
  v1::ToolGrant* optional = req.mutable_endpoints()->add_tool();
  optional->set_url("http://0.0.0.0:9000/");  // never reachable: dropped
  v1::CheckRolloutResponse checked;
  grpc::Status s = daemon_->Check(req, &checked);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(checked.policy_name(), "gym");
  EXPECT_EQ(checked.phase(), "setup");
  ASSERT_EQ(checked.phase_policy_size(), 3);
  EXPECT_FALSE(checked.guard().empty());
  bool dropped = false;
  for (const v1::PhasePolicy& p : checked.phase_policy()) {
    for (const v1::DroppedGrant& d : p.dropped()) {
      dropped |= d.url() == "http://0.0.0.0:9000/";
    }
  }
  EXPECT_TRUE(dropped) << checked.DebugString();
  struct stat st {};
  EXPECT_NE(stat((daemon_->dirs().cgroups + "/checked-1").c_str(), &st), 0)
      << "the dry run created a sandbox";
  EXPECT_NE(
      stat((daemon_->dirs().records() + "/checked-1.record").c_str(), &st), 0);
  EXPECT_EQ(List().rollout_size(), 0);

  // The dry run of an existing cgroup does not reserve it: a start of
  // another rollout on it owns it (not borrowed).
  const std::string cg = daemon_->dirs().cgroups + "/checked-existing";
  ASSERT_EQ(mkdir(cg.c_str(), 0755), 0) << strerror(errno);
  v1::StartRolloutRequest on_existing = Request("checked-2");
  on_existing.mutable_sandbox()->set_cgroup_path(cg);
  v1::CheckRolloutResponse checked_existing;
  ASSERT_TRUE(daemon_->Check(on_existing, &checked_existing).ok());
  v1::StartRolloutRequest other = Request("checked-3");
  other.mutable_sandbox()->set_cgroup_path(cg);
  v1::StartRolloutResponse started;
  s = Start(other, &started);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(started.borrowed_from().empty());

  // What the start compiled is what the dry run said.
  v1::StartRolloutResponse first;
  ASSERT_TRUE(Start(req, &first).ok());
  EXPECT_EQ(first.policy_hash(), checked.policy_hash());
  ASSERT_EQ(first.phase_policy_size(), checked.phase_policy_size());
  v1::CheckRolloutResponse again;
  ASSERT_TRUE(daemon_->Check(req, &again).ok());
  for (int i = 0; i < first.phase_policy_size(); ++i) {
    EXPECT_EQ(first.phase_policy(i).SerializeAsString(),
              again.phase_policy(i).SerializeAsString())
        << first.phase_policy(i).name();
  }
  v1::EndRolloutResponse ended;
  EXPECT_TRUE(End("checked-1", &ended).ok());
  EXPECT_TRUE(End("checked-3", &ended).ok());
  rmdir(cg.c_str());
}

TEST_F(DaemonTest, MalformedCallsOnOpenRolloutsChangeNothing) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(Start(Request("m-1"), &started).ok());
  struct Case {
    const char* name;
    std::string id, phase;
    grpc::StatusCode code;
  };
  const Case cases[] = {
      {"unknown phase", "m-1", "deploy", grpc::INVALID_ARGUMENT},
      {"empty phase", "m-1", "", grpc::INVALID_ARGUMENT},
      {"huge phase", "m-1", std::string(100000, 'p'), grpc::INVALID_ARGUMENT},
      {"bad id", "m 1", "agent", grpc::INVALID_ARGUMENT},
      {"unknown rollout", "m-2", "agent", grpc::NOT_FOUND},
  };
  for (const Case& c : cases) {
    grpc::Status s = SetPhase(c.id, c.phase);
    EXPECT_EQ(s.error_code(), c.code) << c.name << ": " << s.error_message();
    EXPECT_LT(s.error_message().size(), 2000u) << c.name;
  }
  ASSERT_EQ(List().rollout_size(), 1);
  EXPECT_EQ(List().rollout(0).phase(), "setup");
  EXPECT_EQ(
      ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.3", tool_.port),
      kDenied);
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("m-1", &ended).ok());
  EXPECT_EQ(ended.record().timeline_size(), 1);
  // A retried EndRollout gets the same record; an unknown one is not found.
  v1::EndRolloutResponse again;
  ASSERT_TRUE(End("m-1", &again).ok());
  EXPECT_EQ(again.record().SerializeAsString(),
            ended.record().SerializeAsString());
  EXPECT_EQ(End("m-2", &again).error_code(), grpc::NOT_FOUND);
}

TEST_F(DaemonTest, StartIsIdempotentForTheSameRequest) {
  v1::StartRolloutResponse first, again;
  ASSERT_TRUE(Start(Request("idem-1"), &first).ok());
  ASSERT_TRUE(Start(Request("idem-1"), &again).ok());
  EXPECT_EQ(first.SerializeAsString(), again.SerializeAsString());
  EXPECT_EQ(List().rollout_size(), 1);

  v1::StartRolloutRequest other = Request("idem-1");
  other.set_initial_phase("agent");
  v1::StartRolloutResponse resp;
  EXPECT_EQ(Start(other, &resp).error_code(), grpc::ALREADY_EXISTS);
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("idem-1", &ended).ok());
  // Ended ids are not reused: their record is there.
  EXPECT_EQ(Start(Request("idem-1"), &resp).error_code(), grpc::ALREADY_EXISTS);
}

// A second daemon on `socket`, with the state and records directories
// given: its exit status and what it said.
struct SecondDaemon {
  int status = -1;
  std::string err;
};
SecondDaemon StartSecondDaemon(const DaemonDirs& d, const std::string& state,
                               const std::string& records,
                               const std::string& log) {
  const std::string cmd = absl::StrCat(
      SandfenceBinary(), " daemon --socket ", d.socket(), " --records-dir ",
      records, " --state-dir ", state, " --pin-dir ", d.pin_dir,
      " --cgroup-parent ", d.cgroups, " 2>", log);
  const int status = system(cmd.c_str());
  SecondDaemon out;
  if (WIFEXITED(status)) out.status = WEXITSTATUS(status);
  std::ifstream in(log);
  out.err.assign(std::istreambuf_iterator<char>(in),
                 std::istreambuf_iterator<char>());
  return out;
}

// The first daemon's socket is the one it bound, and a new connection
// reaches it.
void ExpectTheFirstStillServes(const DaemonDirs& d, ino_t socket_inode) {
  struct stat after {};
  ASSERT_EQ(stat(d.socket().c_str(), &after), 0) << "the socket was removed";
  EXPECT_EQ(after.st_ino, socket_inode) << "the socket was replaced";
  auto channel = grpc::CreateChannel(absl::StrCat("unix:", d.socket()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Sandfence::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::HealthResponse h;
  EXPECT_TRUE(stub->Health(&ctx, {}, &h).ok());
}

// A second daemon on the same state fails before it touches anything of
// the first's: the running daemon's socket stays and still serves (it once
// unlinked the socket before taking the lock).
TEST_F(DaemonTest, ASecondDaemonLeavesTheFirstOneServing) {
  const DaemonDirs& d = daemon_->dirs();
  struct stat before {};
  ASSERT_EQ(stat(d.socket().c_str(), &before), 0);
  const SecondDaemon second =
      StartSecondDaemon(d, d.state(), d.records(), d.root + "/second.log");
  EXPECT_EQ(second.status, 75) << "refused, retryable";
  EXPECT_THAT(second.err, HasSubstr("another sandfence daemon"));
  ExpectTheFirstStillServes(d, before.st_ino);
}

// The same with a state directory (and records) of its own (issue 36): the
// socket's lock refuses it, naming the daemon that serves; the socket is
// neither replaced nor removed when the second one exits.
TEST_F(DaemonTest, ASecondDaemonOnAnotherStateDirLeavesTheSocketAlone) {
  const DaemonDirs& d = daemon_->dirs();
  struct stat before {};
  ASSERT_EQ(stat(d.socket().c_str(), &before), 0);
  const SecondDaemon second =
      StartSecondDaemon(d, d.root + "/state-2", d.root + "/records-2",
                        d.root + "/second-other.log");
  EXPECT_EQ(second.status, 75) << "refused, retryable";
  EXPECT_THAT(second.err,
              HasSubstr(absl::StrCat("another sandfence daemon (pid ",
                                     daemon_->pid(), ") serves ", d.socket())));
  EXPECT_NE(access((d.root + "/state-2").c_str(), F_OK), 0)
      << "the second daemon made its state before it was refused";
  ExpectTheFirstStillServes(d, before.st_ino);
}

// A second rollout may use an open rollout's sandbox only as borrowed, with
// inherit; the owner's enforcement is untouched either way.
TEST_F(DaemonTest, BorrowedSandboxOnlyWithInherit) {
  v1::StartRolloutResponse owner;
  ASSERT_TRUE(Start(Request("owner-1"), &owner).ok());

  v1::StartRolloutRequest borrow;
  borrow.set_rollout_id("borrower-1");
  borrow.mutable_sandbox()->set_cgroup_path(owner.cgroup_path());
  borrow.set_network_access(v1::INHERIT);
  v1::StartRolloutResponse resp;
  grpc::Status s = Start(borrow, &resp);
  EXPECT_EQ(s.error_code(), grpc::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("owner-1"));

  borrow.set_borrowed(true);
  borrow.set_network_access(v1::MODEL_ONLY);
  borrow.mutable_endpoints()->add_model(
      absl::StrCat("http://127.0.0.2:", model_.port));
  EXPECT_EQ(Start(borrow, &resp).error_code(), grpc::FAILED_PRECONDITION);

  borrow.set_network_access(v1::INHERIT);
  s = Start(borrow, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.borrowed_from(), "owner-1");
  EXPECT_EQ(
      ProbeIn(owner.cgroup_path(), "tcp-connect", "127.0.0.4", forbidden_.port),
      kDenied);
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("borrower-1", &ended).ok());
  EXPECT_FALSE(ended.record().lossy())
      << absl::StrJoin(WarningTexts(ended.record()), "\n");
  // Still enforced for the owner after the borrower left.
  EXPECT_EQ(
      ProbeIn(owner.cgroup_path(), "tcp-connect", "127.0.0.4", forbidden_.port),
      kDenied);
  ASSERT_TRUE(End("owner-1", &ended).ok());
}

// Fifty rollouts at once, each switching phases and making its own
// attempts: every record holds exactly its own.
TEST_F(DaemonTest, FiftyConcurrentRolloutsDoNotCrossTalk) {
  constexpr int kRollouts = 50;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kRollouts);
  std::vector<v1::RolloutRecord> records(kRollouts);
  for (int i = 0; i < kRollouts; ++i) {
    threads.emplace_back([&, i] {
      const std::string id = absl::StrCat("many-", i);
      v1::StartRolloutResponse started;
      grpc::Status s = Start(Request(id), &started);
      if (!s.ok()) {
        errors[i] = "start: " + s.error_message();
        return;
      }
      // Denied ports unique to this rollout: nothing is sent (EPERM first).
      const uint16_t mine = static_cast<uint16_t>(21000 + i);
      const char* phases[] = {"agent", "verify", "agent", "setup"};
      for (const char* phase : phases) {
        if (!SetPhase(id, phase).ok()) errors[i] += " switch failed";
        if (ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.4", mine) !=
            kDenied) {
          errors[i] += absl::StrCat(" not denied in ", phase);
        }
      }
      v1::EndRolloutResponse ended;
      s = End(id, &ended);
      if (!s.ok()) errors[i] += " end: " + s.error_message();
      records[i] = ended.record();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kRollouts; ++i) {
    SCOPED_TRACE(absl::StrCat("rollout many-", i));
    EXPECT_EQ(errors[i], "");
    const std::string mine = absl::StrCat("127.0.0.4:", 21000 + i);
    EXPECT_EQ(
        Attempts(records[i]),
        (std::multiset<std::string>{
            "agent tcp " + mine + " deny", "verify tcp " + mine + " deny",
            "agent tcp " + mine + " deny", "setup tcp " + mine + " deny"}));
    EXPECT_EQ(records[i].timeline_size(), 5);
    EXPECT_FALSE(records[i].lossy())
        << absl::StrJoin(WarningTexts(records[i]), "\n");
  }
  EXPECT_EQ(List().rollout_size(), 0);
}

// SIGKILL the daemon mid-rollout: the sandbox stays enforced while no
// daemon runs; a new daemon adopts the rollout, its record continues, and
// the gap is marked.
TEST_F(DaemonTest, SigkillKeepsEnforcingAndRestartAdopts) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(Start(Request("crash-1"), &started).ok());
  ASSERT_TRUE(SetPhase("crash-1", "agent").ok());
  const std::string cg = started.cgroup_path();
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.4", 22001), kDenied);

  daemon_->Stop(SIGKILL);
  // No daemon: still enforced, phase unchanged.
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.4", 22002), kDenied)
      << "a forbidden connect got through while the daemon was down";
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.3", tool_.port), 0);
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.2", model_.port), 0);

  daemon_->Start();
  v1::ListRolloutsResponse list = List();
  ASSERT_EQ(list.rollout_size(), 1) << daemon_->Log();
  EXPECT_TRUE(list.rollout(0).adopted());
  EXPECT_EQ(list.rollout(0).phase(), "agent");
  EXPECT_EQ(list.rollout(0).cgroup_path(), cg);

  // The adopted rollout is fully served: switch and enforce.
  ASSERT_TRUE(SetPhase("crash-1", "verify").ok());
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.3", tool_.port), kDenied);
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.4", 22003), kDenied);
  // The guard (pinned) still governs the adopted sandbox.
  {
    CaplessRootProcess target;
    ASSERT_GT(target.pid(), 0);
    EXPECT_NE(ReadEnvironIn(cg, target.pid()), 0)
        << "an adopted sandbox read another process's environ";
  }

  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("crash-1", &ended).ok());
  const v1::RolloutRecord& rec = ended.record();
  EXPECT_EQ(ended.journal_path_size(), 2);
  EXPECT_TRUE(rec.lossy());
  EXPECT_TRUE(rec.complete());
  bool gap = false;
  for (const v1::RecordWarning& w : rec.warning()) {
    gap |= w.kind() == v1::WARNING_HANDOVER &&
           absl::StrContains(w.text(), "process guard");
  }
  EXPECT_TRUE(gap) << absl::StrJoin(WarningTexts(rec), "\n");
  std::multiset<std::string> attempts = Attempts(rec);
  // What the kernel reported while no daemon ran waited in the pinned ring
  // buffer and was read after adoption.
  EXPECT_EQ(attempts.count("agent tcp 127.0.0.4:22002 deny"), 1u)
      << ::testing::PrintToString(attempts);
  EXPECT_EQ(attempts.count("verify tcp 127.0.0.4:22003 deny"), 1u);
  // The kernel's counts span the whole rollout.
  EXPECT_GE(rec.loss().kernel_denied(), 4u);
  struct stat st {};
  EXPECT_NE(stat(cg.c_str(), &st), 0) << cg << " still exists";
}

// A clean stop (SIGTERM) also leaves rollouts enforced for the next daemon.
TEST_F(DaemonTest, SigtermLeavesRolloutsForTheNextDaemon) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(Start(Request("term-1"), &started).ok());
  daemon_->Stop(SIGTERM);
  EXPECT_EQ(ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.4",
                    forbidden_.port),
            kDenied);
  daemon_->Start();
  ASSERT_EQ(List().rollout_size(), 1);
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("term-1", &ended).ok());
}

// A daemon rollout with the default guard (auto): a command in the sandbox
// that reads another root process's environ is stopped (signal: killed;
// lsm: the open fails), and the record names the enforcer and the event.
TEST_F(DaemonTest, ProcessGuardStopsReadingEnvironOutsideTheSandbox) {
  CaplessRootProcess target;
  ASSERT_GT(target.pid(), 0);
  v1::StartRolloutResponse started;
  grpc::Status s = Start(Request("guard-1"), &started);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon_->Log();

  // The guard is loaded now: Health names what runs.
  grpc::ClientContext ctx;
  v1::HealthResponse h;
  ASSERT_TRUE(daemon_->stub()->Health(&ctx, {}, &h).ok());
  const bool lsm = absl::StartsWith(h.guard(), "lsm");
  const std::string enforcer = lsm ? "lsm" : "signal";
  ASSERT_TRUE(lsm || absl::StartsWith(h.guard(), "signal")) << h.guard();
  EXPECT_THAT(h.guard(), ::testing::Not(HasSubstr("first guarded rollout")));

  // signal: cat dies by SIGKILL; lsm: the open fails (cat exits 1).
  EXPECT_EQ(ReadEnvironIn(started.cgroup_path(), target.pid()),
            lsm ? 1 : 128 + SIGKILL)
      << "reading /proc/" << target.pid() << "/environ under " << enforcer;

  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("guard-1", &ended).ok());
  const v1::RolloutRecord& rec = ended.record();
  // The enforcer first; then, where it is not lsm, why not.
  EXPECT_TRUE(absl::StartsWith(rec.enforcement().guard(), enforcer))
      << rec.enforcement().guard();
  std::vector<std::string> events;
  bool stopped = false;
  for (const v1::GuardEntry& g : rec.guard_event()) {
    events.push_back(absl::StrCat(g.action(), " ", g.what(), " ", g.detail(),
                                  " ", g.actor().command(), " -> ",
                                  g.target().tgid()));
    stopped |= g.what() == "proc_open" && g.detail() == "environ" &&
               g.action() == (lsm ? "denied" : "killed") &&
               g.target().tgid() == static_cast<uint32_t>(target.pid()) &&
               g.phase() == "setup";
  }
  EXPECT_TRUE(stopped) << "guard events:\n" << absl::StrJoin(events, "\n");
}

// lsm asked where lsm cannot run is refused before anything exists; a
// rollout's guard mode is its initial phase's, and its record says when a
// later phase asks for another.
TEST_F(DaemonTest, GuardModeIsFixedByTheInitialPhase) {
  grpc::ClientContext hctx;
  v1::HealthResponse h;
  ASSERT_TRUE(daemon_->stub()->Health(&hctx, {}, &h).ok());
  if (!absl::StartsWith(h.guard(), "lsm")) {
    v1::StartRolloutRequest lsm = Request("guard-lsm");
    lsm.set_policy_text(R"pb(
      name: "lsm"
      phase {
        name: "p"
        network_access: MODEL_ONLY
        dns { mode: NONE }
        guard { mode: LSM }
      }
    )pb");
    v1::StartRolloutResponse resp;
    grpc::Status s = Start(lsm, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("lsm"));
    struct stat st {};
    EXPECT_NE(stat((daemon_->dirs().cgroups + "/guard-lsm").c_str(), &st), 0);
    EXPECT_NE(
        stat((daemon_->dirs().records() + "/guard-lsm.record").c_str(), &st),
        0);
    EXPECT_EQ(List().rollout_size(), 0);
  }

  v1::StartRolloutRequest mixed = Request("guard-mixed");
  mixed.set_policy_text(R"pb(
    name: "mixed"
    phase {
      name: "agent"
      network_access: MODEL_ONLY
      dns { mode: NONE }
    }
    phase {
      name: "verify"
      network_access: MODEL_ONLY
      dns { mode: NONE }
      guard { mode: OFF }
    }
  )pb");
  v1::StartRolloutResponse started;
  grpc::Status s = Start(mixed, &started);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(SetPhase("guard-mixed", "verify").ok());
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("guard-mixed", &ended).ok());
  const std::string& guard = ended.record().enforcement().guard();
  EXPECT_TRUE(absl::StartsWith(guard, "lsm") ||
              absl::StartsWith(guard, "signal"))
      << guard;
  EXPECT_THAT(guard, HasSubstr("fixed at the rollout's start"));
  EXPECT_THAT(guard, HasSubstr("phase \"verify\" asks for off"));
}

TEST_F(DaemonTest, WatchEventsStreamsTheRolloutsDecisions) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(Start(Request("watch-1"), &started).ok());
  grpc::ClientContext ctx;
  v1::WatchEventsRequest req;
  req.set_rollout_id("watch-1");
  std::unique_ptr<grpc::ClientReader<v1::RolloutEvent>> reader =
      daemon_->stub()->WatchEvents(&ctx, req);
  std::vector<v1::RolloutEvent> events;
  std::atomic<int> count{0};
  std::thread read([&] {
    v1::RolloutEvent e;
    while (reader->Read(&e)) {
      events.push_back(e);
      ++count;
    }
  });
  // The watch starts when the call reaches the daemon, which the client
  // does not see: attempt until the first event comes through.
  for (int i = 0; i < 200 && count == 0; ++i) {
    EXPECT_EQ(ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.4", 23000),
              kDenied);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("watch-1", &ended).ok());
  read.join();  // the stream ends with the rollout
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().rollout_id(), "watch-1");
  EXPECT_EQ(events.back().verdict(), v1::VERDICT_DENY);
  EXPECT_EQ(events.back().address(), "127.0.0.4");
  EXPECT_EQ(events.back().port(), 23000u);
}

TEST_F(DaemonTest, WatchOfUnknownRolloutIsNotFound) {
  grpc::ClientContext ctx;
  v1::WatchEventsRequest req;
  req.set_rollout_id("nobody");
  auto reader = daemon_->stub()->WatchEvents(&ctx, req);
  v1::RolloutEvent e;
  EXPECT_FALSE(reader->Read(&e));
  EXPECT_EQ(reader->Finish().error_code(), grpc::NOT_FOUND);
}

}  // namespace
}  // namespace sandfence::testing

namespace sandfence::testing {
namespace {

struct CommandResult {
  int exit_code = -1;
  std::string out;
};

CommandResult RunCli(const std::string& args) {
  CommandResult r;
  std::string cmd = absl::StrCat(SandfenceBinary(), " ", args, " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `sandfence health`, `rollouts`, `phase` and `records get` against the
// daemon.
TEST_F(DaemonTest, CliTalksToTheDaemon) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(Start(Request("cli-1"), &started).ok());
  const std::string sock = absl::StrCat("--socket ", daemon_->dirs().socket());

  // What the DaemonSet's probes run (packaging/k8s).
  CommandResult health = RunCli("health " + sock);
  EXPECT_EQ(health.exit_code, 0) << health.out;
  EXPECT_THAT(health.out, HasSubstr("1 open rollouts"));
  EXPECT_THAT(health.out, HasSubstr("egress cgroup-bpf"));

  CommandResult list = RunCli("rollouts " + sock);
  EXPECT_EQ(list.exit_code, 0) << list.out;
  EXPECT_THAT(list.out, HasSubstr("cli-1"));
  EXPECT_THAT(list.out, HasSubstr("setup"));

  CommandResult phase = RunCli("phase cli-1 agent " + sock);
  EXPECT_EQ(phase.exit_code, 0) << phase.out;
  EXPECT_THAT(phase.out, HasSubstr("setup -> agent"));
  EXPECT_EQ(
      ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.3", tool_.port),
      0);

  // Refusals keep their class in the exit code (sysexits).
  CommandResult unknown = RunCli("phase cli-1 deploy " + sock);
  EXPECT_EQ(unknown.exit_code, 65) << unknown.out;
  EXPECT_THAT(unknown.out, HasSubstr("deploy"));
  CommandResult missing = RunCli("phase nobody agent " + sock);
  EXPECT_NE(missing.exit_code, 0);

  EXPECT_EQ(ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.4", 24000),
            kDenied);
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("cli-1", &ended).ok());
  CommandResult rec = RunCli("records get cli-1 --json " + sock);
  EXPECT_EQ(rec.exit_code, 0) << rec.out;
  EXPECT_THAT(rec.out, HasSubstr("\"cli-1\""));
  EXPECT_THAT(rec.out, HasSubstr("24000"));

  CommandResult none = RunCli("rollouts --socket /nonexistent/sandfence.sock");
  EXPECT_EQ(none.exit_code, 75) << none.out;  // transient: no daemon
  CommandResult down = RunCli("health --socket /nonexistent/sandfence.sock");
  EXPECT_EQ(down.exit_code, 75) << down.out;
}

}  // namespace
}  // namespace sandfence::testing

namespace sandfence::testing {
namespace {

// The Python client example, as the README shows it, against the daemon.
TEST_F(DaemonTest, PythonExampleRunsAgainstTheDaemon) {
  if (RunCli("--help").exit_code < 0 ||
      system("/usr/bin/python3 -c 'import grpc, google.protobuf' "
             ">/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs /usr/bin/python3 with python3-grpcio";
  }
  const std::string example =
      std::string(SANDFENCE_SOURCE) + "/examples/python";
  const std::string gen = daemon_->dirs().root + "/pygen";
  ASSERT_EQ(
      system(absl::StrCat(example, "/generate.sh ", gen, " >/dev/null 2>&1")
                 .c_str()),
      0)
      << "generate.sh failed";
  CommandResult r;
  {
    std::string cmd =
        absl::StrCat("SANDFENCE_PY_GEN=", gen, " /usr/bin/python3 ", example,
                     "/rollout_example.py --socket ", daemon_->dirs().socket(),
                     " --rollout py-1 --model http://127.0.0.2:", model_.port,
                     " --tool http://127.0.0.3:", tool_.port, " -- ",
                     NetProbe(), " tcp-connect 127.0.0.4 25000 2>&1");
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
    int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("phase setup"));
  EXPECT_THAT(r.out, HasSubstr("command exited with 1"));  // EPERM
  EXPECT_THAT(r.out, HasSubstr("\"port\": 25000"));
  EXPECT_THAT(r.out, HasSubstr("VERDICT_DENY"));
  EXPECT_THAT(r.out, HasSubstr("\"verify\""));
}

}  // namespace
}  // namespace sandfence::testing

namespace sandfence::testing {
namespace {

// The kernel picks the metrics port; the daemon's log names it.
class DaemonMetricsTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    port_ = daemon_->MetricsPort();
    ASSERT_NE(port_, 0);
  }
  std::vector<std::string> Extra() override { return {"--metrics-port", "0"}; }
  uint16_t port_ = 0;
};

TEST_F(DaemonMetricsTest, PrometheusEndpointCountsRolloutsAndDecisions) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(Start(Request("metrics-1"), &started).ok());
  ASSERT_TRUE(SetPhase("metrics-1", "agent").ok());
  EXPECT_EQ(ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.4", 26000),
            kDenied);
  v1::StartRolloutResponse refused;
  v1::StartRolloutRequest bad = Request("metrics-2");
  bad.set_initial_phase("nope");
  EXPECT_FALSE(Start(bad, &refused).ok());
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("metrics-1", &ended).ok());  // drains: the deny is counted

  const std::string m = HttpGetMetrics(port_);
  EXPECT_THAT(m, HasSubstr("HTTP/1.0 200 OK"));
  EXPECT_THAT(m, HasSubstr("\nsandfence_rollouts_open 0\n"));
  EXPECT_THAT(m, HasSubstr("\nsandfence_rollouts_started_total 1\n"));
  EXPECT_THAT(m, HasSubstr("\nsandfence_rollouts_ended_total 1\n"));
  EXPECT_THAT(m, HasSubstr("\nsandfence_refusals_total 1\n"));
  EXPECT_THAT(m, HasSubstr("\nsandfence_phase_switches_total 1\n"));
  EXPECT_THAT(m,
              HasSubstr("\nsandfence_decisions_total{verdict=\"deny\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("\nsandfence_events_lost_total 0\n"));
  EXPECT_THAT(m, HasSubstr("\nsandfence_build_info{version=\""));
  // The call pool's: the daemon's own, by the capacity it was built with.
  EXPECT_THAT(m,
              HasSubstr(absl::StrCat(
                  "\nsandfence_calls_capacity ",
                  CallPool::kDefaultWorkers + CallPool::kDefaultQueue, "\n")));
  EXPECT_THAT(m, HasSubstr("\nsandfence_calls_refused_busy_total 0\n"));
  // Labelled by rollout only with --metrics-per-rollout (issue 38).
  EXPECT_THAT(m, ::testing::Not(HasSubstr("rollout=")));
}

// `--metrics-address ::1`: served on IPv6 loopback, and only there; the
// log brackets the address.
class DaemonIpv6MetricsTest : public DaemonTest {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    UniqueFd probe(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    if (!probe ||
        bind(probe.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      GTEST_SKIP() << "no IPv6 loopback here: " << strerror(errno);
    }
    DaemonTest::SetUp();
  }
  std::vector<std::string> Extra() override {
    return {"--metrics-address", "::1", "--metrics-port", "0"};
  }
};

TEST_F(DaemonIpv6MetricsTest, ServesOnTheAddressGiven) {
  const uint16_t port = daemon_->MetricsPort("metrics on http://[::1]:");
  ASSERT_NE(port, 0);
  v1::StartRolloutResponse started;
  ASSERT_TRUE(Start(Request("metrics-v6"), &started).ok());
  const std::string m = HttpGetMetrics(port, "::1");
  EXPECT_THAT(m, HasSubstr("HTTP/1.0 200 OK"));
  EXPECT_THAT(m, HasSubstr("\nsandfence_rollouts_open 1\n"));
  EXPECT_THAT(m, HasSubstr("\nsandfence_build_info{version=\""));
  EXPECT_THAT(HttpGetMetrics(port, "127.0.0.1"), HasSubstr("connect: "))
      << "served on IPv4 loopback too";
}

TEST(DaemonFlagsTest, ABadMetricsAddressIsAUsageError) {
  for (const char* bad : {"localhost", "127.0.0.1:9464", "[::1]", "::1%lo"}) {
    const CommandResult r = RunCli(
        absl::StrCat("daemon --metrics-address '", bad, "' --metrics-port 0"));
    EXPECT_EQ(r.exit_code, 64) << bad << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("--metrics-address \"", bad,
                                              "\": not an IPv4 or IPv6 "
                                              "address")));
  }
  // Without a port nothing is served: the address alone is a mistake.
  const CommandResult alone = RunCli("daemon --metrics-address ::1");
  EXPECT_EQ(alone.exit_code, 64) << alone.out;
  EXPECT_THAT(alone.out, HasSubstr("--metrics-address needs --metrics-port"));
}

// A DNS-filtered rollout (issue 14): the metrics count its queries by
// verdict, the addresses its filter learned, and the filter's latency.
// dnsmasq on loopback is the upstream; a stub resolver in the sandbox asks
// 127.0.0.1:53, which the kernel sends to the rollout's filter.
class DaemonDnsMetricsTest : public DaemonMetricsTest {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    SANDFENCE_REQUIRE_DNSMASQ();
    if (access("/usr/bin/python3", X_OK) != 0) {
      GTEST_SKIP() << "needs /usr/bin/python3 for the stub resolver";
    }
    absl::StatusOr<std::unique_ptr<TestDnsServer>> dns =
        TestDnsServer::Start({{"a.metrics.test", {"127.0.0.8"}}});
    ASSERT_TRUE(dns.ok()) << dns.status();
    dns_ = *std::move(dns);
    DaemonMetricsTest::SetUp();
  }

  v1::StartRolloutRequest DnsRequest(const std::string& id) {
    v1::StartRolloutRequest req = Request(id);
    req.set_policy_text(
        absl::StrCat("name: \"dnsm\"\n"
                     "phase { name: \"agent\" network_access: MODEL_ONLY\n"
                     "  allow { host: \"*.metrics.test\" port: 443 }\n"
                     "  dns { mode: FILTERED resolver: \"",
                     dns_->address().ToString(),
                     "\" answers_may_point_at: \"127.0.0.0/8\" } }\n"));
    return req;
  }

  // The stub resolver's exit status (0: an answer came back).
  int QueryIn(const std::string& cgroup_path, const std::string& name) {
    absl::StatusOr<Cgroup> cg = Cgroup::Open(cgroup_path);
    if (!cg.ok()) {
      ADD_FAILURE() << cg.status();
      return -1;
    }
    SpawnOptions spawn;
    spawn.cgroup_fd = cg->fd();
    spawn.argv = {"/usr/bin/python3",
                  absl::StrCat(SANDFENCE_SOURCE, "/tests/run/dns_query.py"),
                  "127.0.0.1", "53", name};
    absl::StatusOr<pid_t> child = SpawnInCgroup(spawn);
    if (!child.ok()) {
      ADD_FAILURE() << child.status();
      return -1;
    }
    absl::StatusOr<int> status = WaitForExit(*child);
    return status.ok() ? *status : -1;
  }

  std::unique_ptr<TestDnsServer> dns_;
};

// By default (issue 38) the DNS series are sums over every rollout, with
// no rollout label, and an end does not lower them: they are counters.
TEST_F(DaemonDnsMetricsTest, SumsQueriesOverRolloutsEndedOnesIncluded) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(Start(DnsRequest("dns-s"), &started).ok());
  EXPECT_EQ(QueryIn(started.cgroup_path(), "a.metrics.test"), 0) << dns_->log();
  EXPECT_EQ(QueryIn(started.cgroup_path(), "secret.attacker.test"), 0);

  const std::vector<std::string> want = {
      "\nsandfence_dns_queries_total{verdict=\"allowed\"} 1\n",
      "\nsandfence_dns_queries_total{verdict=\"blocked\"} 1\n",
      "\nsandfence_dns_learned_addresses 1\n",
      "\nsandfence_dns_filter_latency_seconds_count 2\n"};
  std::string m;
  for (int i = 0; i < 100; ++i) {
    m = HttpGetMetrics(port_);
    if (std::all_of(want.begin(), want.end(), [&](const std::string& w) {
          return absl::StrContains(m, w);
        })) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (const std::string& w : want) EXPECT_THAT(m, HasSubstr(w));
  EXPECT_THAT(m, ::testing::Not(HasSubstr("rollout=")));

  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("dns-s", &ended).ok());
  m = HttpGetMetrics(port_);
  EXPECT_THAT(m, HasSubstr(want[0]));
  EXPECT_THAT(m, HasSubstr(want[1]));
  EXPECT_THAT(m, HasSubstr(want[3]));
  EXPECT_THAT(m, HasSubstr("\nsandfence_dns_learned_addresses 0\n"))
      << "a gauge of the open rollouts";
}

// `--metrics-per-rollout`: each open rollout's own series, labelled; they
// go when the rollout ends.
class DaemonDnsPerRolloutMetricsTest : public DaemonDnsMetricsTest {
 protected:
  std::vector<std::string> Extra() override {
    return {"--metrics-port", "0", "--metrics-per-rollout"};
  }
};

TEST_F(DaemonDnsPerRolloutMetricsTest,
       CountsQueriesLearnedAddressesAndLatency) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(Start(DnsRequest("dns-m"), &started).ok());
  EXPECT_EQ(QueryIn(started.cgroup_path(), "a.metrics.test"), 0) << dns_->log();
  EXPECT_EQ(QueryIn(started.cgroup_path(), "secret.attacker.test"), 0)
      << "NXDOMAIN is an answer too";

  const std::vector<std::string> want = {
      "\nsandfence_dns_queries_total{rollout=\"dns-m\",verdict=\"allowed\"} "
      "1\n",
      "\nsandfence_dns_queries_total{rollout=\"dns-m\",verdict=\"blocked\"} "
      "1\n",
      "\nsandfence_dns_queries_total{rollout=\"dns-m\",verdict=\"malformed\"}"
      " 0\n",
      "\nsandfence_dns_learned_addresses{rollout=\"dns-m\"} 1\n",
      "\nsandfence_dns_filter_latency_seconds_bucket{rollout=\"dns-m\",le=\"+"
      "Inf\"} 2\n",
      "\nsandfence_dns_filter_latency_seconds_count{rollout=\"dns-m\"} 2\n",
      "\n# TYPE sandfence_dns_filter_latency_seconds histogram\n"};
  // The filter reports a query just after its reply: wait (bounded).
  std::string m;
  for (int i = 0; i < 100; ++i) {
    m = HttpGetMetrics(port_);
    if (std::all_of(want.begin(), want.end(), [&](const std::string& w) {
          return absl::StrContains(m, w);
        })) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (const std::string& w : want) EXPECT_THAT(m, HasSubstr(w));
  // A query the filter served took it under a second here: not a speed
  // check, a check that the buckets are cumulative and end at the count.
  EXPECT_THAT(m, HasSubstr("\nsandfence_dns_filter_latency_seconds_bucket{"
                           "rollout=\"dns-m\",le=\"1\"} 2\n"));

  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("dns-m", &ended).ok());
  EXPECT_THAT(HttpGetMetrics(port_),
              ::testing::Not(HasSubstr("rollout=\"dns-m\"")));
}

// A watcher that does not read loses events past its queue, and is told
// how many in the stream, and the metrics count them: what it got plus what
// it missed is every event the daemon read while it watched (the kernel's
// own losses, if any, are the record's).
class DaemonSlowWatcherTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    port_ = daemon_->MetricsPort();
    ASSERT_NE(port_, 0);
  }
  std::vector<std::string> Extra() override {
    return {"--watch-queue", "16", "--metrics-port", "0"};
  }
  uint16_t port_ = 0;
};

TEST_F(DaemonSlowWatcherTest, IsToldHowManyEventsItMissed) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(Start(Request("slow-1"), &started).ok());
  ASSERT_TRUE(SetPhase("slow-1", "agent").ok());
  grpc::ClientContext ctx;
  v1::WatchEventsRequest req;
  req.set_rollout_id("slow-1");
  std::unique_ptr<grpc::ClientReader<v1::RolloutEvent>> reader =
      daemon_->stub()->WatchEvents(&ctx, req);
  // The watch is open once one event comes through.
  v1::RolloutEvent first;
  bool opened = false;
  std::thread read_first([&] { opened = reader->Read(&first); });
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.4",
                      forbidden_.port),
              kDenied);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (opened) break;
  }
  read_first.join();
  ASSERT_TRUE(opened);
  uint64_t received = 1, missed = first.missed();
  // Far more than the queue and gRPC's flow-control window hold, while
  // nobody reads.
  constexpr int kFlood = 30000;
  {
    absl::StatusOr<Cgroup> cg = Cgroup::Open(started.cgroup_path());
    ASSERT_TRUE(cg.ok()) << cg.status();
    SpawnOptions spawn;
    spawn.cgroup_fd = cg->fd();
    spawn.argv = {
        NetProbe(),    "--repeat",  absl::StrCat(kFlood),         "--want", "1",
        "tcp-connect", "127.0.0.4", absl::StrCat(forbidden_.port)};
    absl::StatusOr<pid_t> child = SpawnInCgroup(spawn);
    ASSERT_TRUE(child.ok()) << child.status();
    absl::StatusOr<int> status = WaitForExit(*child);
    ASSERT_TRUE(status.ok()) << status.status();
    ASSERT_EQ(*status, 0) << "every flood attempt must be denied";
  }
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("slow-1", &ended).ok());
  v1::RolloutEvent e;
  while (reader->Read(&e)) {
    ++received;
    missed += e.missed();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_GT(missed, 0u) << "the watcher was never told it missed events";
  const v1::LossAccounting& loss = ended.record().loss();
  // Every flood event the daemon read was either received or counted as
  // missed (attempts before the watch opened are recorded, not offered).
  EXPECT_GE(received + missed, 1 + kFlood - loss.kernel_events_lost());
  EXPECT_LE(received + missed, loss.events_recorded());
  EXPECT_THAT(HttpGetMetrics(port_),
              HasSubstr(absl::StrCat("\nsandfence_watch_events_missed_total ",
                                     missed, "\n")));
}

// systemd's Type=notify: the daemon says READY=1 on $NOTIFY_SOCKET, and by
// then its socket serves (a client started after `systemctl start` or a
// restart finds it answering).
class DaemonNotifyTest : public DaemonTest {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    notify_path_ = absl::StrCat("/tmp/sandfence-notify-", getpid());
    unlink(notify_path_.c_str());
    notify_.reset(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(notify_);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s",
                  notify_path_.c_str());
    ASSERT_EQ(
        bind(notify_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
        0);
    timeval tv{.tv_sec = 30, .tv_usec = 0};
    setsockopt(notify_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setenv("NOTIFY_SOCKET", notify_path_.c_str(), 1);
    DaemonTest::SetUp();
    unsetenv("NOTIFY_SOCKET");
  }
  void TearDown() override { unlink(notify_path_.c_str()); }

  std::string notify_path_;
  UniqueFd notify_;
};

TEST_F(DaemonNotifyTest, SaysReadyOnceItServes) {
  char buf[256] = {};
  const ssize_t n = recv(notify_.get(), buf, sizeof(buf) - 1, 0);
  ASSERT_GT(n, 0) << "no notification within 30 s: " << strerror(errno);
  EXPECT_EQ(std::string(buf, n), "READY=1");
  // Only one: a second READY would mean a restart of the serving loop.
  const ssize_t again = recv(notify_.get(), buf, sizeof(buf), MSG_DONTWAIT);
  EXPECT_EQ(again, -1);
  grpc::ClientContext ctx;
  v1::HealthResponse h;
  EXPECT_TRUE(daemon_->stub()->Health(&ctx, {}, &h).ok());
}

}  // namespace
}  // namespace sandfence::testing
