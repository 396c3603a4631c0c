// `sandfence run` out of its command's reach, tried as the agent would:
// the command kills `run` (issue 12, E1) with the guard on and off; `run`
// is SIGKILLed from outside with a grandchild running (issue 13, item 7);
// ten concurrent runs share one process guard (issue 13, item 6).
// Loopback only: the listeners are the test's own.
#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/cgroup.h"
#include "common/unique_fd.h"
#include "egress/spawn.h"
#include "gtest/gtest.h"
#include "host/bpf_lsm.h"
#include "host/build_id.h"
#include "host/host_state.h"
#include "host/pin_layout.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/egress/egress_fixture.h"
#include "tests/run/run_fixture.h"

namespace sandfence::testing {
namespace {

// A guard this host can run (auto picks it), or the reason it cannot.
#define REQUIRE_A_GUARD()                                                   \
  do {                                                                      \
    if (!HostKernelRunsLsmEnforcer().ok() &&                                \
        !HostKernelRunsSignalEnforcer().ok()) {                             \
      GTEST_SKIP() << "no process guard on this kernel: lsm: "              \
                   << HostKernelRunsLsmEnforcer().message() << "; signal: " \
                   << HostKernelRunsSignalEnforcer().message();             \
    }                                                                       \
  } while (0)

// Whether anything connected to the listener (a connection the kernel
// completed waits in the accept queue even if the peer closed it since).
bool GotAConnection(const Listener& l) {
  int flags = fcntl(l.tcp.get(), F_GETFL);
  fcntl(l.tcp.get(), F_SETFL, flags | O_NONBLOCK);
  int fd = accept4(l.tcp.get(), nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return true;
  }
  return false;
}

std::string TempPath(const std::string& what) {
  return absl::StrCat("/tmp/sandfence-reach-", getpid(), "-", what);
}

// A fresh path: whatever was there is removed.
std::string Temp(const std::string& what) {
  std::string p = TempPath(what);
  unlink(p.c_str());
  return p;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string SandboxParent() {
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  return mount.ok() ? *mount + "/sandfence" : "";
}

std::vector<pid_t> CgroupProcs(const std::string& cgroup) {
  std::vector<pid_t> pids;
  std::ifstream in(cgroup + "/cgroup.procs");
  pid_t p;
  while (in >> p) pids.push_back(p);
  return pids;
}

// Waits until the process behind pidfd has exited.
bool Exits(int pidfd, int timeout_ms) {
  pollfd p = {pidfd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1;
}

class RunReachTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    model_ = Listen("127.0.0.2");
    forbidden_ = Listen("127.0.0.4");
    model_url_ = absl::StrCat("http://127.0.0.2:", model_.port, "/v1");
  }

  // E1 as the issue gives it, then the same with `run`'s real pid (which
  // the test hands the command through a file once it knows it).
  Result KillRunAttack(const std::string& guard) {
    const std::string pidfile = Temp("runpid");
    const std::string script =
        absl::StrCat("( sleep 1; echo x >/dev/tcp/127.0.0.4/", forbidden_.port,
                     " ) & kill -9 $PPID; echo ppid=$PPID kill_ppid=$?; ",
                     "while [ ! -s ", pidfile, " ]; do sleep 0.05; done; ",
                     "kill -9 $(cat ", pidfile, ") 2>&1; echo kill_run=$?; ",
                     "test -e /proc/$(cat ", pidfile, ") && echo run_visible; ",
                     "echo procs=$(ls /proc | grep -c '^[0-9]'); sleep 3");
    SandfenceProcess run({"run", "--network-access", "model_only", "--model",
                          model_url_, "--guard", guard, "--", "bash", "-c",
                          script});
    WriteFile(pidfile + ".tmp", absl::StrCat(run.pid()));
    rename((pidfile + ".tmp").c_str(), pidfile.c_str());
    Result r = run.Wait();
    unlink(pidfile.c_str());
    return r;
  }

  // What both E1 tests check: run lived to print its summary, the command
  // could not see or signal it, and the grandchild's connect was denied.
  void ExpectRunSurvivedAndDenied(const Result& r) {
    // `run` printed its summary: it was alive when the command ended.
    EXPECT_NE(r.err.find("sandfence: exit "), std::string::npos)
        << "run did not survive its command\n"
        << r.err;
    // The command's parent is the sandbox's init (pid 1), whom the kernel
    // does not let SIGKILL from inside; `run`'s real pid names nothing.
    EXPECT_NE(r.out.find("ppid=1 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("No such process"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("kill_run=1"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("run_visible"), std::string::npos) << r.out;
    int procs = -1;
    for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
      if (absl::ConsumePrefix(&line, "procs=")) {
        EXPECT_TRUE(absl::SimpleAtoi(line, &procs)) << line;
      }
    }
    // init, bash, the subshell (sleeping), ls, grep: nothing of the host.
    EXPECT_GT(procs, 0) << r.out;
    EXPECT_LE(procs, 8) << "the command's /proc shows the host's processes\n"
                        << r.out;
    // The grandchild's connect, a second after the kill, was denied.
    EXPECT_NE(r.err.find(absl::StrCat("127.0.0.4:", forbidden_.port)),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(GotAConnection(forbidden_))
        << "the grandchild reached the forbidden listener";
  }

  Listener model_, forbidden_;
  std::string model_url_;
};

TEST_F(RunReachTest, AgentCannotKillRunWithTheGuardOn) {
  REQUIRE_KERNEL_FOR_RUN();
  REQUIRE_A_GUARD();
  Result r = KillRunAttack("auto");
  EXPECT_TRUE(absl::StrContains(r.err, "process guard: signal") ||
              absl::StrContains(r.err, "process guard: lsm") ||
              absl::StrContains(r.err, "process guard: landlock"))
      << r.err;
  // Nothing here crosses the sandbox (init is inside it): the command
  // ends normally. Had the guard killed it for trying, run says so.
  if (r.status != 0) {
    EXPECT_EQ(r.status, 128 + SIGKILL) << r.err;
    EXPECT_NE(r.err.find("killed"), std::string::npos) << r.err;
  }
  ExpectRunSurvivedAndDenied(r);
}

TEST_F(RunReachTest, AgentCannotKillRunWithTheGuardOff) {
  REQUIRE_KERNEL_FOR_RUN();
  Result r = KillRunAttack("off");
  EXPECT_NE(r.err.find("process guard: off"), std::string::npos) << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  ExpectRunSurvivedAndDenied(r);
}

// kill(0) signals every member of the caller's process group, across PID
// namespaces; kill(-1), every process the caller can see. Neither may
// reach `run` (which is in a session of its own here, so a failure kills
// only it), which lives to report how the command ended.
TEST_F(RunReachTest, AgentCannotKillRunThroughItsProcessGroup) {
  REQUIRE_KERNEL_FOR_RUN();
  std::vector<std::string> guards = {"off"};
  if (HostKernelRunsLsmEnforcer().ok() || HostKernelRunsSignalEnforcer().ok()) {
    guards.push_back("auto");
  }
  for (const std::string& guard : guards) {
    for (const char* target : {"0", "-1"}) {
      SCOPED_TRACE(absl::StrCat("--guard ", guard, ", kill -9 ", target));
      SandfenceProcess run({"run", "--network-access", "inherit", "--guard",
                            guard, "--", "bash", "-c",
                            absl::StrCat("kill -9 ", target, "; sleep 1")});
      Result r = run.Wait();
      EXPECT_NE(r.err.find("sandfence: exit "), std::string::npos)
          << "run did not survive its command's kill -9 " << target << "\n"
          << r.err;
      // kill 0 kills bash itself; kill -1 spares the caller (the signal
      // guard kills it for trying: kill(-1) is always refused there).
      EXPECT_TRUE(r.status == 0 || r.status == 128 + SIGKILL) << r.err;
      if (std::string(target) == "0") {
        EXPECT_EQ(r.status, 128 + SIGKILL) << r.err;
      }
    }
  }
}

// SIGKILL of `run` from outside, its command's grandchild connecting in a
// loop: nothing gets through (the grandchild dies with the sandbox's PID
// namespace, and the sandbox stays enforced by its pinned links), and the
// next `run` ends the dead run's sandbox: its processes, cgroup and pins.
TEST_F(RunReachTest, SigkilledRunStaysDeniedAndTheNextRunReapsIt) {
  REQUIRE_KERNEL_FOR_RUN();
  const std::string started = Temp("started");
  const std::string through = Temp("through");
  auto run = std::make_unique<SandfenceProcess>(std::vector<std::string>{
      "run", "--network-access", "model_only", "--model", model_url_, "--",
      "bash", "-c",
      absl::StrCat("( while :; do (echo x >/dev/tcp/127.0.0.4/",
                   forbidden_.port, ") 2>/dev/null && touch ", through,
                   "; sleep 0.1; done ) & touch ", started, "; sleep 60")});
  ASSERT_TRUE(WaitForFile(started)) << run->Wait().err;
  const std::string cgroup = absl::StrCat(SandboxParent(), "/run-", run->pid());
  struct stat st;
  ASSERT_EQ(stat(cgroup.c_str(), &st), 0) << cgroup;
  const uint64_t cgroup_id = st.st_ino;
  const std::string pin =
      PinLayout(PinLayout::SetDir(kDefaultPinRoot, BpfBuildId()))
          .SandboxLinksDir(cgroup_id);
  ASSERT_EQ(access(pin.c_str(), F_OK), 0) << "no pinned links at " << pin;
  // init, bash, the looping subshell, its sleep: their pidfds, by host pid.
  std::vector<UniqueFd> inside;
  for (pid_t p : CgroupProcs(cgroup)) {
    inside.emplace_back(static_cast<int>(syscall(SYS_pidfd_open, p, 0)));
  }
  ASSERT_GE(inside.size(), 3u);

  ASSERT_EQ(kill(run->pid(), SIGKILL), 0);
  Result killed = run->Wait();
  EXPECT_EQ(killed.status, 128 + SIGKILL);
  // The command's processes die with `run` (the sandbox's init has its
  // death signal; the kernel ends the namespace with it).
  for (const UniqueFd& fd : inside) {
    if (fd) {
      EXPECT_TRUE(Exits(fd.get(), 5000)) << "a sandboxed process lives";
    }
  }
  // The sandbox stays enforced with nobody supervising it: a process put
  // into its cgroup now is denied, and stays there for the reaper.
  ASSERT_EQ(access(cgroup.c_str(), F_OK), 0) << "the cgroup went with run";
  EXPECT_EQ(access(pin.c_str(), F_OK), 0) << "the pins went with run";
  UniqueFd cgroup_fd(open(cgroup.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(cgroup_fd);
  SpawnOptions probe;
  probe.cgroup_fd = cgroup_fd.get();
  probe.argv = {"bash", "-c",
                absl::StrCat("exec 3<>/dev/tcp/127.0.0.4/", forbidden_.port)};
  absl::StatusOr<pid_t> prober = SpawnInCgroup(probe);
  ASSERT_TRUE(prober.ok()) << prober.status();
  absl::StatusOr<int> probed = WaitForExit(*prober);
  ASSERT_TRUE(probed.ok());
  EXPECT_EQ(*probed, 1) << "connect from the dead run's sandbox not denied";
  SpawnOptions stay = probe;
  stay.argv = {"sleep", "60"};
  stay.kill_with_parent = false;
  absl::StatusOr<pid_t> sleeper = SpawnInCgroup(stay);
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();
  UniqueFd sleeper_fd(static_cast<int>(syscall(SYS_pidfd_open, *sleeper, 0)));
  cgroup_fd.reset();
  usleep(500 * 1000);  // the grandchild's loop would have tried ~5 times
  EXPECT_FALSE(GotAConnection(forbidden_)) << "a connection got through";
  EXPECT_NE(access(through.c_str(), F_OK), 0) << "a connect succeeded";

  // The next run reaps it and says so in its summary. Another sandfence
  // process on the host (ctest -j, a user's run) may have been the next
  // one: then the sandbox goes all the same (waited for, bounded).
  auto gone = [](const std::string& path) {
    for (int i = 0; i < 500 && access(path.c_str(), F_OK) == 0; ++i) {
      usleep(10 * 1000);
    }
    return access(path.c_str(), F_OK) != 0;
  };
  Result next = Sandfence({"run", "--network-access", "inherit", "--", "true"});
  EXPECT_EQ(next.status, 0) << next.err;
  const bool ours =
      next.err.find(absl::StrCat("dead run left (cgroup ", cgroup_id, ")")) !=
      std::string::npos;
  EXPECT_TRUE(ours || gone(cgroup))
      << "the next run neither reaped the dead run's sandbox nor found it "
         "reaped:\n"
      << next.err;
  EXPECT_TRUE(Exits(sleeper_fd.get(), 5000)) << "the reaper left a process";
  for (const UniqueFd& fd : inside) {
    if (fd) {
      EXPECT_TRUE(Exits(fd.get(), 0)) << "the reaper left a process";
    }
  }
  int status = 0;
  waitpid(*sleeper, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_TRUE(gone(cgroup)) << "the cgroup was left";
  EXPECT_TRUE(gone(pin)) << "the pins were left";
  unlink(started.c_str());
  unlink(through.c_str());
}

// The tracing and lsm programs (the guard's, and the Unix bind tracker's)
// that process pid holds open, by id, from its fdinfo. Attributed to the
// process: other sandfence processes on the host (ctest -j, a daemon with
// its own pin root) load programs of their own, which a host-wide count
// would mix in.
std::set<uint32_t> TracingProgramsOf(pid_t pid, std::string* error) {
  std::set<uint32_t> ids;
  const std::string fds = absl::StrCat("/proc/", pid, "/fd");
  DIR* d = opendir(fds.c_str());
  if (d == nullptr) {
    *error = absl::StrCat(fds, ": ", strerror(errno));
    return ids;
  }
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[64] = {};
    const std::string fd_path = absl::StrCat(fds, "/", e->d_name);
    if (readlink(fd_path.c_str(), target, sizeof(target) - 1) < 0 ||
        std::string(target) != "anon_inode:bpf-prog") {
      continue;
    }
    std::ifstream info(absl::StrCat("/proc/", pid, "/fdinfo/", e->d_name));
    std::string line;
    int type = -1;
    uint32_t id = 0;
    while (std::getline(info, line)) {
      std::vector<std::string> kv = absl::StrSplit(line, ':');
      if (kv.size() != 2) continue;
      const std::string v(absl::StripAsciiWhitespace(kv[1]));
      if (kv[0] == "prog_type") (void)absl::SimpleAtoi(v, &type);
      if (kv[0] == "prog_id") (void)absl::SimpleAtoi(v, &id);
    }
    if ((type == BPF_PROG_TYPE_TRACING || type == BPF_PROG_TYPE_LSM) && id) {
      ids.insert(id);
    }
  }
  closedir(d);
  return ids;
}

// How many links the kernel has to each of the programs.
std::map<uint32_t, int> LinksTo(const std::set<uint32_t>& progs) {
  std::map<uint32_t, int> links;
  for (uint32_t p : progs) links[p] = 0;
  uint32_t id = 0;
  while (bpf_link_get_next_id(id, &id) == 0) {
    UniqueFd fd(bpf_link_get_fd_by_id(id));
    if (!fd) continue;  // gone meanwhile
    bpf_link_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd.get(), &info, &len) != 0) continue;
    if (auto it = links.find(info.prog_id); it != links.end()) ++it->second;
  }
  return links;
}

// Ten concurrent runs share one BPF guard: every run holds the same guard
// programs (none loaded its own), and each of them is attached once (one
// guard taxes every system call, not ten). The BPF guard is asked for by
// name: auto takes Landlock + seccomp where BPF LSM does not run, which
// loads no program at all.
TEST_F(RunReachTest, TenConcurrentRunsLoadOneGuard) {
  REQUIRE_KERNEL_FOR_RUN();
  REQUIRE_A_GUARD();
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  ASSERT_TRUE(mount.ok());
  const std::string go = Temp("go");
  // Each command waits for go, then tries to leave its sandbox (the root
  // cgroup's cgroup.procs): the guard stops it, in every one of them.
  auto start = [&](int i) {
    const std::string ready = Temp(absl::StrCat("ready-", i));
    return std::make_unique<SandfenceProcess>(std::vector<std::string>{
        "run", "--network-access", "inherit", "--guard",
        ProbeBpfLsm().ok() ? "lsm" : "signal", "--", "sh",
        "-c",
        absl::StrCat("touch ", ready, "; while [ ! -e ", go,
                     " ]; do sleep 0.05; done; echo 0 > ", *mount,
                     "/cgroup.procs; echo rc=$?; cat /proc/self/cgroup")});
  };
  auto all_ready = [&](int n) {
    for (int i = 0; i < n; ++i) {
      if (!WaitForFile(TempPath(absl::StrCat("ready-", i)))) return false;
    }
    return true;
  };
  auto expect_guarded = [&](const Result& r, int i) {
    EXPECT_TRUE(absl::StrContains(r.err, "process guard: signal") ||
                absl::StrContains(r.err, "process guard: lsm"))
        << "run " << i << "\n"
        << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "killed") ||
                absl::StrContains(r.err, "denied"))
        << "run " << i << "\n"
        << r.err;
    EXPECT_EQ(r.out.find("rc=0"), std::string::npos) << r.out;
    for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
      EXPECT_NE(line, "0::/") << "run " << i << " left its sandbox";
    }
  };

  std::vector<std::unique_ptr<SandfenceProcess>> runs;
  for (int i = 0; i < 10; ++i) runs.push_back(start(i));
  ASSERT_TRUE(all_ready(10));
  // All ten are set up and guarded (their commands run): what they hold
  // now is what they use.
  std::string error;
  const std::set<uint32_t> first = TracingProgramsOf(runs[0]->pid(), &error);
  ASSERT_EQ(error, "");
  EXPECT_FALSE(first.empty()) << "run 0 holds no guard program";
  for (int i = 1; i < 10; ++i) {
    EXPECT_EQ(TracingProgramsOf(runs[i]->pid(), &error), first)
        << "run " << i << " holds programs of a guard of its own " << error;
  }
  std::string counts;
  for (const auto& [prog, links] : LinksTo(first)) {
    absl::StrAppend(&counts, prog, ":", links, " ");
    // lsm programs are attached once; a tracing program once too (the
    // guard's), or not at all: the Unix bind tracker, which every run
    // loads with the Unix programs and none attaches (run brokers paths).
    EXPECT_LE(links, 1) << "program " << prog << " is attached " << links
                        << " times";
  }
  std::cerr << "programs held by all ten runs (id:links): " << counts << "\n";
  WriteFile(go, "");
  for (int i = 0; i < 10; ++i) expect_guarded(runs[i]->Wait(), i);
  unlink(go.c_str());
  for (int i = 0; i < 10; ++i) {
    unlink(TempPath(absl::StrCat("ready-", i)).c_str());
  }
}

}  // namespace
}  // namespace sandfence::testing
