// `sandfence run` with the default process guard where BPF LSM cannot load:
// Landlock + seccomp + no_new_privs on the command (issue 32), attacked as
// an agent would. Each row is something a user would try (`kill -9`,
// `echo $$ > .../cgroup.procs`, `unshare -U`, `mount -t tmpfs`, `rm` of a
// pin, `echo > /proc/sys/kernel/core_pattern`, ...), done by
// sf_escape_actor with raw system calls; each asserts the errno the kernel
// gave AND that nothing happened (the victim alive, the cgroup unchanged,
// the pin there, the mount absent). A root row set and a `--user 65534` one
// (whose victim has the same UID, and whose controls show that the same
// calls succeed unconfined). Then what must keep working: fork/exec, files,
// the command's own /proc, an allowed loopback connect.
//
// `run` gives the command a PID namespace and a mount namespace of its
// own, so it cannot name sandfence or anything outside, and a procfs of the
// host's mounted elsewhere is detached in its namespace (one row shows
// that): the rows reach outside through what an agent could be handed, on
// its stdin: a pidfd of an outside process, or a directory fd of the
// host's /proc (as a framework that leaks one would; /proc/self/fd/0/...
// then walks the host's procfs, and its status files lead the agent to
// `sandfence run`'s own pid).
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/cgroup.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "host/build_id.h"
#include "host/host_state.h"
#include "host/pin_layout.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/egress/egress_fixture.h"
#include "tests/run/run_fixture.h"

namespace sandfence::testing {
namespace {

constexpr int kNobody = 65534;

std::string Actor() {
  const char* env = getenv("SANDFENCE_ESCAPE_ACTOR");
  return env ? env : SANDFENCE_ESCAPE_ACTOR_PATH;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

// `sandfence ARGS...` with `stdin_fd` as its (and so its command's) stdin.
Result SandfenceWithStdin(std::vector<std::string> args, int stdin_fd) {
  args = WithUnixForThisKernel(std::move(args));
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    // A session of its own: nothing it does reaches the test's group.
    setsid();
    if (stdin_fd >= 0) dup2(stdin_fd, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    std::vector<char*> argv;
    std::string bin = SANDFENCE_BIN;
    argv.push_back(bin.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(250);
  }
  close(out[1]);
  close(err[1]);
  Result r;
  r.out = ReadAll(out[0]);
  r.err = ReadAll(err[0]);
  close(out[0]);
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.pid = pid;
  return r;
}

// The actor run unconfined, outside every sandbox, as `uid`, with
// `stdin_fd` as stdin: the control of a row (the same call succeeds when
// nothing refuses it). Its stdout.
std::string Unconfined(const std::vector<std::string>& args, int uid,
                       int stdin_fd) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    setsid();
    if (stdin_fd >= 0) dup2(stdin_fd, 0);
    dup2(out[1], 1);
    if (uid != 0 && (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) ||
                     setresuid(uid, uid, uid))) {
      _exit(251);
    }
    std::vector<std::string> argv_s = {Actor()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(250);
  }
  close(out[1]);
  std::string s = ReadAll(out[0]);
  close(out[0]);
  waitpid(pid, nullptr, 0);
  return s;
}

// A process outside every sandbox that only waits: the target of the
// signal, ptrace and /proc rows. Killed and reaped at the end.
class Victim {
 public:
  explicit Victim(int uid) {
    pid_ = fork();
    if (pid_ == 0) {
      if (uid != 0 && (setgroups(0, nullptr) != 0 ||
                       setresgid(uid, uid, uid) || setresuid(uid, uid, uid))) {
        _exit(1);
      }
      // An exec after the change of credentials: a process that changed
      // them without exec is not dumpable (its /proc files are root's),
      // and would refuse a same-UID reader for a reason of its own.
      execl("/bin/sleep", "sleep", "infinity", static_cast<char*>(nullptr));
      _exit(127);
    }
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  }
  ~Victim() {
    if (pidfd_ >= 0) close(pidfd_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_; }
  // Not reaped, not a zombie: still running.
  bool Alive() const {
    int status;
    if (waitpid(pid_, &status, WNOHANG) != 0) return false;
    const std::string stat = ReadFile(absl::StrCat("/proc/", pid_, "/stat"));
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() &&
           stat[paren + 2] != 'Z';
  }

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
};

// The host's /proc as the command sees it through a directory fd on its
// stdin (Row::proc_on_stdin).
constexpr char kHandedProc[] = "/proc/self/fd/0";

// A procfs of the host's PID namespace mounted where the sandbox would see
// it, as a container binding the host's /proc would have: `run` detaches it
// in the command's mount namespace. Not under /tmp: for processes that get
// no mount namespace of their own (`enter`), every directory on the way to
// a file system the guard keeps read-only loses the right to create
// entries directly in it, /tmp included, while this test runs.
class HostProc {
 public:
  HostProc() : dir_(absl::StrCat("/run/sf-run-guard-hostproc-", getpid())) {
    mkdir(dir_.c_str(), 0755);
    if (mount("proc", dir_.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
      error_ = absl::StrCat("mount proc at ", dir_, ": ", strerror(errno));
    }
  }
  ~HostProc() {
    if (error_.empty()) umount2(dir_.c_str(), MNT_DETACH);
    rmdir(dir_.c_str());
  }
  const std::string& path() const { return dir_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_, error_;
};

// One attempt. {RUNPID} in `also` is replaced by `sandfence run`'s pid.
struct Row {
  std::string what;                // as a user would say it
  std::vector<std::string> actor;  // sf_escape_actor's arguments
  std::string expect;              // "errno 13"
  std::vector<std::string> also;   // more lines of the actor's output
  // What the attempt changed outside, "" when nothing.
  std::function<std::string()> effect;
  // The same call unconfined, outside any sandbox (empty: no control). A
  // control that does not succeed makes the row prove less: said, not
  // failed.
  std::vector<std::string> control;
  // stdin: a directory fd of the host's /proc instead of the victim's
  // pidfd.
  bool proc_on_stdin = false;

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
  Row&& ProcOnStdin() && {
    proc_on_stdin = true;
    return std::move(*this);
  }
};

class RunGuardLandlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    REQUIRE_KERNEL_FOR_RUN();
    absl::StatusOr<std::string> mount = FindCgroup2Mount();
    ASSERT_TRUE(mount.ok()) << mount.status();
    cgroup2_ = *mount;
    scratch_ = absl::StrCat("/tmp/sf-run-guard-", getpid());
    ASSERT_EQ(mkdir(scratch_.c_str(), 0755), 0) << strerror(errno);
    for (const char* d : {"/mnt", "/work"}) {
      ASSERT_EQ(mkdir((scratch_ + d).c_str(), 0777), 0);
      chmod((scratch_ + d).c_str(), 0777);  // for nobody too
    }
    host_proc_.reset(open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(host_proc_) << strerror(errno);
    other_cgroup_ = absl::StrCat(cgroup2_, "/sf-run-guard-other-", getpid());
    ASSERT_EQ(mkdir(other_cgroup_.c_str(), 0755), 0) << strerror(errno);
    // The default guard on this host: the rows' errnos are Landlock's and
    // seccomp's. Where BPF LSM runs the label is lsm+landlock and the
    // errnos of some rows are the LSM's (tests/guard).
    Result probe = Sandfence({"run", "--network-access", "inherit", "--",
                              "/bin/true"});
    ASSERT_EQ(probe.status, 0) << probe.err;
    if (!absl::StrContains(probe.err, "process guard: landlock\n")) {
      GTEST_SKIP() << "the default process guard here is not landlock "
                      "alone:\n"
                   << probe.err;
    }
    // This build's pinned set: `run` above loaded (or reused) it.
    pins_ = PinLayout(PinLayout::SetDir(kDefaultPinRoot, BpfBuildId()));
    ASSERT_TRUE(Exists(pins_.HostMap())) << pins_.HostMap();
  }

  void TearDown() override {
    if (!other_cgroup_.empty()) rmdir(other_cgroup_.c_str());
    if (!scratch_.empty()) {
      umount2((scratch_ + "/mnt").c_str(), MNT_DETACH);  // never mounted
      rmdir((scratch_ + "/mnt").c_str());
      rmdir((scratch_ + "/work").c_str());
      rmdir(scratch_.c_str());
    }
  }

  // Every row under `sandfence run` (default guard), as uid (0: root).
  void RunRows(const std::vector<Row>& rows, int uid, const Victim& victim) {
    for (const Row& row : rows) {
      SCOPED_TRACE(absl::StrCat(row.what, " (", uid == 0 ? "root" : "nobody",
                                ")"));
      std::vector<std::string> args = {"run", "--network-access", "inherit"};
      if (uid != 0) {
        args.insert(args.end(), {"--user", absl::StrCat(uid)});
      }
      args.push_back("--");
      args.push_back(Actor());
      args.insert(args.end(), row.actor.begin(), row.actor.end());
      const int in = row.proc_on_stdin ? host_proc_.get() : victim.pidfd();
      Result r = SandfenceWithStdin(args, in);
      EXPECT_TRUE(absl::StrContains(r.err, "process guard: landlock\n"))
          << r.err;
      EXPECT_TRUE(absl::StrContains(r.out, row.expect + "\n"))
          << "expected " << row.expect << ", got:\n"
          << r.out << r.err;
      // The actor's own exit status, passed through: `run` itself lived.
      EXPECT_EQ(r.status, absl::StartsWith(row.expect, "ok") ? 0 : 1)
          << r.out << r.err;
      for (const std::string& line : row.also) {
        const std::string want =
            absl::StrReplaceAll(line, {{"{RUNPID}", absl::StrCat(r.pid)}});
        EXPECT_TRUE(absl::StrContains(r.out, want + "\n"))
            << "expected \"" << want << "\" in:\n"
            << r.out;
      }
      if (row.effect) {
        EXPECT_EQ(row.effect(), "") << r.out;
      }
      EXPECT_TRUE(victim.Alive()) << "the victim died: " << r.out;
      std::string control;
      if (!row.control.empty()) {
        const std::string c = Unconfined(row.control, uid, in);
        control = absl::StrCat("; unconfined: ", c.substr(0, c.find('\n')));
        if (!absl::StartsWith(c, "ok")) {
          std::cout << "[ NOTE ] control of \"" << row.what << "\" as uid "
                    << uid << " is refused unconfined too (" << c
                    << "): the row shows the refusal, not that the guard "
                       "made it\n";
        }
      }
      std::string said = r.out;
      while (!said.empty() && said.back() == '\n') said.pop_back();
      std::cout << "[ ROW  ] " << row.what << ": "
                << absl::StrReplaceAll(said, {{"\n", ", "}}) << control
                << "\n";
      ++rows_run_;
    }
  }

  // The rows both users share; `victim` is outside every sandbox and has
  // the user's UID.
  // mounted: a procfs of the host's mounted where the command would see it.
  std::vector<Row> CommonRows(const Victim& victim,
                              const std::string& mounted) {
    const std::string proc = kHandedProc;
    const std::string vpid = absl::StrCat(victim.pid());
    const std::string core = ReadFile("/proc/sys/kernel/core_pattern");
    const std::string core_value = core.substr(0, core.find('\n'));
    const std::string pin = pins_.HostMap();
    const std::string mnt = scratch_ + "/mnt";
    const std::string other_procs = other_cgroup_ + "/cgroup.procs";
    auto no_member = [other_procs] {
      const std::string procs = ReadFile(other_procs);
      return procs.empty() ? "" : "another cgroup gained: " + procs;
    };
    auto pin_there = [pin] {
      return Exists(pin) ? "" : std::string("the pin is gone: ") + pin;
    };
    auto core_same = [core] {
      const std::string now = ReadFile("/proc/sys/kernel/core_pattern");
      return now == core ? "" : "core_pattern is now " + now;
    };
    std::vector<Row> rows;
    // Processes outside
    // pidfd_send_signal to a process outside the caller's PID namespace
    // is EINVAL before any LSM is asked: run's namespace refuses these two
    // first (tests/daemon/enter_rollout_test.cc, in the host's PID
    // namespace, shows Landlock's EPERM).
    rows.push_back(Row("kill -9 an outside process through a pidfd it was "
                       "handed (pidfd_send_signal)",
                       {"pidfd-kill", "0", "9"}, "errno 22")
                       .Control({"pidfd-kill", "0", "0"}));
    rows.push_back(
        Row("kill -9 an outside process by /proc/<pid> of a handed host "
            "/proc fd",
            {"procdir-kill", absl::StrCat(proc, "/", vpid), "9"}, "errno 22")
            .Control({"procdir-kill", absl::StrCat(proc, "/", vpid), "0"})
            .ProcOnStdin());
    rows.push_back(Row("pidfd_getfd: take a descriptor of an outside process",
                       {"pidfd-getfd", "0", "0"}, "errno 1")
                       .Control({"pidfd-getfd", "0", "0"}));
    rows.push_back(
        Row("cat /proc/<pid>/environ of an outside process (handed /proc)",
            {"open", absl::StrCat(proc, "/", vpid, "/environ")}, "errno 13")
            .Control({"open", absl::StrCat(proc, "/", vpid, "/environ")})
            .ProcOnStdin());
    rows.push_back(
        Row("open /proc/<pid>/mem of an outside process (handed /proc)",
            {"open-only", absl::StrCat(proc, "/", vpid, "/mem")}, "errno 13")
            .Control({"open-only", absl::StrCat(proc, "/", vpid, "/mem")})
            .ProcOnStdin());
    // A procfs of the host's mounted outside /proc is detached in the
    // command's mount namespace: not there at all.
    rows.push_back(
        Row("cat <a host procfs mounted elsewhere>/<pid>/environ",
            {"open", absl::StrCat(mounted, "/", vpid, "/environ")}, "errno 2")
            .Control({"open", absl::StrCat(mounted, "/", vpid, "/environ")}));
    rows.push_back(Row("kill -9 1: its init, sandfence's process",
                       {"kill", "1", "9"}, "errno 1"));
    rows.push_back(Row("strace -p 1: ptrace its init, sandfence's process",
                       {"ptrace-attach", "1"}, "errno 1"));
    // Its cgroup
    rows.push_back(Row("echo $$ > the parent cgroup's cgroup.procs "
                       "(/sandfence)",
                       {"join-cgroup", cgroup2_ + "/sandfence"}, "errno 13")
                       .Also("cgroup /sandfence/run-{RUNPID}"));
    rows.push_back(Row("echo $$ > the root cgroup's cgroup.procs",
                       {"join-cgroup", cgroup2_}, "errno 13")
                       .Also("cgroup /sandfence/run-{RUNPID}"));
    rows.push_back(Row("echo $$ > another cgroup's cgroup.procs",
                       {"join-cgroup", other_cgroup_}, "errno 13")
                       .Also("cgroup /sandfence/run-{RUNPID}")
                       .Effect(no_member));
    rows.push_back(Row("clone3(CLONE_INTO_CGROUP) into another cgroup "
                       "(ENOSYS: libc falls back to clone)",
                       {"clone-into-cgroup", other_cgroup_}, "errno 38")
                       .Effect(no_member));
    // Namespaces, mounts
    rows.push_back(Row("unshare -U: a user namespace (where it would be "
                       "root again)",
                       {"unshare", "user"}, "errno 1")
                       .Also(UserNs())
                       .Control({"unshare", "user"}));
    rows.push_back(Row("clone(CLONE_NEWUSER)", {"clone-newuser"}, "errno 1")
                       .Also(UserNs()));
    rows.push_back(
        Row("unshare -m: a mount namespace", {"unshare", "mnt"}, "errno 1"));
    rows.push_back(Row("unshare --cgroup: a cgroup namespace",
                       {"unshare", "cgroup"}, "errno 1"));
    rows.push_back(Row("mount -t tmpfs", {"mount-tmpfs", mnt}, "errno 1")
                       .Also("mountpoint no"));
    rows.push_back(
        Row("mount --bind /tmp", {"mount-bind", "/tmp", mnt}, "errno 1")
            .Also("mountpoint no"));
    rows.push_back(Row("fsopen(\"tmpfs\") (the new mount API)",
                       {"fsopen", "tmpfs"}, "errno 1"));
    rows.push_back(Row("umount /proc (its own PID namespace's)",
                       {"umount-proc"}, "errno 1")
                       .Also("proc mounted"));
    // bpf, sandfence's pins
    rows.push_back(Row("bpf(BPF_MAP_CREATE)", {"bpf-map-create"}, "errno 1"));
    rows.push_back(Row("bpf(BPF_OBJ_GET) of sandfence's host map pin",
                       {"bpf-obj-get", pin}, "errno 1"));
    // run detaches every bpffs in the command's mount namespace: the pins
    // are not there to reach (ENOENT), and stay on the host.
    rows.push_back(Row("cat a pin under /sys/fs/bpf/sandfence", {"open", pin},
                       "errno 2"));
    rows.push_back(Row("rm a pin under /sys/fs/bpf/sandfence",
                       {"unlink", pin}, "errno 2")
                       .Effect(pin_there));
    // (No dot in the new name: bpffs refuses names with one, EPERM,
    // before any LSM is asked.)
    rows.push_back(Row("mv a pin under /sys/fs/bpf/sandfence",
                       {"mv", pin, pin + "_moved"}, "errno 2")
                       .Effect(pin_there));
    rows.push_back(Row("rmdir the links directory of the pinned set",
                       {"rmdir", pins_.LinksDir()}, "errno 2")
                       .Effect([this] {
                         return Exists(pins_.LinksDir()) ? ""
                                                         : "links/ is gone";
                       }));
    rows.push_back(Row("mkdir under /sys/fs/bpf/sandfence",
                       {"mkdir", absl::StrCat(kDefaultPinRoot, "/mine")},
                       "errno 2"));
    // /proc/sys, /sys
    rows.push_back(
        Row("echo > /proc/sys/kernel/core_pattern (its current value)",
            {"write", "/proc/sys/kernel/core_pattern", core_value}, "errno 13")
            .Effect(core_same));
    if (Exists("/sys/kernel/mm/ksm/run")) {
      const std::string ksm = ReadFile("/sys/kernel/mm/ksm/run");
      rows.push_back(Row("echo > /sys/kernel/mm/ksm/run (its current value)",
                         {"write", "/sys/kernel/mm/ksm/run",
                          ksm.substr(0, ksm.find('\n'))},
                         "errno 13")
                         .Effect([ksm] {
                           return ReadFile("/sys/kernel/mm/ksm/run") == ksm
                                      ? ""
                                      : "ksm/run changed";
                         }));
    }
    // Still allowed: the command's own work.
    rows.push_back(
        Row("fork/exec, a file in a directory of its own, its own /proc/self "
            "files",
            {"normal-work", scratch_ + "/work"}, "ok"));
    return rows;
  }

  static std::string UserNs() {
    char target[256] = {};
    const ssize_t n =
        readlink("/proc/self/ns/user", target, sizeof(target) - 1);
    return absl::StrCat("userns ", n > 0 ? target : "?");
  }

  std::string cgroup2_, scratch_, other_cgroup_;
  UniqueFd host_proc_;  // the host's /proc, handed to some rows on stdin
  PinLayout pins_;
  int rows_run_ = 0;
};

// A root command (uid 0, what `run` leaves it: CAP_KILL, CAP_DAC_OVERRIDE,
// CAP_CHOWN, ...) against everything outside its sandbox.
TEST_F(RunGuardLandlockTest, RootCommandStaysInside) {
  Victim victim(0);
  ASSERT_GE(victim.pidfd(), 0) << strerror(errno);
  HostProc proc;
  ASSERT_EQ(proc.error(), "");
  std::vector<Row> rows = CommonRows(victim, proc.path());
  // sandfence itself: found through the handed host /proc (the status
  // files any process may read: the actor's parent is run's init, its
  // parent run), then signalled (EINVAL: outside the command's PID
  // namespace, as above) and read.
  rows.push_back(Row("kill -9 `sandfence run`, found through a handed host "
                     "/proc",
                     {"ancestor-kill", kHandedProc, "2", "9"}, "errno 22")
                     .Also("target {RUNPID}")
                     .ProcOnStdin());
  rows.push_back(Row("cat /proc/<run's pid>/environ through a handed host "
                     "/proc",
                     {"ancestor-open", kHandedProc, "2", "environ"},
                     "errno 13")
                     .Also("target {RUNPID}")
                     .ProcOnStdin());
  RunRows(rows, 0, victim);
  std::cout << "[ ROWS ] " << rows_run_ << " attempts as root\n";
}

// The same as nobody, against a victim of the same UID (where only the
// guard stands between them: a same-UID process may signal and read
// another's /proc files, and make a user namespace, unconfined).
TEST_F(RunGuardLandlockTest, NobodyCommandStaysInside) {
  Victim victim(kNobody);
  ASSERT_GE(victim.pidfd(), 0) << strerror(errno);
  HostProc proc;
  ASSERT_EQ(proc.error(), "");
  RunRows(CommonRows(victim, proc.path()), kNobody, victim);
  std::cout << "[ ROWS ] " << rows_run_ << " attempts as uid " << kNobody
            << "\n";
}

// The command's ordinary work goes on under the guard: it reaches the
// model server its policy allows, and nothing else (the egress hooks).
TEST_F(RunGuardLandlockTest, AllowedLoopbackConnectStillWorks) {
  Listener model = Listen("127.0.0.2");
  Listener other = Listen("127.0.0.4");
  const std::string probe = SANDFENCE_NET_PROBE_PATH;
  for (int uid : {0, kNobody}) {
    SCOPED_TRACE(absl::StrCat("uid ", uid));
    std::vector<std::string> args = {
        "run", "--network-access", "model_only", "--model",
        absl::StrCat("http://127.0.0.2:", model.port, "/v1")};
    if (uid != 0) args.insert(args.end(), {"--user", absl::StrCat(uid)});
    args.insert(args.end(),
                {"--", "/bin/sh", "-c",
                 absl::StrCat(probe, " tcp-connect 127.0.0.2 ", model.port,
                              "; echo model=$?; ", probe,
                              " tcp-connect 127.0.0.4 ", other.port,
                              "; echo other=$?; grep Seccomp: /proc/self/status; ",
                              Actor(), " normal-work ", scratch_, "/work")});
    Result r = Sandfence(args);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "process guard: landlock\n"))
        << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, "model=0\n")) << r.out;
    EXPECT_TRUE(absl::StrContains(r.out, "other=1\n")) << r.out;  // EPERM
    EXPECT_TRUE(absl::StrContains(r.out, "Seccomp:\t2\n")) << r.out;
    EXPECT_TRUE(absl::StrContains(r.out, "ok\n")) << r.out;
  }
}

}  // namespace
}  // namespace sandfence::testing
