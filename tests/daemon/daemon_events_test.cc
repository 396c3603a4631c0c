// The daemon's event stream (issue 38): `daemon --events-out FILE` and
// `sandfence watch [ROLLOUT] --json` carry the same lines, of every kind:
// an allowed and a denied connect, a guard decision (a sandboxed process
// reading another root process's environ), a refused StartRollout, and the
// rollout's phase lines. A watch of one rollout ends by itself after the
// rollout's last line.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/daemon/daemon_fixture.h"
#include "tests/egress/egress_fixture.h"

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

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

Struct Parse(const std::string& line) {
  Struct s;
  const auto status = google::protobuf::util::JsonStringToMessage(line, &s);
  EXPECT_TRUE(status.ok()) << status.ToString() << ": " << line;
  return s;
}

// `sandfence watch ARGS --json` with its stdout in a file.
class Watcher {
 public:
  Watcher(const std::string& socket, const std::string& out,
          std::vector<std::string> args)
      : out_(out) {
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 1);
      std::vector<std::string> argv_s = {SandfenceBinary(), "watch", "--json",
                                         "--socket", socket};
      argv_s.insert(argv_s.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (std::string& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Watcher() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Its exit status once it exited by itself within `ms`; -1 if it did not.
  int WaitExit(int ms) {
    for (int i = 0; i < ms / 20; ++i) {
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      usleep(20000);
    }
    return -1;
  }
  std::string Output() const { return Slurp(out_); }

 private:
  std::string out_;
  pid_t pid_ = -1;
};

class DaemonEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    SANDFENCE_REQUIRE_HOST(HostKernelRunsEgress());
    model_ = Listen("127.0.0.2");
    forbidden_ = Listen("127.0.0.4");
    DaemonDirs dirs = MakeDaemonDirs("events");
    events_ = dirs.root + "/events.jsonl";
    daemon_ = std::make_unique<DaemonProcess>(
        dirs, std::vector<std::string>{"--events-out", events_});
    daemon_->Start();
  }

  v1::StartRolloutRequest Request(const std::string& id) const {
    v1::StartRolloutRequest req;
    req.set_rollout_id(id);
    req.mutable_sandbox()->set_create(true);
    req.set_policy_text(
        "name: \"events\"\n"
        "phase { name: \"agent\" network_access: MODEL_ONLY\n"
        "  dns { mode: NONE } }\n");
    req.mutable_endpoints()->add_model(
        absl::StrCat("http://127.0.0.2:", model_.port, "/v1"));
    return req;
  }

  // The file's lines of `rollout` (waits, bounded, until its last one).
  std::vector<std::string> RolloutLines(const std::string& rollout) {
    std::vector<std::string> out;
    Eventually([&] {
      out.clear();
      bool ended = false;
      for (const std::string& l : Lines(Slurp(events_))) {
        const Struct s = Parse(l);
        if (Str(s, "rollout") != rollout) continue;
        out.push_back(l);
        ended |= s.fields().count("ended") > 0;
      }
      return ended;
    });
    return out;
  }

  Listener model_, forbidden_;
  std::string events_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(DaemonEventsTest, TheFileAndWatchCarryEveryKind) {
  const std::string socket = daemon_->dirs().socket();
  Watcher all(socket, daemon_->dirs().root + "/watch-all.out", {});
  // The watch of every rollout is in place before anything happens.
  usleep(300000);

  v1::StartRolloutResponse refused;
  v1::StartRolloutRequest bad = Request("ev-bad");
  bad.set_policy_text("phase { name: \"x\" network_access: NO_SUCH_MODE }");
  ASSERT_FALSE(daemon_->Start(bad, &refused).ok());

  CaplessRootProcess target;
  ASSERT_GT(target.pid(), 0);
  v1::StartRolloutResponse started;
  grpc::Status s = daemon_->Start(Request("ev-1"), &started);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon_->Log();
  Watcher one(socket, daemon_->dirs().root + "/watch-one.out", {"ev-1"});
  usleep(300000);
  const std::string cg = started.cgroup_path();
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.2", model_.port), 0);
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.4", forbidden_.port), 1);
  const int environ = ReadEnvironIn(cg, target.pid());
  EXPECT_NE(environ, 0) << "the sandbox read another process's environ";
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(daemon_->End("ev-1", &ended).ok());

  // The file: every kind the rollout produced, each line JSON with the
  // common fields.
  const std::vector<std::string> lines = RolloutLines("ev-1");
  std::set<std::string> kinds;
  bool allowed = false, denied = false, guard = false;
  for (const std::string& l : lines) {
    const Struct e = Parse(l);
    EXPECT_EQ(Str(e, "schema"), "sandfence.events.v1");
    EXPECT_FALSE(Str(e, "time").empty());
    EXPECT_FALSE(Str(e, "phase").empty()) << l;
    kinds.insert(Str(e, "kind"));
    const Struct& dest = Sub(e, "destination");
    if (Str(e, "kind") == "network" && Str(dest, "address") == "127.0.0.2") {
      allowed |= Str(e, "verdict") == "allowed";
    }
    if (Str(e, "kind") == "network" && Str(dest, "address") == "127.0.0.4") {
      denied |= Str(e, "verdict") == "denied" &&
                dest.fields().at("port").number_value() == forbidden_.port;
    }
    if (Str(e, "kind") == "guard" && Str(e, "action") == "proc_open") {
      guard = Str(e, "detail") == "environ" &&
              (Str(e, "verdict") == "killed" || Str(e, "verdict") == "denied") &&
              Sub(e, "target").fields().at("pid").number_value() ==
                  target.pid() &&
              (Str(e, "layer") == "lsm" || Str(e, "layer") == "signal");
    }
  }
  const std::string all_lines = absl::StrJoin(lines, "\n");
  EXPECT_TRUE(allowed) << all_lines;
  EXPECT_TRUE(denied) << all_lines;
  EXPECT_TRUE(guard) << all_lines;
  EXPECT_TRUE(kinds.count("phase")) << all_lines;

  // The refusal, typed, under the refused rollout's id.
  bool refusal = false;
  for (const std::string& l : Lines(Slurp(events_))) {
    const Struct e = Parse(l);
    if (Str(e, "rollout") == "ev-bad") {
      refusal = Str(e, "kind") == "refusal" && Str(e, "verdict") == "refused" &&
                Str(e, "cause") == "malformed" &&
                !e.fields().at("retryable").bool_value();
    }
  }
  EXPECT_TRUE(refusal) << Slurp(events_);

  // The watch of one rollout ended by itself with the rollout's last line,
  // and saw exactly the file's lines of it from when it began (after the
  // start's phase line): the connects, the guard, the end.
  EXPECT_EQ(one.WaitExit(10000), 0) << one.Output();
  const std::vector<std::string> watched = Lines(one.Output());
  ASSERT_GE(watched.size(), 4u) << one.Output();
  ASSERT_LE(watched.size(), lines.size());
  EXPECT_EQ(watched, std::vector<std::string>(
                         lines.end() - static_cast<long>(watched.size()),
                         lines.end()));
  // The watch of every rollout saw those too, and the refusal.
  Eventually([&] {
    return absl::StrContains(all.Output(), "\"rollout\":\"ev-bad\"") &&
           absl::StrContains(all.Output(), "\"ended\":true");
  });
  std::vector<std::string> seen;
  for (const std::string& l : Lines(all.Output())) {
    if (Str(Parse(l), "rollout") == "ev-1") seen.push_back(l);
  }
  EXPECT_EQ(seen, lines);
}

TEST_F(DaemonEventsTest, WatchingARolloutThatIsNotOpenIsRefused) {
  Watcher w(daemon_->dirs().socket(), daemon_->dirs().root + "/w.out",
            {"no-such-rollout"});
  const int status = w.WaitExit(10000);
  EXPECT_NE(status, 0);
  EXPECT_NE(status, -1) << "the watch did not end";
}

}  // namespace
}  // namespace sandfence::testing
