// Issue 12, "out of the sandbox's reach", on the daemon's side: a root
// agent inside a daemon sandbox (uid 0, with what `sandfence run` leaves
// it: CAP_KILL, ownership of root's files) against the daemon, its socket,
// pins, state and records; crashes at the worst moments; paths and strings
// the daemon must refuse. Real daemon, real cgroups, real processes;
// 127.0.0.2 plays the model server, 127.0.0.3 a tool, 127.0.0.4 somewhere
// forbidden.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/daemon_fixture.h"
#include "egress/egress_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "records/journal.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "support/test_files.h"

namespace sandfence::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kDenied = 1;  // net_probe exits with the errno: EPERM
constexpr int kKilled = 128 + SIGKILL;

std::string ReachClient() {
  const char* env = getenv("SANDFENCE_REACH_CLIENT");
  return env ? env : SANDFENCE_REACH_CLIENT_PATH;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Cgroup directories a test made, removed deepest first whatever happens
// (a leftover of a failed run has a name of its own and harms no other).
class CgroupDirs {
 public:
  ~CgroupDirs() {
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
      ::rmdir(it->c_str());
    }
  }
  // Makes `parent`/l<k>/... down to cgroup level `level`; returns the
  // deepest directory.
  std::string MakeChain(const std::string& parent, int level) {
    absl::StatusOr<CgroupRef> ref = InspectCgroup(parent);
    if (!ref.ok()) {
      ADD_FAILURE() << ref.status();
      return parent;
    }
    std::string path = parent;
    for (uint32_t l = ref->level + 1; l <= static_cast<uint32_t>(level); ++l) {
      path = absl::StrCat(path, "/l", l);
      Make(path);
    }
    return path;
  }
  void Make(const std::string& path) {
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      ADD_FAILURE() << "mkdir " << path << ": " << strerror(errno);
    }
    dirs_.push_back(path);
  }

 private:
  std::vector<std::string> dirs_;
};

struct AgentResult {
  int status = -1;  // shell-style: exit code, or 128+signal
  std::string out;
};

class DaemonReachTest : public DaemonTestBase {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    model_ = Listen("127.0.0.2");
    tool_ = Listen("127.0.0.3");
    forbidden_ = Listen("127.0.0.4");
    char tmpl[] = "/tmp/sandfence-reach-out-XXXXXX";
    out_dir_ = mkdtemp(tmpl);
    daemon_ = std::make_unique<DaemonProcess>(MakeDaemonDirs("reach"));
    daemon_->Start();
  }
  void TearDown() override {
    daemon_.reset();
    std::error_code ignored;
    if (!out_dir_.empty()) std::filesystem::remove_all(out_dir_, ignored);
  }

  // setup (model only) -> agent (model and tools) -> verify (model only),
  // and "open" (inherit: nothing restricted). guard_off: the guard is off
  // in every phase.
  // unix: the restricted phases' unix block ("" = the default, CHECKED).
  v1::StartRolloutRequest Request(const std::string& id,
                                  bool guard_off = false,
                                  const std::string& unix = "") {
    const std::string guard =
        absl::StrCat(guard_off ? "guard { mode: OFF } " : "", unix);
    v1::StartRolloutRequest req;
    req.set_rollout_id(id);
    req.mutable_sandbox()->set_create(true);
    req.set_policy_text(absl::StrCat(
        "name: \"reach\"\n",
        "phase { name: \"setup\" network_access: MODEL_ONLY dns { mode: NONE "
        "} audit { allowed: ALL } ",
        guard, " }\n",
        "phase { name: \"agent\" network_access: MODEL_AND_TOOLS dns { mode: "
        "NONE } audit { allowed: ALL } ",
        guard, " tool { name: \"search\" url: \"http://127.0.0.3:", tool_.port,
        "\" } }\n",
        "phase { name: \"verify\" network_access: MODEL_ONLY dns { mode: NONE "
        "} audit { allowed: ALL } ",
        guard, " }\n",
        "phase { name: \"open\" network_access: INHERIT dns { mode: NONE } ",
        guard_off ? "guard { mode: OFF }" : "", " }\n"));
    req.mutable_endpoints()->add_model(
        absl::StrCat("http://127.0.0.2:", model_.port, "/v1"));
    return req;
  }

  std::string GuardStatus() {
    grpc::ClientContext ctx;
    v1::HealthResponse h;
    EXPECT_TRUE(daemon_->stub()->Health(&ctx, {}, &h).ok());
    return h.guard();
  }
  static bool GuardRuns(const std::string& status) {
    return absl::StartsWith(status, "lsm") ||
           absl::StartsWith(status, "signal");
  }

  // Runs `script` with sh inside the sandbox as a root agent (uid 0 with
  // the capabilities `sandfence run` leaves); stdout and stderr captured.
  AgentResult RunAgent(const std::string& cgroup_path,
                       const std::string& script) {
    AgentResult r;
    absl::StatusOr<Cgroup> cg = Cgroup::Open(cgroup_path);
    if (!cg.ok()) {
      ADD_FAILURE() << cg.status();
      return r;
    }
    const std::string out = absl::StrCat(out_dir_, "/agent-", ++agents_);
    SpawnOptions spawn;
    spawn.cgroup_fd = cg->fd();
    spawn.argv = {"/bin/sh", "-c",
                  absl::StrCat("exec >", out, " 2>&1\n", script)};
    absl::StatusOr<pid_t> child = SpawnInCgroup(spawn);
    if (!child.ok()) {
      ADD_FAILURE() << child.status();
      return r;
    }
    absl::StatusOr<int> status = WaitForExit(*child);
    r.status = status.ok() ? *status : -1;
    r.out = FileContents(out);
    return r;
  }

  std::string StateFile(const std::string& id) const {
    return absl::StrCat(daemon_->dirs().state(), "/", id, ".state");
  }
  PinLayout Pins() const { return PinsOf(daemon_->dirs().pin_dir); }
  std::string LinkDir(uint64_t cgroup_id) const {
    return Pins().SandboxLinksDir(cgroup_id);
  }

  Listener model_, tool_, forbidden_;
  std::string out_dir_;
  int agents_ = 0;
};

// net_probe in the cgroup at `path`, moved there through cgroup.procs
// after fork rather than cloned into it: on 6.18 a clone3(CLONE_INTO_CGROUP)
// into a cgroup that was once killed through cgroup.kill is killed at once
// (the kernel compares the kill count of the parent's cgroup), and an
// adopting daemon kills the processes of a sandbox that ran unenforced.
int ProbeMovedIn(const std::string& path, const std::string& addr,
                 uint16_t port) {
  const std::string procs = path + "/cgroup.procs";
  const std::string probe = NetProbe();
  const std::string port_text = absl::StrCat(port);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) _exit(120);
    close(fd);
    execl(probe.c_str(), probe.c_str(), "tcp-connect", addr.c_str(),
          port_text.c_str(), nullptr);
    _exit(127);
  }
  absl::StatusOr<int> status = WaitForExit(pid);
  return status.ok() ? *status : -1;
}

std::string GuardEvents(const v1::RolloutRecord& rec) {
  std::vector<std::string> out;
  for (const v1::GuardEntry& g : rec.guard_event()) {
    out.push_back(absl::StrCat(g.action(), " ", g.what(), " ", g.detail(), " ",
                               g.actor().command()));
  }
  return absl::StrJoin(out, "\n");
}

bool HasGuardEvent(const v1::RolloutRecord& rec, const std::string& what,
                   const std::string& action) {
  for (const v1::GuardEntry& g : rec.guard_event()) {
    if (g.what() == what && g.action() == action) return true;
  }
  return false;
}

// E2: a root agent inside a daemon sandbox calls the daemon (the socket is
// root's, and so is the agent): SetPhase to an inherit phase and EndRollout
// on itself. The daemon refuses every call from inside a sandbox
// (PERMISSION_DENIED); the sandbox stays in its phase, enforced. With the
// guard on, the agent does not even reach the socket (protected object).
TEST_F(DaemonReachTest, E2RootAgentCannotCallTheDaemon) {
  const std::string sock = daemon_->dirs().socket();
  // Guard off and Unix sockets unchecked: nothing but the daemon itself
  // stands between the agent and the socket.
  v1::StartRolloutResponse started;
  grpc::Status s = Start(Request("e2-open", /*guard_off=*/true,
                                 "unix { mode: UNCHECKED }"),
                         &started);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon_->Log();
  const std::string cg = started.cgroup_path();

  AgentResult cli = RunAgent(
      cg,
      absl::StrCat(SandfenceBinary(), " phase e2-open open --socket ", sock));
  EXPECT_NE(cli.status, 0) << cli.out;
  EXPECT_THAT(cli.out, HasSubstr("refuses calls from inside a sandbox"));
  const std::string client = ReachClient();
  for (const std::string& call :
       {absl::StrCat(client, " ", sock, " set-phase e2-open open"),
        absl::StrCat(client, " ", sock, " end e2-open"),
        absl::StrCat(client, " ", sock, " health")}) {
    AgentResult r = RunAgent(cg, call);
    EXPECT_EQ(r.status, grpc::PERMISSION_DENIED) << call << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr("refuses calls from inside a sandbox"))
        << call;
  }

  // Still open, still in its phase, still enforced.
  v1::ListRolloutsResponse list = List();
  ASSERT_EQ(list.rollout_size(), 1);
  EXPECT_EQ(list.rollout(0).phase(), "setup");
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.4", forbidden_.port), kDenied)
      << "a forbidden connect got through after the agent called the daemon";
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.2", model_.port), 0);

  // The daemon said why.
  EXPECT_THAT(daemon_->Log(), HasSubstr("inside a sandbox"));

  // Unix sockets checked (the default), guard off: the kernel refuses the
  // connect itself (EPERM), even with the socket listed in the policy.
  if (HostChecksUnixSockets().ok()) {
    v1::StartRolloutResponse checked;
    s = Start(Request("e2-unix", /*guard_off=*/true,
                      absl::StrCat("unix { allow: \"", sock, "\" }")),
              &checked);
    ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon_->Log();
    AgentResult r = RunAgent(checked.cgroup_path(),
                             absl::StrCat(client, " ", sock, " health"));
    EXPECT_EQ(r.status, grpc::UNAVAILABLE) << r.out;
    EXPECT_THAT(r.out, HasSubstr("Operation not permitted"));
    v1::EndRolloutResponse ended;
    ASSERT_TRUE(End("e2-unix", &ended).ok());
    bool recorded = false;
    for (const v1::NetAttempt& a : ended.record().net_attempt()) {
      recorded |= a.protocol() == "unix" && a.address() == sock &&
                  a.verdict() == v1::VERDICT_DENY &&
                  a.reason() == "sandfence's own socket";
    }
    EXPECT_TRUE(recorded) << "the refused connect is not in the record";
  }

  // Guard on: the socket is a protected object; the agent is stopped at
  // connect (signal: killed; lsm: EPERM, so the client sees UNAVAILABLE).
  v1::StartRolloutResponse guarded;
  s = Start(Request("e2-guarded"), &guarded);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string guard = GuardStatus();
  if (GuardRuns(guard)) {
    AgentResult r =
        RunAgent(guarded.cgroup_path(),
                 absl::StrCat(client, " ", sock, " set-phase e2-guarded open"));
    EXPECT_EQ(r.status,
              absl::StartsWith(guard, "lsm") ? grpc::UNAVAILABLE : kKilled)
        << r.out;
    EXPECT_EQ(ProbeIn(guarded.cgroup_path(), "tcp-connect", "127.0.0.4",
                      forbidden_.port),
              kDenied);
  }

  // A process outside every sandbox (this test) is served as before.
  v1::SetPhaseResponse sw;
  ASSERT_TRUE(SetPhase("e2-open", "agent", &sw).ok());
  EXPECT_EQ(sw.previous_phase(), "setup");
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.3", tool_.port), 0);
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("e2-open", &ended).ok());
  EXPECT_EQ(ended.record().timeline_size(), 2);  // setup, agent: no "open"
  ASSERT_TRUE(End("e2-guarded", &ended).ok());
  if (!GuardRuns(guard)) {
    GTEST_SKIP() << "the guarded half needs a process guard; this host runs "
                 << guard;
  }
}

// E3 (the agent's side): with the guard on, a root agent's `rm -rf
// <pins>/links/<its cgroup id>`, a write to its own record, and a rename and
// an unlink of its state file are refused (lsm: EPERM; signal: the agent is
// killed; the call has run, docs/guard.md "What signal mode cannot
// prevent"), each recorded; the sandbox stays enforced.
TEST_F(DaemonReachTest, E3RootAgentCannotUnpinOrTouchStateAndRecord) {
  v1::StartRolloutResponse started;
  grpc::Status s = Start(Request("e3-agent"), &started);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon_->Log();
  const std::string guard = GuardStatus();
  if (!GuardRuns(guard)) {
    v1::EndRolloutResponse ended;
    End("e3-agent", &ended);
    GTEST_SKIP() << "needs a process guard (lsm or signal); this host: "
                 << guard;
  }
  const bool lsm = absl::StartsWith(guard, "lsm");
  const std::string cg = started.cgroup_path();
  const std::string links = LinkDir(started.cgroup_id());
  const std::vector<std::string> hooks = ListDir(links);
  ASSERT_FALSE(hooks.empty()) << links << " holds no pinned link";
  // The journal the daemon writes while the rollout runs.
  const std::string journal =
      absl::StrCat(daemon_->dirs().records(), "/e3-agent.record");
  ASSERT_TRUE(PathExists(journal)) << journal;
  std::string state = StateFile("e3-agent");
  ASSERT_TRUE(PathExists(state)) << state;

  // 1. Unpin its own links.
  AgentResult rm = RunAgent(cg, absl::StrCat("exec rm -rf ", links));
  if (lsm) {
    EXPECT_NE(rm.status, 0) << rm.out;
    EXPECT_THAT(rm.out, HasSubstr("Operation not permitted"));
    EXPECT_EQ(ListDir(links), hooks) << "a pinned link was removed";
  } else {
    EXPECT_EQ(rm.status, kKilled) << rm.out;
  }
  EXPECT_TRUE(PathExists(links));
  // 2. Write its own record (appending: no truncation).
  AgentResult write =
      RunAgent(cg, absl::StrCat("echo REACH-MARKER >>", journal));
  EXPECT_EQ(write.status, lsm ? 2 : kKilled) << write.out;
  EXPECT_THAT(FileContents(journal), Not(HasSubstr("REACH-MARKER")));
  // 3. Move its state file away (then 4. unlink whatever name it has).
  const std::string moved = absl::StrCat(daemon_->dirs().state(), "/moved");
  AgentResult mv = RunAgent(cg, absl::StrCat("exec mv -f ", state, " ", moved));
  EXPECT_EQ(mv.status, lsm ? 1 : kKilled) << mv.out;
  if (lsm) {
    EXPECT_TRUE(PathExists(state));
    EXPECT_FALSE(PathExists(moved));
  } else if (!PathExists(state)) {
    state = moved;  // signal mode: the rename ran before the kill
  }
  AgentResult unlink = RunAgent(cg, absl::StrCat("exec rm -f ", state));
  EXPECT_EQ(unlink.status, lsm ? 1 : kKilled) << unlink.out;
  if (lsm) {
    EXPECT_TRUE(PathExists(state));
  }

  // Enforcement holds; the daemon still serves the rollout.
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.4", forbidden_.port), kDenied)
      << "a forbidden connect got through";
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.2", model_.port), 0);
  ASSERT_EQ(List().rollout_size(), 1);
  ASSERT_TRUE(SetPhase("e3-agent", "agent").ok());
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.4", forbidden_.port), kDenied);

  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("e3-agent", &ended).ok());
  const v1::RolloutRecord& rec = ended.record();
  const std::string action = lsm ? "denied" : "killed";
  EXPECT_TRUE(HasGuardEvent(rec, "protected_unlink", action))
      << GuardEvents(rec);
  EXPECT_TRUE(HasGuardEvent(rec, "protected_rename", action))
      << GuardEvents(rec);
  EXPECT_TRUE(HasGuardEvent(rec, "protected_write", action))
      << GuardEvents(rec);
  EXPECT_THAT(FileContents(ended.record_path()),
              Not(HasSubstr("REACH-MARKER")));
}

// E3 (the crash's side): a link pin is gone (the test removes it, as an
// agent with no guard could) and the daemon dies. The restarted daemon
// still lists the rollout, finds the missing pin, kills the created
// sandbox's processes and attaches it again, and says so truthfully: no
// "stays enforced" for it, a warning in its record.
TEST_F(DaemonReachTest, E3MissingLinkPinIsFoundAndEnforcedAfterACrash) {
  v1::StartRolloutResponse started;
  grpc::Status s = Start(Request("e3-crash"), &started);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon_->Log();
  const std::string cg = started.cgroup_path();
  const std::string links = LinkDir(started.cgroup_id());
  const std::vector<std::string> hooks = ListDir(links);
  ASSERT_THAT(hooks, ::testing::Contains("connect4"));

  // An agent that was running when the pin went.
  absl::StatusOr<Cgroup> cgroup = Cgroup::Open(cg);
  ASSERT_TRUE(cgroup.ok()) << cgroup.status();
  SpawnOptions spawn;
  spawn.cgroup_fd = cgroup->fd();
  spawn.argv = {"sleep", "120"};
  absl::StatusOr<pid_t> sleeper = SpawnInCgroup(spawn);
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();

  ASSERT_EQ(::unlink(absl::StrCat(links, "/connect4").c_str()), 0)
      << strerror(errno);
  daemon_->Stop(SIGKILL);
  daemon_->Start();

  v1::ListRolloutsResponse list = List();
  ASSERT_EQ(list.rollout_size(), 1) << daemon_->Log();
  EXPECT_EQ(list.rollout(0).rollout_id(), "e3-crash");
  EXPECT_TRUE(list.rollout(0).adopted());
  EXPECT_EQ(list.rollout(0).phase(), "setup");

  // Its processes were killed (they ran unenforced).
  // Adoption finished before the daemon served List: it is dead by now
  // (the wait covers reaping only).
  int status = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 500 && reaped == 0; ++i) {
    reaped = waitpid(*sleeper, &status, WNOHANG);
    if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (reaped == 0) {
    ::kill(*sleeper, SIGKILL);
    waitpid(*sleeper, &status, 0);
    ADD_FAILURE() << "the sandbox's process survived adoption unenforced";
  } else {
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the sandbox's process ended otherwise: status " << status;
  }
  // Enforced again, every hook pinned again.
  EXPECT_THAT(ListDir(links), ::testing::Contains("connect4"));
  EXPECT_EQ(ProbeMovedIn(cg, "127.0.0.4", forbidden_.port), kDenied)
      << daemon_->Log();
  EXPECT_EQ(ProbeMovedIn(cg, "127.0.0.2", model_.port), 0);

  // Truthful: the log and the record say the hook was gone.
  const std::string log = daemon_->Log();
  EXPECT_THAT(log, HasSubstr("connect4"));
  EXPECT_THAT(log, HasSubstr("not enforced"));
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "e3-crash") ||
        absl::StrContains(line, absl::StrCat(started.cgroup_id()))) {
      EXPECT_THAT(std::string(line), Not(HasSubstr("stays enforced")));
    }
  }
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("e3-crash", &ended).ok());
  EXPECT_TRUE(HasWarning(ended.record(), v1::WARNING_ADOPTION,
                         {"connect4", "not enforced", "killed"}))
      << absl::StrJoin(WarningTexts(ended.record()), "\n");
}

// E4: the daemon dies (SIGKILL); the guard is pinned and keeps enforcing:
// a root agent's `echo $$ > <cgroup2 root>/cgroup.procs` (leaving its
// cgroup) is refused, and a forbidden connect still gets EPERM.
TEST_F(DaemonReachTest, E4GuardOutlivesTheDaemon) {
  v1::StartRolloutResponse started;
  grpc::Status s = Start(Request("e4-1"), &started);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon_->Log();
  const std::string guard = GuardStatus();
  if (!GuardRuns(guard)) {
    v1::EndRolloutResponse ended;
    End("e4-1", &ended);
    GTEST_SKIP() << "needs a process guard (lsm or signal); this host: "
                 << guard;
  }
  const bool lsm = absl::StartsWith(guard, "lsm");
  const std::string cg = started.cgroup_path();
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  ASSERT_TRUE(mount.ok()) << mount.status();

  daemon_->Stop(SIGKILL);
  const std::string guard_pins = Pins().set() + "/guard";
  EXPECT_THAT(ListDir(guard_pins),
              ::testing::Contains(::testing::StartsWith(lsm ? "lsm-" : "signal-")))
      << guard_pins << ": the guard is not pinned";

  // Leave the cgroup, then connect somewhere forbidden: if the move
  // worked, the connect would too.
  AgentResult escape = RunAgent(
      cg, absl::StrCat("echo $$ > ", *mount, "/cgroup.procs\n", "exec ",
                       NetProbe(), " tcp-connect 127.0.0.4 ", forbidden_.port));
  EXPECT_EQ(escape.status, lsm ? kDenied : kKilled)
      << "leaving the sandbox while no daemon ran: " << escape.out;
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.4", forbidden_.port), kDenied);

  daemon_->Start();
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("e4-1", &ended).ok());
  EXPECT_TRUE(
      HasGuardEvent(ended.record(), "cgroup_write", lsm ? "denied" : "killed"))
      << GuardEvents(ended.record());
}

// E9: nesting deeper than the kernel walk (16 levels). An existing cgroup
// at level 17 is refused as a sandbox; a process moved into a level-17
// descendant of an enforced sandbox is denied everything, the model
// included, and the denial is counted and recorded ("too deep").
TEST_F(DaemonReachTest, E9DeeperThanSixteenLevels) {
  CgroupDirs dirs;
  const std::string deep = dirs.MakeChain(daemon_->dirs().cgroups, 17);
  absl::StatusOr<CgroupRef> ref = InspectCgroup(deep);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ(ref->level, 17u);
  v1::StartRolloutRequest req = Request("e9-deep");
  req.mutable_sandbox()->set_cgroup_path(deep);
  v1::StartRolloutResponse resp;
  grpc::Status s = Start(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("level 17"));
  EXPECT_THAT(s.error_message(), HasSubstr("16"));
  EXPECT_FALSE(PathExists(LinkDir(ref->id)))
      << "the level-17 cgroup was attached";
  EXPECT_EQ(List().rollout_size(), 0);

  v1::StartRolloutResponse started;
  s = Start(Request("e9-1"), &started);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string level17 = dirs.MakeChain(started.cgroup_path(), 17);
  const std::string level16 = level17.substr(0, level17.rfind('/'));
  // Level 16 is judged as usual: the model yes, elsewhere no.
  EXPECT_EQ(ProbeIn(level16, "tcp-connect", "127.0.0.2", model_.port), 0);
  EXPECT_EQ(ProbeIn(level16, "tcp-connect", "127.0.0.4", forbidden_.port),
            kDenied);
  const uint64_t denied_before = List().rollout(0).denied();
  // Level 17: nothing, not even the model.
  EXPECT_EQ(ProbeIn(level17, "tcp-connect", "127.0.0.2", model_.port), kDenied)
      << "a task below the walk's reach was judged by the top 16 levels only";
  EXPECT_EQ(ProbeIn(level17, "tcp-connect", "127.0.0.4", forbidden_.port),
            kDenied);
  EXPECT_GE(List().rollout(0).denied(), denied_before + 2)
      << "the denials below the walk's reach were not counted";

  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("e9-1", &ended).ok());
  int too_deep = 0;
  for (const v1::NetAttempt& a : ended.record().net_attempt()) {
    if (a.reason() == "too deep" && a.verdict() == v1::VERDICT_DENY) {
      too_deep += static_cast<int>(a.count());
      // Refused at socket() already (no address yet), or at connect.
      EXPECT_TRUE(a.hook() == "sock_create" || a.address() == "127.0.0.2" ||
                  a.address() == "127.0.0.4")
          << a.hook() << " " << a.protocol() << " " << a.address() << ":"
          << a.port();
    }
  }
  EXPECT_EQ(too_deep, 2) << "the record does not say the denials were for "
                            "depth";
}

// E10: a crash during SetPhase. The kernel switched to the wider phase, the
// daemon died before its state file was renamed (the old content is put
// back). The restarted daemon reports the kernel's phase, the record
// carries a warning, and SetPhase(old) really narrows the sandbox again.
TEST_F(DaemonReachTest, E10CrashDuringSetPhaseTrustsTheKernel) {
  v1::StartRolloutResponse started;
  grpc::Status s = Start(Request("e10-1"), &started);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string cg = started.cgroup_path();
  const std::string state = StateFile("e10-1");
  const std::string before = FileContents(state);
  ASSERT_FALSE(before.empty()) << state;

  ASSERT_TRUE(SetPhase("e10-1", "agent").ok());
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.3", tool_.port), 0);
  // As if the rename of the new state never happened (state_store.cc
  // writes <file>.tmp, then renames it over <file>).
  {
    std::ofstream out(state, std::ios::binary | std::ios::trunc);
    out << before;
  }
  ASSERT_EQ(FileContents(state), before);
  daemon_->Stop(SIGKILL);
  daemon_->Start();

  v1::ListRolloutsResponse list = List();
  ASSERT_EQ(list.rollout_size(), 1) << daemon_->Log();
  EXPECT_EQ(list.rollout(0).phase(), "agent")
      << "the daemon believes its stale state, not the kernel";
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.3", tool_.port), 0);

  v1::SetPhaseResponse back;
  ASSERT_TRUE(SetPhase("e10-1", "setup", &back).ok());
  EXPECT_EQ(back.previous_phase(), "agent");
  EXPECT_EQ(back.phase(), "setup");
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.3", tool_.port), kDenied)
      << "SetPhase(setup) after the crash left the tool reachable";
  EXPECT_EQ(List().rollout(0).phase(), "setup");

  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("e10-1", &ended).ok());
  EXPECT_TRUE(HasWarning(ended.record(), v1::WARNING_ADOPTION,
                         {"believed phase \"setup\"", "\"agent\""}))
      << absl::StrJoin(WarningTexts(ended.record()), "\n");
  std::vector<std::string> timeline;
  for (const auto& t : ended.record().timeline()) timeline.push_back(t.name());
  EXPECT_EQ(timeline.back(), "setup") << absl::StrJoin(timeline, ",");
}

// Also found: the root cgroup (however spelled), the daemon's own cgroup
// and its ancestors are never sandboxes: refused before anything is
// attached.
TEST_F(DaemonReachTest, FindingRootAndOwnCgroupsAreRefused) {
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  ASSERT_TRUE(mount.ok()) << mount.status();
  // Put the daemon in a cgroup two levels down, so that its own cgroup and
  // an ancestor are not the root.
  const pid_t daemon_pid = daemon_->pid();
  absl::StatusOr<std::string> home = CgroupOfPid(daemon_pid);
  ASSERT_TRUE(home.ok()) << home.status();
  CgroupDirs dirs;
  const std::string own_parent =
      absl::StrCat(*mount, "/sandfence-reach-own-", getpid());
  const std::string own = own_parent + "/daemon";
  dirs.Make(own_parent);
  dirs.Make(own);
  auto move = [](const std::string& cgroup, pid_t pid) {
    std::ofstream procs(cgroup + "/cgroup.procs");
    procs << pid << std::endl;
    return procs.good();
  };
  const std::string home_dir = absl::StrCat(*mount, *home == "/" ? "" : *home);
  // Back home however the test ends, so that its cgroups can go.
  struct MoveBack {
    std::function<void()> fn;
    ~MoveBack() { fn(); }
  } move_back{[&] { move(home_dir, daemon_pid); }};
  ASSERT_TRUE(move(own, daemon_pid));

  const std::vector<std::string> links_before =
      ListDir(Pins().LinksDir());
  struct Case {
    std::string path;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"/", "sandbox.cgroup_path"},
      {"/.", "sandbox.cgroup_path"},
      {*mount, "root cgroup"},
      {*mount + "/", "root cgroup"},
      {*mount + "/.", "root cgroup"},
      {"/" + *mount, "root cgroup"},
      {own_parent + "/..", "sandbox.cgroup_path"},
      {own, "daemon itself"},
      {own + "/.", "daemon itself"},
      {own_parent, "daemon itself"},
  };
  for (const Case& c : cases) {
    v1::StartRolloutRequest req = Request("own-1");
    req.mutable_sandbox()->set_cgroup_path(c.path);
    v1::StartRolloutResponse resp;
    grpc::Status s = Start(req, &resp);
    EXPECT_TRUE(s.error_code() == grpc::FAILED_PRECONDITION ||
                s.error_code() == grpc::INVALID_ARGUMENT)
        << c.path << ": " << s.error_code() << " " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.says)) << c.path;
    EXPECT_EQ(List().rollout_size(), 0) << c.path;
    EXPECT_EQ(ListDir(Pins().LinksDir()), links_before)
        << c.path << ": something was attached";
  }
  // Its former cgroup (the root here, or wherever the test runs) is no
  // sandbox either: the root by level, any other as its ancestor.
  v1::StartRolloutRequest req = Request("own-2");
  req.mutable_sandbox()->set_cgroup_path(home_dir);
  v1::StartRolloutResponse resp;
  EXPECT_EQ(Start(req, &resp).error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_EQ(ListDir(Pins().LinksDir()), links_before);

  EXPECT_TRUE(move(home_dir, daemon_pid));
  // The daemon still works for a proper sandbox.
  v1::StartRolloutResponse ok;
  ASSERT_TRUE(Start(Request("own-3"), &ok).ok());
  v1::EndRolloutResponse ended;
  EXPECT_TRUE(End("own-3", &ended).ok());
}

// Also found: invalid UTF-8 in any request string is INVALID_ARGUMENT
// naming the field, never INTERNAL with an empty message; and it changes
// nothing.
TEST_F(DaemonReachTest, FindingInvalidUtf8IsInvalidArgumentNamingTheField) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(Start(Request("utf8-1"), &started).ok());
  const std::string bad = "x\xff\xfe";

  struct Case {
    std::string name;
    std::function<grpc::Status(grpc::ClientContext*)> call;
    std::string field;
  };
  v1::Sandfence::Stub* stub = daemon_->stub();
  std::vector<Case> cases;
  {
    v1::StartRolloutRequest r = Request("utf8-2");
    r.set_rollout_id(bad);
    cases.push_back({"StartRollout.rollout_id",
                     [stub, r](grpc::ClientContext* c) {
                       v1::StartRolloutResponse o;
                       return stub->StartRollout(c, r, &o);
                     },
                     "rollout_id"});
  }
  {
    v1::StartRolloutRequest r = Request("utf8-2");
    r.set_policy_text("name: \"" + bad + "\"");
    cases.push_back({"StartRollout.policy_text",
                     [stub, r](grpc::ClientContext* c) {
                       v1::StartRolloutResponse o;
                       return stub->StartRollout(c, r, &o);
                     },
                     "policy_text"});
  }
  {
    // A string deep in a message: named by its path.
    v1::StartRolloutRequest r = Request("utf8-2");
    v1::PolicySet* set = r.mutable_policy_set();
    set->set_name("ok");
    set->add_phase()->set_name("first");
    set->add_phase()->set_name(bad);
    cases.push_back({"StartRollout.policy_set.phase[1].name",
                     [stub, r](grpc::ClientContext* c) {
                       v1::StartRolloutResponse o;
                       return stub->StartRollout(c, r, &o);
                     },
                     "policy_set.phase[1].name"});
  }
  {
    v1::StartRolloutRequest r = Request("utf8-2");
    r.set_initial_phase(bad);
    cases.push_back({"StartRollout.initial_phase",
                     [stub, r](grpc::ClientContext* c) {
                       v1::StartRolloutResponse o;
                       return stub->StartRollout(c, r, &o);
                     },
                     "initial_phase"});
  }
  {
    v1::SetPhaseRequest r;
    r.set_rollout_id("utf8-1");
    r.set_phase(bad);
    cases.push_back({"SetPhase.phase",
                     [stub, r](grpc::ClientContext* c) {
                       v1::SetPhaseResponse o;
                       return stub->SetPhase(c, r, &o);
                     },
                     "phase"});
  }
  {
    v1::SetPhaseRequest r;
    r.set_rollout_id(bad);
    r.set_phase("agent");
    cases.push_back({"SetPhase.rollout_id",
                     [stub, r](grpc::ClientContext* c) {
                       v1::SetPhaseResponse o;
                       return stub->SetPhase(c, r, &o);
                     },
                     "rollout_id"});
  }
  {
    v1::EndRolloutRequest r;
    r.set_rollout_id(bad);
    cases.push_back({"EndRollout.rollout_id",
                     [stub, r](grpc::ClientContext* c) {
                       v1::EndRolloutResponse o;
                       return stub->EndRollout(c, r, &o);
                     },
                     "rollout_id"});
  }
  {
    v1::GetRecordRequest r;
    r.set_rollout_id(bad);
    cases.push_back({"GetRecord.rollout_id",
                     [stub, r](grpc::ClientContext* c) {
                       v1::GetRecordResponse o;
                       return stub->GetRecord(c, r, &o);
                     },
                     "rollout_id"});
  }
  {
    v1::WatchEventsRequest r;
    r.set_rollout_id(bad);
    cases.push_back({"WatchEvents.rollout_id",
                     [stub, r](grpc::ClientContext* c) {
                       auto reader = stub->WatchEvents(c, r);
                       v1::RolloutEvent e;
                       while (reader->Read(&e)) {
                       }
                       return reader->Finish();
                     },
                     "rollout_id"});
  }
  for (const Case& c : cases) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(20));
    grpc::Status s = c.call(&ctx);
    EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT)
        << c.name << ": got " << s.error_code() << " \"" << s.error_message()
        << "\"";
    EXPECT_THAT(s.error_message(), HasSubstr(c.field)) << c.name;
    EXPECT_THAT(s.error_message(), HasSubstr("UTF-8")) << c.name;
    EXPECT_THAT(s.error_message(), HasSubstr("x\\xff\\xfe")) << c.name;
  }
  // Nothing changed.
  v1::ListRolloutsResponse list = List();
  ASSERT_EQ(list.rollout_size(), 1);
  EXPECT_EQ(list.rollout(0).phase(), "setup");
  EXPECT_FALSE(PathExists(daemon_->dirs().cgroups + "/utf8-2"));
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(End("utf8-1", &ended).ok());
}

}  // namespace
}  // namespace sandfence::testing
