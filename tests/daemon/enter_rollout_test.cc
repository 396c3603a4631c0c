// `sandfence enter` (issue 32) end to end, as an attacker would: a real
// daemon, real cgroups, real processes. --rollout asks the daemon for the
// rollout's cgroup and what its phases allow; the process lands in that
// cgroup, its egress is judged by the rollout's policy, and it is confined
// (Landlock + seccomp + no_new_privs, capabilities dropped) in the host's
// PID namespace: enter makes none, so every process on the host is
// nameable, and only the guard keeps the agent from signalling, tracing or
// reading them. --cgroup and in place (a container's entrypoint) with both
// binaries, `sandfence enter` and the static sandfence-enter. Then the
// refusals, each with its exit status and words. 127.0.0.2 plays the model
// server, 127.0.0.3 a tool, 127.0.0.4 somewhere forbidden; loopback only.
#include <grp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "confine/confine.h"
#include "daemon/daemon_fixture.h"
#include "egress/egress_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/pin_layout.h"
#include "support/child_process.h"
#include "support/counting_unix_service.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "support/test_files.h"
#include "support/unix_attacks.h"

namespace sandfence::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kNobody = 65534;

std::string Actor() {
  const char* env = getenv("SANDFENCE_ESCAPE_ACTOR");
  return env ? env : SANDFENCE_ESCAPE_ACTOR_PATH;
}

// The static binary, when this build made it ("" otherwise).
std::string StaticEnter() {
  const char* env = getenv("SANDFENCE_ENTER_STATIC");
  return env ? env : SANDFENCE_ENTER_STATIC_PATH;
}

// The cgroup v2 path of `path` as /proc/<pid>/cgroup spells it.
std::string CgroupLine(const std::string& path) {
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  if (!mount.ok() || !absl::StartsWith(path, *mount)) return path;
  std::string rel = path.substr(mount->size());
  return absl::StrCat("cgroup ", rel.empty() ? "/" : rel);
}

bool WaitForFile(const std::string& path) {
  for (int i = 0; i < 2000 && !PathExists(path); ++i) usleep(10 * 1000);
  return PathExists(path);
}

// A process outside every sandbox that only waits, in the host's PID
// namespace: what the entered agent can name. Killed and reaped at the end.
class Victim {
 public:
  explicit Victim(int uid) {
    pid_ = fork();
    if (pid_ == 0) {
      if (uid != 0 && (setgroups(0, nullptr) != 0 ||
                       setresgid(uid, uid, uid) || setresuid(uid, uid, uid))) {
        _exit(1);
      }
      // exec after the change of credentials: dumpable again, so its /proc
      // files are its user's, as any agent's neighbour's would be.
      execl("/bin/sleep", "sleep", "infinity", static_cast<char*>(nullptr));
      _exit(127);
    }
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  }
  ~Victim() {
    if (pidfd_ >= 0) close(pidfd_);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_; }
  bool Alive() const {
    int status;
    if (waitpid(pid_, &status, WNOHANG) != 0) return false;
    const std::string stat =
        FileContents(absl::StrCat("/proc/", pid_, "/stat"));
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() &&
           stat[paren + 2] != 'Z';
  }

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
};

// One attempt of the entered agent (sf_escape_actor's arguments), the line
// it must print, more lines it must print, what must still hold outside
// afterwards ("" when it does), and the same call unconfined as its
// control.
struct Row {
  std::string what;
  std::vector<std::string> actor;
  std::string expect;
  std::vector<std::string> also;
  std::function<std::string()> effect;
  std::vector<std::string> control;

  Row(std::string w, std::vector<std::string> a, std::string e)
      : what(std::move(w)), actor(std::move(a)), expect(std::move(e)) {}
  Row&& Also(std::string line) && {
    also.push_back(std::move(line));
    return std::move(*this);
  }
  Row&& Effect(std::function<std::string()> f) && {
    effect = std::move(f);
    return std::move(*this);
  }
  Row&& Control(std::vector<std::string> c) && {
    control = std::move(c);
    return std::move(*this);
  }
};

int CountWarnings(const v1::RolloutRecord& rec, v1::WarningKind kind) {
  int n = 0;
  for (const v1::RecordWarning& w : rec.warning()) n += w.kind() == kind;
  return n;
}

class EnterRolloutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    SANDFENCE_REQUIRE_HOST(HostKernelRunsEgress());
    absl::StatusOr<ConfineSupport> support = ProbeConfinement();
    ASSERT_TRUE(support.ok()) << support.status();
    if (!support->usable()) {
      GTEST_SKIP() << "this host cannot confine (Landlock + seccomp): "
                   << support->Usable().message();
    }
    char tmpl[] = "/tmp/sf-enter-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    chmod(dir_.c_str(), 0755);
    for (const char* d : {"/out", "/mnt", "/work"}) {
      ASSERT_EQ(mkdir((dir_ + d).c_str(), 0777), 0);
      chmod((dir_ + d).c_str(), 0777);  // nobody's too
    }
    model_ = Listen("127.0.0.2");
    tool_ = Listen("127.0.0.3");
    forbidden_ = Listen("127.0.0.4");
    daemon_ = std::make_unique<DaemonProcess>(MakeDaemonDirs("enter"));
    daemon_->Start();
  }

  void TearDown() override {
    // Rollouts still open: ended (created cgroups removed), their
    // existing cgroups removed by the test.
    if (daemon_ != nullptr) {
      const v1::ListRolloutsResponse open = daemon_->List();
      for (const v1::RolloutSummary& r : open.rollout()) {
        v1::EndRolloutResponse ignored;
        daemon_->End(r.rollout_id(), &ignored);
      }
    }
    for (auto it = cgroups_.rbegin(); it != cgroups_.rend(); ++it) {
      rmdir(it->c_str());
    }
    daemon_.reset();
    if (!dir_.empty()) {
      umount2((dir_ + "/mnt").c_str(), MNT_DETACH);  // mounted by a test
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  std::string Out() const { return dir_ + "/out"; }
  std::string Socket() const { return daemon_->dirs().socket(); }

  // setup (model only) -> agent (model and tools; io_uring allowed). guard:
  // the guard block of every phase but the io_uring grant.
  // unix: the phases' unix block ("" = the default, CHECKED).
  std::string PolicyText(const std::string& guard,
                         const std::string& unix = "") const {
    const std::string agent_guard =
        guard == "OFF" ? "guard { mode: OFF }"
                       : absl::StrCat("guard { mode: ", guard,
                                      " allow_io_uring: true }");
    return absl::StrCat(
        "name: \"enter\"\n",
        "phase { name: \"setup\" network_access: MODEL_ONLY dns { mode: NONE "
        "} audit { allowed: ALL } guard { mode: ",
        guard, " } ", unix, " }\n",
        "phase { name: \"agent\" network_access: MODEL_AND_TOOLS dns { mode: "
        "NONE } audit { allowed: ALL } ",
        agent_guard, " ", unix,
        " tool { name: \"search\" url: \"http://127.0.0.3:", tool_.port,
        "\" } }\n");
  }

  // A rollout in a cgroup the daemon creates (create: true) or in an
  // existing one the test made (`existing`).
  v1::StartRolloutResponse StartRollout(const std::string& id,
                                        const std::string& guard = "LANDLOCK",
                                        const std::string& existing = "",
                                        const std::string& unix = "") {
    v1::StartRolloutRequest req;
    req.set_rollout_id(id);
    if (existing.empty()) {
      req.mutable_sandbox()->set_create(true);
    } else {
      req.mutable_sandbox()->set_cgroup_path(existing);
    }
    req.set_policy_text(PolicyText(guard, unix));
    req.mutable_endpoints()->add_model(
        absl::StrCat("http://127.0.0.2:", model_.port, "/v1"));
    v1::StartRolloutResponse resp;
    grpc::Status s = daemon_->Start(req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message() << "\n" << daemon_->Log();
    return resp;
  }

  // A cgroup of the test's own, under the daemon's cgroup directory.
  std::string MakeCgroup(const std::string& name) {
    const std::string path = absl::StrCat(daemon_->dirs().cgroups, "/", name);
    EXPECT_EQ(mkdir(path.c_str(), 0755), 0) << path << ": " << strerror(errno);
    cgroups_.push_back(path);
    return path;
  }

  v1::RolloutRecord End(const std::string& id) {
    v1::EndRolloutResponse ended;
    grpc::Status s = daemon_->End(id, &ended);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return ended.record();
  }

  // `sandfence enter ARGS... -- CMD...`, or the static binary.
  std::unique_ptr<Child> Enter(const std::vector<std::string>& args,
                               const std::vector<std::string>& cmd,
                               const ChildOptions& opts = {},
                               bool static_binary = false) {
    std::vector<std::string> argv;
    if (static_binary) {
      argv = {StaticEnter()};
    } else {
      argv = {SandfenceBinary(), "enter"};
    }
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return std::make_unique<Child>(argv, Out(), opts);
  }

  // Every row through `enter ENTER_ARGS`, one enter each, with the
  // victim's pidfd as stdin.
  void RunRows(const std::vector<Row>& rows,
               const std::vector<std::string>& enter_args, int uid,
               const Victim& victim) {
    for (const Row& row : rows) {
      SCOPED_TRACE(absl::StrCat(row.what, " (",
                                uid == 0 ? "root" : "nobody", ")"));
      std::vector<std::string> cmd = {Actor()};
      cmd.insert(cmd.end(), row.actor.begin(), row.actor.end());
      ChildOptions opts;
      opts.stdin_fd = victim.pidfd();
      auto c = Enter(enter_args, cmd, opts);
      const int status = c->Wait();
      const std::string out = c->out();
      EXPECT_TRUE(absl::StrContains(out, row.expect + "\n"))
          << "expected " << row.expect << ", got:\n"
          << out << c->err();
      EXPECT_EQ(status, absl::StartsWith(row.expect, "ok") ? 0 : 1)
          << out << c->err();
      for (const std::string& line : row.also) {
        EXPECT_TRUE(absl::StrContains(out, line + "\n"))
            << "expected \"" << line << "\" in:\n"
            << out;
      }
      if (row.effect) {
        EXPECT_EQ(row.effect(), "") << out;
      }
      EXPECT_TRUE(victim.Alive()) << "the victim died: " << out;
      std::string control;
      if (!row.control.empty()) {
        std::vector<std::string> argv = {Actor()};
        argv.insert(argv.end(), row.control.begin(), row.control.end());
        ChildOptions copts;
        copts.stdin_fd = victim.pidfd();
        copts.uid = uid;
        Child unconfined(argv, Out(), copts);
        unconfined.Wait();
        const std::string said = unconfined.out();
        control = absl::StrCat("; unconfined: ", said.substr(0, said.find('\n')));
        EXPECT_TRUE(absl::StartsWith(said, "ok"))
            << "the control did not succeed unconfined (" << said
            << "): the row would not show the guard's refusal";
      }
      std::string said = out;
      while (!said.empty() && said.back() == '\n') said.pop_back();
      std::cout << "[ ROW  ] " << row.what << ": "
                << absl::StrReplaceAll(said, {{"\n", ", "}}) << control
                << "\n";
    }
  }

  std::string dir_;
  Listener model_, tool_, forbidden_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::vector<std::string> cgroups_;
};

// A root agent through `enter --rollout`: it lands in the rollout's cgroup,
// the rollout's policy judges its connects, and the guard keeps it from
// everything outside, in the host's PID namespace where it can name it all.
TEST_F(EnterRolloutTest, RolloutEntryIsConfinedJudgedAndRecorded) {
  const std::string id = absl::StrCat("enter-root-", getpid());
  const v1::StartRolloutResponse started = StartRollout(id);
  ASSERT_FALSE(started.cgroup_path().empty());
  const std::vector<std::string> enter = {"--rollout", id, "--socket",
                                          Socket()};

  // The agent's own view: its cgroup, its confinement, its egress.
  const std::string probe = NetProbe();
  auto c = Enter(enter,
                 {"/bin/sh", "-c",
                  absl::StrCat(Actor(), " cgroup; grep -E "
                               "'^(NoNewPrivs|Seccomp|CapEff):' "
                               "/proc/self/status; ",
                               probe, " tcp-connect 127.0.0.2 ", model_.port,
                               "; echo model=$?; ", probe,
                               " tcp-connect 127.0.0.4 ", forbidden_.port,
                               "; echo forbidden=$?; ", probe,
                               " tcp-connect 127.0.0.3 ", tool_.port,
                               "; echo tool=$?; ", Actor(), " normal-work ",
                               dir_, "/work")});
  const pid_t entered_pid = c->pid();
  ASSERT_EQ(c->Wait(), 0) << c->out() << c->err() << daemon_->Log();
  const std::string out = c->out();
  EXPECT_THAT(out, HasSubstr(CgroupLine(started.cgroup_path()) + "\n"));
  EXPECT_THAT(out, HasSubstr("NoNewPrivs:\t1\n"));
  EXPECT_THAT(out, HasSubstr("Seccomp:\t2\n"));
  EXPECT_THAT(out, HasSubstr("model=0\n"));
  EXPECT_THAT(out, HasSubstr("forbidden=1\n"));  // EPERM: setup's policy
  EXPECT_THAT(out, HasSubstr("tool=1\n"));       // the tool is agent's
  EXPECT_THAT(out, HasSubstr("\nok\n"));         // its own work

  // The attacks. Victims: a process outside every sandbox, the daemon, the
  // test itself (signal 0 only: harmless if it got through).
  Victim victim(0);
  ASSERT_GE(victim.pidfd(), 0) << strerror(errno);
  const std::string v = absl::StrCat(victim.pid());
  const std::string daemon_pid = absl::StrCat(daemon_->pid());
  const DaemonDirs& d = daemon_->dirs();
  const std::string state = absl::StrCat(d.state(), "/", id, ".state");
  const std::string journal = absl::StrCat(d.records(), "/", id, ".record");
  ASSERT_TRUE(PathExists(state)) << state;
  const PinLayout pins = PinsOf(d.pin_dir);
  ASSERT_TRUE(PathExists(pins.HostMap())) << pins.HostMap();
  const std::string mnt = dir_ + "/mnt";
  ASSERT_EQ(mount("sf", mnt.c_str(), "tmpfs", 0, "size=64k"), 0)
      << strerror(errno);
  const std::string procs = started.cgroup_path() + "/cgroup.procs";
  auto exists = [](std::string path) {
    return std::function<std::string()>(
        [path] { return PathExists(path) ? "" : path + " is gone"; });
  };
  auto daemon_alive = [this]() -> std::string {
    int status;
    return waitpid(daemon_->pid(), &status, WNOHANG) == 0 ? ""
                                                          : "the daemon died";
  };
  const std::string own_cgroup = CgroupLine(started.cgroup_path());
  std::vector<Row> rows;
  rows.push_back(Row("kill -9 <pid> of a process outside", {"kill", v, "9"},
                     "errno 1")
                     .Control({"kill", v, "0"}));
  rows.push_back(Row("kill -9 through a pidfd it was handed",
                     {"pidfd-kill", "0", "9"}, "errno 1")
                     .Control({"pidfd-kill", "0", "0"}));
  rows.push_back(Row("kill -9 through /proc/<pid> (a pidfd)",
                     {"procdir-kill", "/proc/" + v, "9"}, "errno 1")
                     .Control({"procdir-kill", "/proc/" + v, "0"}));
  rows.push_back(Row("kill -9 the daemon", {"kill", daemon_pid, "9"},
                     "errno 1")
                     .Effect(daemon_alive));
  rows.push_back(Row("kill -0 the test that started it (its parent)",
                     {"kill", absl::StrCat(getpid()), "0"}, "errno 1"));
  rows.push_back(Row("strace -p <pid> (PTRACE_ATTACH)", {"ptrace-attach", v},
                     "errno 1"));
  rows.push_back(Row("PTRACE_SEIZE", {"ptrace-seize", v}, "errno 1"));
  rows.push_back(
      Row("process_vm_readv", {"vm-readv", v}, "errno 1"));
  rows.push_back(Row("pidfd_getfd", {"pidfd-getfd", "0", "0"}, "errno 1")
                     .Control({"pidfd-getfd", "0", "0"}));
  rows.push_back(Row("cat /proc/<pid>/environ (root: CAP_PERFMON and "
                     "CAP_SYS_ADMIN dropped)",
                     {"open", "/proc/" + v + "/environ"}, "errno 13")
                     .Control({"open", "/proc/" + v + "/environ"}));
  rows.push_back(Row("open /proc/<pid>/mem", {"open-only", "/proc/" + v + "/mem"},
                     "errno 13")
                     .Control({"open-only", "/proc/" + v + "/mem"}));
  rows.push_back(Row("cat /proc/<daemon>/environ",
                     {"open", "/proc/" + daemon_pid + "/environ"}, "errno 13"));
  rows.push_back(Row("unshare -U", {"unshare", "user"}, "errno 1")
                     .Control({"unshare", "user"}));
  rows.push_back(Row("mount -t tmpfs (the host's mount namespace: enter "
                     "makes none)",
                     {"mount-tmpfs", dir_ + "/work"}, "errno 1")
                     .Also("mountpoint no"));
  rows.push_back(Row("umount a mount of the host's", {"umount", mnt},
                     "errno 1")
                     .Also("mountpoint yes"));
  rows.push_back(Row("bpf(BPF_MAP_CREATE)", {"bpf-map-create"}, "errno 1"));
  rows.push_back(Row("echo $$ > the root cgroup's cgroup.procs",
                     {"join-cgroup", *FindCgroup2Mount()}, "errno 13")
                     .Also(own_cgroup));
  rows.push_back(Row("echo $$ > the daemon's cgroup parent's cgroup.procs",
                     {"join-cgroup", d.cgroups}, "errno 13")
                     .Also(own_cgroup));
  rows.push_back(Row("clone3(CLONE_INTO_CGROUP) out", {"clone-into-cgroup",
                     *FindCgroup2Mount()}, "errno 38"));
  rows.push_back(Row("cat the rollout's state file", {"open", state},
                     "errno 13"));
  rows.push_back(Row("rm the rollout's state file", {"unlink", state},
                     "errno 13")
                     .Effect(exists(state)));
  rows.push_back(Row("append to its own record", {"write", journal, "x"},
                     "errno 13"));
  rows.push_back(Row("rm a pin of the daemon's", {"unlink", pins.HostMap()},
                     "errno 13")
                     .Effect(exists(pins.HostMap())));
  rows.push_back(Row("bpf(BPF_OBJ_GET) of a pin", {"bpf-obj-get",
                     pins.HostMap()}, "errno 1"));
  rows.push_back(Row("io_uring_setup (setup's policy denies it)",
                     {"uring-setup"}, "errno 1"));
  rows.push_back(Row("echo $$ > its own cgroup.procs (the cgroup's files "
                     "are cgroupfs: read-only)",
                     {"write", procs, "0"}, "errno 13"));
  RunRows(rows, enter, 0, victim);
  EXPECT_TRUE(daemon_alive().empty());

  // A second enter from inside the first: the kernel refuses its connect
  // to sandfence's socket (Unix sockets checked, the default), and the
  // record gets no entry of it.
  int nested = 0;
  if (HostChecksUnixSockets().ok()) {
    auto inner = Enter(enter, {SandfenceBinary(), "enter", "--rollout", id,
                               "--socket", Socket(), "--", "/bin/true"});
    EXPECT_EQ(inner->Wait(), 77) << inner->out() << inner->err();
    EXPECT_THAT(inner->err(), HasSubstr("refused (not permitted, exit 77)"));
    EXPECT_THAT(inner->err(), HasSubstr("Operation not permitted"));
    EXPECT_THAT(inner->err(), HasSubstr("nothing was entered or started"));
    std::cout << "[ ROW  ] a second enter from inside (Unix checked): "
              << inner->err();
    ++nested;
  }

  // The record names each entry: the pid, the phase, the layer.
  const v1::RolloutRecord rec = End(id);
  EXPECT_TRUE(HasWarning(rec, v1::WARNING_ENTERED,
                         {absl::StrCat("pid ", entered_pid, " entered"),
                          "in phase \"setup\"", "Landlock + seccomp"}))
      << rec.DebugString();
  // The first enter, one per row, the outer of the nested pair; not the
  // inner one.
  EXPECT_EQ(CountWarnings(rec, v1::WARNING_ENTERED),
            1 + static_cast<int>(rows.size()) + nested);
}

// Issue 33 through the daemon: an unprivileged agent entered into a
// rollout tries every way to a host Unix socket run's test tries, and a
// socket family nothing else judges. The daemon holds its socket-family
// filter's listener: it refuses vsock (recorded), connects the agent's own
// paths after checking the socket reached, and no program runs on the
// host's system calls for it (the bind tracker is not attached).
TEST_F(EnterRolloutTest, AnEnteredAgentReachesNoHostSocketOrOtherFamily) {
  SANDFENCE_REQUIRE_HOST(HostChecksUnixSockets());
  char listed_tmpl[] = "/tmp/sf-enter-listed-XXXXXX";
  ASSERT_NE(mkdtemp(listed_tmpl), nullptr);
  ASSERT_EQ(chmod(listed_tmpl, 0755), 0);
  const std::string listed_path = absl::StrCat(listed_tmpl, "/listed.sock");
  const std::string agent_dir = dir_ + "/work";
  ASSERT_EQ(chmod(agent_dir.c_str(), 01777), 0);
  const std::string host_path = agent_dir + "/host.sock";
  const std::string host_abstract =
      absl::StrCat("@sf-enter-attack-", getpid());
  const std::string id = absl::StrCat("enter-unix-", getpid());
  ASSERT_FALSE(StartRollout(id, "LANDLOCK", "",
                            absl::StrCat("unix { allow: \"", listed_path,
                                         "\" }"))
                   .cgroup_path()
                   .empty());
  const PinLayout pins = PinsOf(daemon_->dirs().pin_dir);
  int host_accepted = 0, listed_accepted = 0, abstract_accepted = 0;
  std::string out, err;
  {
    CountingService host(host_path);
    CountingService listed(listed_path);
    CountingService abstract_host(host_abstract);
    const std::string vsock =
        "import socket\n"
        "try:\n"
        "    socket.socket(40, socket.SOCK_STREAM).close(); print('vsock 0')\n"
        "except OSError as e:\n"
        "    print('vsock', e.errno)\n";
    auto c = Enter({"--rollout", id, "--socket", Socket(), "--user",
                    absl::StrCat(kNobody)},
                   {"/bin/sh", "-c",
                    absl::StrCat("/usr/bin/python3 '", SANDFENCE_SOURCE,
                                 "/tests/run/unix_attacks.py' '", agent_dir,
                                 "' '", host_path, "' '", listed_path, "' '",
                                 host_abstract, "' && /usr/bin/python3 -c \"",
                                 vsock, "\"")});
    EXPECT_EQ(c->Wait(), 0) << c->out() << c->err() << daemon_->Log();
    // Once a process entered supervised (and the rollout is still open),
    // nothing of it is on the host's system calls.
    EXPECT_FALSE(PathExists(pins.HostLink("unix_bind")))
        << "the bind tracker is attached for a supervised rollout";
    out = c->out();
    err = c->err();
    host_accepted = host.accepted();
    abstract_accepted = abstract_host.accepted();
    listed_accepted = listed.accepted();
  }
  unlink(listed_path.c_str());
  rmdir(listed_tmpl);
  std::map<std::string, int> got = ParseUnixAttacks(out);
  std::cout << "[ ROW  ] " << absl::StrReplaceAll(out, {{"\n", ", "}})
            << "\n";
  ASSERT_EQ(got.size(), 13u) << out << err << daemon_->Log();
  ExpectUnixAttacksRefused(got);
  EXPECT_EQ(got["vsock"], EPERM) << "a family no hook judges";
  EXPECT_EQ(abstract_accepted, 0);
  EXPECT_EQ(listed_accepted, 1);
  EXPECT_EQ(host_accepted, 0) << "the host's service accepted a connection";

  const v1::RolloutRecord rec = End(id);
  const std::string text = rec.DebugString();
  // The daemon's decisions: the brokered connect, the three swaps refused
  // (each naming the socket it led to), the vsock socket. (The listed name,
  // in the namespace the agent entered from, goes back to the kernel.)
  EXPECT_EQ(rec.loss().supervisor_decided(), 5u) << text;
  EXPECT_THAT(text, HasSubstr("vsock")) << "the family is named";
  int swaps = 0;
  for (const v1::NetAttempt& a : rec.net_attempt()) {
    if (a.reason() ==
        "unix socket outside the sandbox (checked by the supervisor)") {
      EXPECT_THAT(a.reached(), HasSubstr(absl::StrCat(host_path, " (inode ")))
          << a.DebugString();
      swaps += static_cast<int>(a.count());
    }
  }
  EXPECT_EQ(swaps, 3) << text;
  EXPECT_THAT(text, HasSubstr(absl::StrCat(agent_dir, "/own-plain.sock")))
      << "the refused swap is recorded by the name given";
  EXPECT_THAT(daemon_->Log(),
              HasSubstr("an entered process's socket calls are supervised"));
}

// A rollout over a cgroup the daemon did not make may hold processes that
// nothing confined: an entry there is supervised, but the rollout keeps the
// bind tracker (and its abstract names stay checked).
TEST_F(EnterRolloutTest, AnExistingCgroupKeepsTheTrackerAfterAnEntry) {
  SANDFENCE_REQUIRE_HOST(HostChecksUnixSockets());
  const std::string id = absl::StrCat("enter-existing-", getpid());
  const std::string cgroup = MakeCgroup(id);
  ASSERT_FALSE(StartRollout(id, "LANDLOCK", cgroup).cgroup_path().empty());
  auto c = Enter({"--rollout", id, "--socket", Socket()}, {"/bin/true"});
  EXPECT_EQ(c->Wait(), 0) << c->out() << c->err() << daemon_->Log();
  EXPECT_THAT(daemon_->Log(),
              HasSubstr("an entered process's socket calls are supervised"));
  EXPECT_TRUE(PathExists(PinsOf(daemon_->dirs().pin_dir).HostLink("unix_bind")))
      << "the tracker went, for a cgroup not the daemon's own";
  End(id);
}

// A second enter from inside a rollout whose Unix sockets are unchecked:
// the connect reaches the daemon, which refuses every call from a process
// inside a sandbox (its cgroup, read from the peer's credentials).
TEST_F(EnterRolloutTest, DaemonRefusesEnterFromInsideASandbox) {
  const std::string id = absl::StrCat("enter-nested-", getpid());
  ASSERT_FALSE(
      StartRollout(id, "LANDLOCK", "", "unix { mode: UNCHECKED }")
          .cgroup_path()
          .empty());
  const std::vector<std::string> enter = {"--rollout", id, "--socket",
                                          Socket()};
  auto inner = Enter(enter, {SandfenceBinary(), "enter", "--rollout", id,
                             "--socket", Socket(), "--", "/bin/true"});
  EXPECT_EQ(inner->Wait(), 77) << inner->out() << inner->err();
  EXPECT_THAT(inner->err(), HasSubstr("refused (not permitted, exit 77)"));
  EXPECT_THAT(inner->err(), HasSubstr("refuses calls from inside a sandbox"));
  std::cout << "[ ROW  ] a second enter from inside (Unix unchecked): "
            << inner->err();
  // The supervision socket beside the daemon's refuses it as well: a
  // sandboxed root may not hand the daemon a listener of its own.
  const std::string hand_over = absl::StrCat(
      "import socket\n"
      "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
      "s.connect('", Socket(), ".supervise')\n"
      "s.send(b'", id, "')\n"
      "print(s.recv(512).decode())\n");
  auto direct = Enter(enter, {"/usr/bin/python3", "-c", hand_over});
  EXPECT_EQ(direct->Wait(), 0) << direct->out() << direct->err();
  EXPECT_THAT(direct->out(),
              HasSubstr("77 sandfence refuses calls from inside a sandbox"))
      << direct->err();
  EXPECT_THAT(daemon_->Log(), HasSubstr("inside a sandbox"));
  const v1::RolloutRecord rec = End(id);
  // The outer enters (the nested one's and the hand-over's); never the
  // nested ones.
  EXPECT_EQ(CountWarnings(rec, v1::WARNING_ENTERED), 2);
}

// The same as nobody (--user 65534) against a victim of the same UID: where
// nothing but the guard stands between them (the controls succeed).
TEST_F(EnterRolloutTest, NobodyEntryCannotReachItsOwnUser) {
  const std::string id = absl::StrCat("enter-nobody-", getpid());
  ASSERT_FALSE(StartRollout(id).cgroup_path().empty());
  Victim victim(kNobody);
  ASSERT_GE(victim.pidfd(), 0);
  const std::string v = absl::StrCat(victim.pid());
  std::vector<Row> rows;
  rows.push_back(Row("kill -9 <pid> of its own user's process outside",
                     {"kill", v, "9"}, "errno 1")
                     .Control({"kill", v, "0"}));
  rows.push_back(Row("kill -9 through a pidfd it was handed",
                     {"pidfd-kill", "0", "9"}, "errno 1")
                     .Control({"pidfd-kill", "0", "0"}));
  rows.push_back(Row("strace -p <pid>", {"ptrace-attach", v}, "errno 1")
                     .Control({"ptrace-seize", v}));
  rows.push_back(Row("cat /proc/<pid>/environ",
                     {"open", "/proc/" + v + "/environ"}, "errno 13")
                     .Control({"open", "/proc/" + v + "/environ"}));
  rows.push_back(Row("unshare -U", {"unshare", "user"}, "errno 1")
                     .Control({"unshare", "user"}));
  rows.push_back(Row("its own work", {"normal-work", dir_ + "/work"}, "ok"));
  RunRows(rows,
          {"--rollout", id, "--socket", Socket(), "--user",
           absl::StrCat(kNobody)},
          kNobody, victim);
}

// What a phase switch changes for a process already entered (its egress:
// kernel maps, at once) and what it cannot (its confinement, fixed at
// exec: the strictest of the phases from the one it entered in). A process
// entering after the switch gets the later phases' confinement.
TEST_F(EnterRolloutTest, PhaseSwitchChangesEgressNotConfinement) {
  const std::string id = absl::StrCat("enter-phases-", getpid());
  ASSERT_FALSE(StartRollout(id).cgroup_path().empty());
  const std::string probe = NetProbe();
  const std::string go = dir_ + "/work/go";
  const std::string first = dir_ + "/work/first";
  const std::string attempt =
      absl::StrCat(probe, " tcp-connect 127.0.0.3 ", tool_.port,
                   "; echo tool=$?; ", Actor(), " uring-setup; ");
  auto c = Enter({"--rollout", id, "--socket", Socket()},
                 {"/bin/sh", "-c",
                  absl::StrCat(attempt, "touch ", first,
                               "; while [ ! -e ", go,
                               " ]; do sleep 0.05; done; echo after; ",
                               attempt)});
  ASSERT_TRUE(WaitForFile(first)) << c->out() << c->err();
  v1::SetPhaseResponse sw;
  ASSERT_TRUE(daemon_->SetPhase(id, "agent", &sw).ok());
  std::ofstream(go) << "";
  ASSERT_EQ(c->Wait(), 1) << c->out() << c->err();  // the last uring-setup
  const std::string out = c->out();
  const size_t after = out.find("after\n");
  ASSERT_NE(after, std::string::npos) << out;
  // setup: the tool denied, io_uring refused.
  EXPECT_THAT(out.substr(0, after), HasSubstr("tool=1\nerrno 1\n"));
  // agent: the tool reached at once; io_uring still refused (setup's
  // confinement holds for the process's life).
  EXPECT_THAT(out.substr(after), HasSubstr("tool=0\nerrno 1\n"));

  // Entered in agent (the last phase, which allows io_uring): allowed.
  auto later = Enter({"--rollout", id, "--socket", Socket()},
                     {Actor(), "uring-setup"});
  EXPECT_EQ(later->Wait(), 0) << later->out() << later->err();
  EXPECT_EQ(later->out(), "ok\n");
  const v1::RolloutRecord rec = End(id);
  EXPECT_TRUE(HasWarning(rec, v1::WARNING_ENTERED,
                         {"in phase \"agent\"", "(io_uring allowed)"}))
      << rec.DebugString();
}

// --cgroup and in place, with `sandfence enter` and with the static
// sandfence-enter: a rollout over a cgroup the test made; the process lands
// there (or stays), is judged by the rollout's policy and confined. These
// forms do not ask the daemon: nothing is recorded of them.
TEST_F(EnterRolloutTest, CgroupAndInPlaceWithBothBinaries) {
  const std::string cg = MakeCgroup(absl::StrCat("mine-", getpid()));
  const std::string id = absl::StrCat("enter-cgroup-", getpid());
  ASSERT_EQ(StartRollout(id, "LANDLOCK", cg).cgroup_path(), cg);
  const std::string probe = NetProbe();
  const std::string script = absl::StrCat(
      Actor(), " cgroup; grep -E '^Seccomp:' /proc/self/status; ", probe,
      " tcp-connect 127.0.0.2 ", model_.port, "; echo model=$?; ", probe,
      " tcp-connect 127.0.0.4 ", forbidden_.port, "; echo forbidden=$?; ",
      Actor(), " unshare user; ", Actor(), " join-cgroup ",
      *FindCgroup2Mount());
  for (bool static_binary : {false, true}) {
    if (static_binary && StaticEnter().empty()) {
      std::cout << "[ NOTE ] sandfence-enter is not built here: the static "
                   "half is not run\n";
      continue;
    }
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(absl::StrCat(static_binary ? "sandfence-enter" : "enter",
                                in_place ? " in place" : " --cgroup"));
      ChildOptions opts;
      std::vector<std::string> args;
      if (in_place) {
        opts.join_cgroup = cg;  // a container's entrypoint starts there
      } else {
        args = {"--cgroup", cg};
      }
      auto c = Enter(args, {"/bin/sh", "-c", script}, opts, static_binary);
      EXPECT_EQ(c->Wait(), 1) << c->out() << c->err();  // join-cgroup's
      const std::string out = c->out();
      EXPECT_THAT(out, HasSubstr(CgroupLine(cg) + "\n"));
      EXPECT_THAT(out, HasSubstr("Seccomp:\t2\n"));
      EXPECT_THAT(out, HasSubstr("model=0\n"));
      EXPECT_THAT(out, HasSubstr("forbidden=1\n"));
      EXPECT_THAT(out, HasSubstr("errno 1\nuserns "));
      EXPECT_THAT(out, HasSubstr("errno 13\n" + CgroupLine(cg) + "\n"));
    }
  }
  const v1::RolloutRecord rec = End(id);
  EXPECT_EQ(CountWarnings(rec, v1::WARNING_ENTERED), 0);
  bool denied = false;
  for (const v1::NetAttempt& a : rec.net_attempt()) {
    denied |= a.verdict() == v1::VERDICT_DENY &&
              absl::StrContains(a.address(), "127.0.0.4");
  }
  EXPECT_TRUE(denied) << "the forbidden connects are not in the record";
}

// A rollout whose guard is auto (or signal) has a BPF guard on its cgroup
// as well: on a host without BPF LSM that is the signal enforcer, and an
// entered process gets both layers. Landlock refuses the attempt (the
// victim lives) and the signal enforcer kills the offender for it, as it
// would without enter; with lsm the LSM refuses first (EPERM). A rollout
// that wants refusals and no kills asks for guard LANDLOCK.
TEST_F(EnterRolloutTest, AutoGuardStacksWithTheRolloutsBpfGuard) {
  grpc::ClientContext ctx;
  v1::HealthResponse health;
  ASSERT_TRUE(daemon_->stub()->Health(&ctx, {}, &health).ok());
  const bool signal = absl::StartsWith(health.guard(), "signal");
  const bool lsm = absl::StartsWith(health.guard(), "lsm");
  if (!signal && !lsm) {
    GTEST_SKIP() << "no BPF guard for daemon rollouts here: "
                 << health.guard();
  }
  const std::string id = absl::StrCat("enter-auto-", getpid());
  ASSERT_FALSE(StartRollout(id, "AUTO").cgroup_path().empty());
  Victim victim(0);
  auto c = Enter({"--rollout", id, "--socket", Socket()},
                 {Actor(), "kill", absl::StrCat(victim.pid()), "9"});
  const int status = c->Wait();
  EXPECT_TRUE(victim.Alive());
  if (signal) {
    EXPECT_EQ(status, 128 + SIGKILL) << c->out() << c->err();
  } else {
    EXPECT_EQ(status, 1) << c->out() << c->err();
    EXPECT_EQ(c->out(), "errno 1\n");
  }
  const v1::RolloutRecord rec = End(id);
  EXPECT_TRUE(HasWarning(rec, v1::WARNING_ENTERED, {"Landlock + seccomp"}));
  std::cout << "[ ROW  ] kill -9 outside, rollout guard auto ("
            << health.guard().substr(0, health.guard().find(' '))
            << "): exit " << status << ", victim "
            << (victim.Alive() ? "alive" : "dead") << ", "
            << rec.guard_event_size() << " guard event(s)\n";
}

// What is refused, before anything changes, with the exit status a caller
// acts on and words that name the cause.
TEST_F(EnterRolloutTest, Refusals) {
  const std::string off = absl::StrCat("enter-off-", getpid());
  ASSERT_FALSE(StartRollout(off, "OFF").cgroup_path().empty());
  const std::string on = absl::StrCat("enter-on-", getpid());
  ASSERT_FALSE(StartRollout(on).cgroup_path().empty());
  const std::string ran = dir_ + "/work/ran";
  const std::vector<std::string> touch = {"/usr/bin/touch", ran};
  struct Case {
    std::string what;
    std::vector<std::string> args;
    bool static_binary;
    int status;
    std::vector<std::string> says;
  };
  const std::string missing = "no-such-command-here";
  const std::string nope = absl::StrCat("no-such-rollout-", getpid());
  std::vector<Case> cases = {
      {"an unknown rollout",
       {"--rollout", nope, "--socket", Socket()},
       false,
       78,
       {"refused (rejected, exit 78)", absl::StrCat("\"", nope, "\"")}},
      {"a rollout with its guard off",
       {"--rollout", off, "--socket", Socket()},
       false,
       78,
       {"refused (rejected, exit 78)", "has its process guard off"}},
      {"no daemon",
       {"--rollout", off, "--socket", dir_ + "/no-daemon.sock"},
       false,
       75,
       {"unavailable (retry may help, exit 75)", "no sandfence daemon answers",
        "nothing was entered or started"}},
      {"a command that is not there (before the daemon records an entry)",
       {"--rollout", on, "--socket", Socket()},
       false,
       78,
       {"refused (rejected, exit 78)", "not found"}},
      {"a cgroup that is not there",
       {"--cgroup", dir_ + "/not-a-cgroup"},
       false,
       78,
       {"refused (rejected, exit 78)", "not-a-cgroup"}},
      {"--rollout with --cgroup",
       {"--rollout", off, "--cgroup", "/sys/fs/cgroup"},
       false,
       64,
       {"usage: --rollout and --cgroup exclude each other"}},
      {"a relative cgroup",
       {"--cgroup", "sandbox"},
       false,
       64,
       {"--cgroup \"sandbox\": expected an absolute path"}},
      {"a misspelled flag", {"--rollot", off}, false, 64,
       {"unknown flag \"--rollot\""}},
      {"--allow-io-uring with --rollout",
       {"--rollout", off, "--allow-io-uring"},
       false,
       64,
       {"--allow-io-uring and --deny-ptrace come from the rollout's policy"}},
      {"an unknown user", {"--user", "no-such-user-here"}, false, 64,
       {"--user \"no-such-user-here\": no user \"no-such-user-here\""}},
      {"--rollout to the static binary",
       {"--rollout", off},
       true,
       64,
       {"sandfence-enter cannot ask the daemon (--rollout)"}},
      {"an unknown user (static: /etc/passwd)",
       {"--user", "no-such-user-here"},
       true,
       64,
       {"no user \"no-such-user-here\" in /etc/passwd"}},
      {"a misspelled flag (static)", {"--cgroupp", "/x"}, true, 64,
       {"unknown flag \"--cgroupp\""}},
  };
  for (const Case& c : cases) {
    if (c.static_binary && StaticEnter().empty()) continue;
    SCOPED_TRACE(c.what);
    auto child = Enter(c.args,
                       absl::StartsWith(c.what, "a command that is not")
                           ? std::vector<std::string>{missing}
                           : touch,
                       {}, c.static_binary);
    EXPECT_EQ(child->Wait(), c.status) << child->err();
    for (const std::string& s : c.says) {
      EXPECT_THAT(child->err(), HasSubstr(s));
    }
    EXPECT_FALSE(PathExists(ran)) << "the command ran";
    unlink(ran.c_str());
    std::cout << "[ REFUSED ] " << c.what << ": exit " << c.status << ": "
              << child->err().substr(0, child->err().find('\n')) << "\n";
  }
  // No command at all.
  auto none = std::make_unique<Child>(
      std::vector<std::string>{SandfenceBinary(), "enter", "--rollout", off},
      Out());
  EXPECT_EQ(none->Wait(), 64);
  EXPECT_THAT(none->err(), HasSubstr("no command: put it after \"--\""));
  auto bare = std::make_unique<Child>(
      std::vector<std::string>{SandfenceBinary(), "enter", "--user"}, Out());
  EXPECT_EQ(bare->Wait(), 64);
  EXPECT_THAT(bare->err(), HasSubstr("--user needs a value (UID[:GID])"));
  // Not root, for what needs root.
  ChildOptions nobody;
  nobody.uid = kNobody;
  auto not_root = Enter({"--rollout", off, "--socket", Socket()}, touch,
                        nobody);
  EXPECT_EQ(not_root->Wait(), 77) << not_root->err();
  EXPECT_THAT(not_root->err(), HasSubstr("needs root for --rollout"));
  EXPECT_FALSE(PathExists(ran));
  // The refused enters left no entry in either record.
  EXPECT_EQ(CountWarnings(End(off), v1::WARNING_ENTERED), 0);
  EXPECT_EQ(CountWarnings(End(on), v1::WARNING_ENTERED), 0);
}

}  // namespace
}  // namespace sandfence::testing
