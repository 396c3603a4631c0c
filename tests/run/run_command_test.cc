// `sandfence run` as a user runs it: the real binary, real sandboxes, real
// children. Exit statuses, refusals before anything starts, the summary,
// signals, --user and --netns.
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/cgroup.h"
#include "gtest/gtest.h"
#include "guard/guard_controller.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/egress/egress_fixture.h"
#include "tests/run/run_fixture.h"

namespace sandfence::testing {
namespace {

class RunCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    model_ = Listen("127.0.0.2");
    forbidden_ = Listen("127.0.0.4");
    model_url_ = absl::StrCat("http://127.0.0.2:", model_.port, "/v1");
  }
  std::string Connect(const char* addr, uint16_t port) {
    return absl::StrCat("exec 3<>/dev/tcp/", addr, "/", port);
  }
  Listener model_, forbidden_;
  std::string model_url_;
};

TEST_F(RunCommandTest, ReturnsTheCommandsExitStatus) {
  REQUIRE_KERNEL_FOR_RUN();
  EXPECT_EQ(Sandfence({"run", "--network-access", "inherit", "--", "sh", "-c",
                       "exit 7"})
                .status,
            7);
  EXPECT_EQ(Sandfence({"run", "--network-access", "inherit", "--", "sh", "-c",
                       "kill -TERM $$"})
                .status,
            128 + SIGTERM);
}

TEST_F(RunCommandTest, AllowsTheModelAndDeniesTheRestWithASummary) {
  REQUIRE_KERNEL_FOR_RUN();
  Result ok =
      Sandfence({"run", "--network-access", "model_only", "--model", model_url_,
                 "--", "bash", "-c", Connect("127.0.0.2", model_.port)});
  EXPECT_EQ(ok.status, 0) << ok.err;
  Result denied =
      Sandfence({"run", "--network-access", "model_only", "--model", model_url_,
                 "--", "bash", "-c", Connect("127.0.0.4", forbidden_.port)});
  EXPECT_EQ(denied.status, 1) << denied.err;
  EXPECT_NE(denied.err.find("Operation not permitted"), std::string::npos)
      << denied.err;
  // The count may include glibc's try at nscd's Unix socket (a host
  // service, refused in a restricted phase) where the host has the path.
  EXPECT_NE(denied.err.find(" denied"), std::string::npos) << denied.err;
  EXPECT_EQ(denied.err.find("0 denied"), std::string::npos) << denied.err;
  EXPECT_NE(denied.err.find(absl::StrCat("127.0.0.4:", forbidden_.port)),
            std::string::npos)
      << denied.err;
  EXPECT_NE(denied.err.find("(bash)"), std::string::npos) << denied.err;
}

TEST_F(RunCommandTest, RefusedPolicyExits78BeforeAnythingStarts) {
  std::string marker = absl::StrCat("/tmp/sandfence-run-test-", getpid());
  unlink(marker.c_str());
  Result r = Sandfence({"run", "--network-access", "model_only", "--model",
                        "http://0.0.0.0:80", "--", "touch", marker});
  EXPECT_EQ(r.status, 78) << r.err;
  EXPECT_NE(r.err.find("0.0.0.0"), std::string::npos) << r.err;
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran";
  Result required = Sandfence({"run", "--network-access", "model_only",
                               "--model", model_url_, "--required-tool",
                               "http://127.0.0.3:80", "--", "touch", marker});
  EXPECT_EQ(required.status, 78) << required.err;
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran";
}

TEST_F(RunCommandTest, KernelWithoutEgressIsRefused) {
  if (HostKernelRunsEgress().ok()) {
    GTEST_SKIP() << "this kernel runs the egress programs";
  }
  std::string marker = absl::StrCat("/tmp/sandfence-run-test-", getpid());
  unlink(marker.c_str());
  Result r =
      Sandfence({"run", "--network-access", "inherit", "--", "touch", marker});
  EXPECT_EQ(r.status, 78) << "rejected: the kernel lacks "
                          << HostKernelRunsEgress().message() << "\n"
                          << r.err;
  EXPECT_NE(r.err.find("this kernel"), std::string::npos) << r.err;
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran";
  unlink(marker.c_str());
}

TEST_F(RunCommandTest, UsageErrorsExit64) {
  EXPECT_EQ(Sandfence({"run", "--network-access", "model_only"}).status, 64);
  EXPECT_EQ(Sandfence({"run", "--netns", "sideways", "--", "true"}).status, 64);
  Result r = Sandfence({"run", "--bogus", "--", "true"});
  EXPECT_EQ(r.status, 64);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;
}

// This run's sandbox (run-<pid of sandfence>) is gone. Only this run's:
// the shared parent holds whatever concurrent runs (ctest -j, a user's
// `sandfence run`) have open, and the last one out removes it.
void ExpectThisRunsSandboxGone(const Result& r) {
  auto mount = FindCgroup2Mount();
  ASSERT_TRUE(mount.ok());
  ASSERT_GT(r.pid, 0);
  const std::string mine = absl::StrCat(*mount, "/sandfence/run-", r.pid);
  EXPECT_NE(access(mine.c_str(), F_OK), 0)
      << mine << " (this run's sandbox) was left behind";
}

TEST_F(RunCommandTest, TermIsForwardedAndTheSandboxIsCleanedUp) {
  REQUIRE_KERNEL_FOR_RUN();
  const std::string marker =
      absl::StrCat("/tmp/sandfence-run-started-", getpid());
  unlink(marker.c_str());
  // The command's own child outlives it; it must die with the sandbox.
  Result r = Sandfence({"run", "--network-access", "inherit", "--", "sh", "-c",
                        absl::StrCat("sleep 30 & touch ", marker, "; wait")},
                       0, marker);
  unlink(marker.c_str());
  ASSERT_TRUE(r.signalled_after_file)
      << "the command never started (the SIGTERM came on a timeout)\n"
      << r.err;
  // The command (sh) was killed by the forwarded signal: 128+15, and the
  // summary says so, which sandfence dying itself would not print.
  EXPECT_EQ(r.status, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.err.find("sandfence: exit 143"), std::string::npos) << r.err;
  ExpectThisRunsSandboxGone(r);
}

TEST_F(RunCommandTest, TermWhileSettingUpStopsBeforeTheCommandStarts) {
  REQUIRE_KERNEL_FOR_RUN();
  const std::string marker = absl::StrCat("/tmp/sandfence-run-ran-", getpid());
  unlink(marker.c_str());
  // Sent as soon as sandfence blocks SIGTERM, which it does before it loads
  // anything (hundreds of milliseconds before the command could start).
  Result r = Sandfence(
      {"run", "--network-access", "inherit", "--", "touch", marker}, 0, "",
      /*signal_when_blocking=*/true);
  EXPECT_EQ(r.status, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.err.find("interrupted by signal 15"), std::string::npos) << r.err;
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran";
  unlink(marker.c_str());
  ExpectThisRunsSandboxGone(r);
}

TEST_F(RunCommandTest, IntIsForwardedToTheCommand) {
  REQUIRE_KERNEL_FOR_RUN();
  const std::string marker =
      absl::StrCat("/tmp/sandfence-run-int-started-", getpid());
  unlink(marker.c_str());
  SandfenceProcess run(WithUnixForThisKernel(
      {"run", "--network-access", "inherit", "--", "sh", "-c",
       absl::StrCat("touch ", marker, "; exec sleep 30")}));
  ASSERT_TRUE(WaitForFile(marker)) << "the command never started";
  unlink(marker.c_str());
  ASSERT_EQ(kill(run.pid(), SIGINT), 0);
  Result r = run.Wait();
  // sleep died of the SIGINT run forwarded (130), and run lived to say so.
  EXPECT_EQ(r.status, 128 + SIGINT) << r.err;
  EXPECT_NE(r.err.find("sandfence: exit 130"), std::string::npos) << r.err;
  ExpectThisRunsSandboxGone(r);
}

// `sandfence demo` as the quick start runs it (on Debian 12: any kernel):
// its own loopback listeners, one connect allowed, one refused, and the
// summary that says so.
TEST_F(RunCommandTest, DemoAllowsTheModelAndRefusesTheOtherHost) {
  REQUIRE_KERNEL_FOR_RUN();
  Result r = Sandfence({"demo"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("127.0.0.2/"), std::string::npos) << r.out;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n');
  int connected = 0, refused = 0;
  for (const std::string& line : lines) {
    if (absl::StrContains(line, "connect 127.0.0.2/") &&
        absl::EndsWith(line, ": connected")) {
      ++connected;
    }
    if (absl::StrContains(line, "connect 127.0.0.4/") &&
        absl::EndsWith(line, ": refused by the sandbox")) {
      ++refused;
    }
  }
  EXPECT_EQ(connected, 1) << r.out;
  EXPECT_EQ(refused, 1) << r.out;
  // One TCP denial; besides it only Unix ones may appear: glibc's try at
  // nscd's socket, where the shell looks a user up (the VM's, for one), is
  // refused and counted too, as the README says.
  EXPECT_NE(r.err.find("1 allowed, "), std::string::npos) << r.err;
  int tcp_denied = 0;
  for (absl::string_view line : absl::StrSplit(r.err, '\n')) {
    if (absl::StartsWith(line, "  tcp ")) {
      EXPECT_TRUE(absl::StrContains(line, "127.0.0.4:") &&
                  absl::StrContains(line, " 1x "))
          << line;
      ++tcp_denied;
    } else if (absl::StartsWith(line, "  ")) {
      EXPECT_TRUE(absl::StartsWith(line, "  unix ")) << line;
    }
  }
  EXPECT_EQ(tcp_denied, 1) << r.err;
  EXPECT_NE(r.err.find("(model_only)"), std::string::npos) << r.err;
  // Where nothing judges Unix sockets (before 6.7 without BPF LSM: Debian
  // 12's 6.1 as it boots) it runs with them unchecked rather than be
  // refused, and says so.
  EXPECT_EQ(r.err.find("Unix sockets unchecked") != std::string::npos,
            !HostChecksUnixSockets().ok())
      << r.err;
}

// Not root: 77 (EX_NOPERM) before anything is loaded or started.
TEST(RunWithoutRootTest, Exits77AndStartsNothing) {
  SANDFENCE_REQUIRE_ROOT();  // to become another user
  if (access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP() << "needs /usr/bin/setpriv to run sandfence as nobody";
  }
  const std::string marker = absl::StrCat("/tmp/sandfence-run-77-", getpid());
  unlink(marker.c_str());
  const std::string cmd = absl::StrCat(
      "/usr/bin/setpriv --reuid 65534 --regid 65534 --clear-groups ",
      SANDFENCE_BIN, " run --network-access inherit -- touch ", marker,
      " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out = ReadAll(fileno(p));
  const int st = pclose(p);
  ASSERT_TRUE(WIFEXITED(st)) << out;
  EXPECT_EQ(WEXITSTATUS(st), 77) << out;
  EXPECT_NE(out.find("needs root"), std::string::npos) << out;
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran";
  unlink(marker.c_str());
}

// --guard lsm where BPF LSM cannot run: 78, never a silent fallback, and
// the command never starts. (Where lsm runs, the VM suite, it is used.)
TEST_F(RunCommandTest, GuardLsmWithoutBpfLsmExits78) {
  REQUIRE_KERNEL_FOR_RUN();
  const std::string marker = absl::StrCat("/tmp/sandfence-run-lsm-", getpid());
  unlink(marker.c_str());
  Result r = Sandfence({"run", "--network-access", "inherit", "--guard", "lsm",
                        "--", "touch", marker});
  if (ProbeBpfLsm().ok()) {
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("process guard: lsm"), std::string::npos) << r.err;
    unlink(marker.c_str());
    GTEST_SKIP() << "BPF LSM runs on this kernel: --guard lsm ran (checked); "
                    "the refusal is tested where it cannot";
  }
  EXPECT_EQ(r.status, 78) << r.err;
  EXPECT_NE(r.err.find("lsm"), std::string::npos) << r.err;
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran";
  unlink(marker.c_str());
}

// "A crash loses at most the last 200 ms": what run has read reaches the
// file while it runs, and a SIGKILLed run leaves a record that reads back
// with it. The test waits (bounded) for the event to be on disk before the
// kill instead of timing the flush; the interval itself is the recorder's
// flush_interval, which run ticks every 50 ms.
TEST_F(RunCommandTest, ARecordKeepsWhatReachedItWhenRunIsKilled) {
  REQUIRE_KERNEL_FOR_RUN();
  const std::string marker =
      absl::StrCat("/tmp/sandfence-run-crash-started-", getpid());
  const std::string record =
      absl::StrCat("/tmp/sandfence-run-crash-", getpid(), ".sfrec");
  unlink(marker.c_str());
  unlink(record.c_str());
  SandfenceProcess run(WithUnixForThisKernel(
      {"run", "--network-access", "model_only", "--model", model_url_,
       "--record", record, "--", "bash", "-c",
       absl::StrCat(Connect("127.0.0.4", forbidden_.port), "; touch ", marker,
                    "; exec sleep 60")}));
  ASSERT_TRUE(WaitForFile(marker)) << "the command never started";
  unlink(marker.c_str());
  const std::string denied = absl::StrCat("127.0.0.4:", forbidden_.port);
  Result shown;
  for (int i = 0; i < 500; ++i) {  // up to 10 s
    shown = Sandfence({"records", "show", "--json", record});
    if (absl::StrContains(shown.out,
                          absl::StrCat("\"port\": ", forbidden_.port))) {
      break;
    }
    usleep(20 * 1000);
  }
  ASSERT_EQ(kill(run.pid(), 0), 0) << "run ended before the kill";
  ASSERT_EQ(kill(run.pid(), SIGKILL), 0);
  Result killed = run.Wait();
  EXPECT_EQ(killed.status, 128 + SIGKILL);
  Result after = Sandfence({"records", "show", record});
  EXPECT_EQ(after.status, 0) << after.err;
  EXPECT_NE(after.out.find(denied), std::string::npos)
      << "the denial run read before it was killed is not in the record:\n"
      << after.out << after.err << "\nwhile it ran:\n"
      << shown.out;
  // Never finalized: the record says it is not whole.
  EXPECT_NE(after.out.find("INCOMPLETE"), std::string::npos) << after.out;
  unlink(record.c_str());
}

TEST_F(RunCommandTest, UserAndPrivateNetns) {
  REQUIRE_KERNEL_FOR_RUN();
  Result who = Sandfence({"run", "--network-access", "inherit", "--user",
                          "65534:65534", "--", "id", "-u"});
  EXPECT_EQ(who.status, 0) << who.err;
  EXPECT_EQ(who.out, "65534\n");
  Result netns = Sandfence({"run", "--network-access", "model_only", "--model",
                            "http://192.0.2.1:80", "--netns", "private", "--",
                            "bash", "-c", Connect("127.0.0.1", 9)});
  // Own loopback, nothing listening: refused by the kernel, not by us.
  EXPECT_NE(netns.err.find("Connection refused"), std::string::npos)
      << netns.err;
}

// A root process outside any sandbox, with no capabilities, for the guard
// to protect. The kernel itself lets the sandboxed root read it (same UID,
// a subset of its capabilities), so what stops the read is the guard.
// (A target of another UID, or with more capabilities, the kernel refuses
// already: `run` drops CAP_SYS_PTRACE.)
class ForeignProcess {
 public:
  ForeignProcess() {
    pid_ = fork();
    if (pid_ == 0) {
      execl("/usr/bin/setpriv", "setpriv", "--bounding-set", "-all",
            "--inh-caps", "-all", "sleep", "30", nullptr);
      _exit(250);
    }
    // Ready once setpriv has dropped the capabilities and exec'd sleep
    // (bounded: a target that never gets there fails the test's checks).
    const std::string comm = absl::StrCat("/proc/", pid_, "/comm");
    for (int i = 0; i < 1000; ++i) {
      std::ifstream f(comm);
      std::string name;
      if (std::getline(f, name) && name == "sleep") return;
      usleep(10 * 1000);
    }
    ADD_FAILURE() << "the target never became `sleep`";
  }
  ~ForeignProcess() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

TEST_F(RunCommandTest, ProcessGuardStopsReadingEnvironOutsideTheSandbox) {
  REQUIRE_KERNEL_FOR_RUN();
  ForeignProcess target;
  ASSERT_GT(target.pid(), 0);
  // The command's own /proc does not show the target (its PID namespace);
  // the host's procfs, mounted where the sandbox sees it, does.
  HostProcMount host_proc;
  ASSERT_EQ(host_proc.error(), "");
  Result r = Sandfence(
      {"run", "--network-access", "inherit", "--", "sh", "-c",
       absl::StrCat("test -e /proc/", target.pid(), " && echo visible; cat ",
                    host_proc.path(), "/", target.pid(),
                    "/environ >/dev/null; echo rc=$?")});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("visible"), std::string::npos) << r.out;
  // signal: cat is killed (137); lsm and landlock: the open fails (1).
  // Never 0.
  EXPECT_NE(r.out.find("rc="), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("rc=0"), std::string::npos) << r.out;
  const bool lsm = r.err.find("process guard: lsm") != std::string::npos;
  const bool signal = r.err.find("process guard: signal") != std::string::npos;
  const bool landlock =
      r.err.find("process guard: landlock") != std::string::npos;
  ASSERT_TRUE(lsm || signal || landlock) << r.err;
  if (landlock) {
    // The kernel refuses it (Landlock's ptrace rule, with CAP_PERFMON and
    // CAP_SYS_ADMIN dropped): EACCES, and nothing the ring can record.
    EXPECT_NE(r.out.find("rc=1"), std::string::npos) << r.out;
    return;
  }
  EXPECT_NE(r.err.find(lsm ? "denied" : "killed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("environ"), std::string::npos) << r.err;
}

// A procfs mounted outside /proc (here under /tmp) would let a root command
// write the host's /proc/sys through it. Under landlock, `run` detaches such
// special file systems in the command's own mount namespace rather than
// fencing them off (which would take from /tmp every right to create): the
// command finds an empty directory there, and /tmp stays writable.
TEST_F(RunCommandTest, ASecondProcfsIsDetachedAndTmpStaysWritable) {
  REQUIRE_KERNEL_FOR_RUN();
  HostProcMount host_proc;
  ASSERT_EQ(host_proc.error(), "");
  const std::string made = absl::StrCat("/tmp/sandfence-made-", getpid());
  unlink(made.c_str());
  Result r = Sandfence(
      {"run", "--network-access", "inherit", "--", "sh", "-c",
       absl::StrCat("touch ", made, "; echo made=$?; ls ", host_proc.path(),
                    "/sys 2>/dev/null | head -1; echo x > ", host_proc.path(),
                    "/sys/kernel/core_pattern 2>/dev/null; echo core=$?")});
  ASSERT_EQ(r.status, 0) << r.err;
  // "landlock" alone or stacked under lsm ("lsm+landlock"): either way the
  // command is confined and its special mounts detached.
  const bool confined =
      r.err.find("process guard: landlock") != std::string::npos ||
      r.err.find("+landlock") != std::string::npos;
  if (!confined) {
    unlink(made.c_str());
    const size_t at = r.err.find("process guard: ");
    GTEST_SKIP() << "the command is not confined by Landlock here ("
                 << (at == std::string::npos
                         ? std::string("no guard in the summary")
                         : r.err.substr(at, r.err.find('\n', at) - at))
                 << ")";
  }
  EXPECT_NE(r.out.find("made=0"), std::string::npos) << r.out;
  EXPECT_EQ(access(made.c_str(), F_OK), 0) << "the file in /tmp is not there";
  EXPECT_EQ(r.out.find("kernel"), std::string::npos)
      << "the second procfs is visible in the sandbox:\n"
      << r.out;
  EXPECT_EQ(r.out.find("core=0"), std::string::npos) << r.out;
  unlink(made.c_str());
}

TEST_F(RunCommandTest, GuardOffLeavesProcUntouched) {
  REQUIRE_KERNEL_FOR_RUN();
  ForeignProcess target;
  ASSERT_GT(target.pid(), 0);
  HostProcMount host_proc;
  ASSERT_EQ(host_proc.error(), "");
  Result r = Sandfence(
      {"run", "--network-access", "inherit", "--guard", "off", "--", "sh", "-c",
       absl::StrCat("cat ", host_proc.path(), "/", target.pid(),
                    "/environ >/dev/null; echo rc=$?")});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("rc=0"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("process guard: off"), std::string::npos) << r.err;
}

TEST_F(RunCommandTest, RootCommandCannotTouchBpfOrRawSockets) {
  REQUIRE_KERNEL_FOR_RUN();
  // Without CAP_BPF / CAP_SYS_ADMIN the command cannot rewrite or detach
  // the maps and links that enforce its sandbox; setuid cannot restore them.
  Result r = Sandfence(
      {"run", "--network-access", "inherit", "--guard", "off", "--", "sh", "-c",
       "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status"});
  ASSERT_EQ(r.status, 0) << r.err;
  uint64_t eff = 0, bnd = 0;
  int nnp = -1;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    std::vector<std::string> kv = absl::StrSplit(line, ':');
    if (kv.size() != 2) continue;
    std::string v(absl::StripAsciiWhitespace(kv[1]));
    if (kv[0] == "CapEff") eff = std::stoull(v, nullptr, 16);
    if (kv[0] == "CapBnd") bnd = std::stoull(v, nullptr, 16);
    if (kv[0] == "NoNewPrivs") nnp = std::stoi(v);
  }
  EXPECT_EQ(nnp, 1) << r.out;
  for (int cap : {CAP_BPF, CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW,
                  CAP_PERFMON, CAP_SYS_MODULE, CAP_SYS_PTRACE}) {
    EXPECT_EQ((eff >> cap) & 1, 0u) << "effective has cap " << cap;
    EXPECT_EQ((bnd >> cap) & 1, 0u) << "bounding set has cap " << cap;
  }
  EXPECT_NE(eff, 0u) << "root keeps its other capabilities";
}

TEST_F(RunCommandTest, InheritedSocketsAreClosed) {
  REQUIRE_KERNEL_FOR_RUN();
  // A descriptor the caller leaves open (no CLOEXEC) must not reach the
  // command: its socket would belong to the caller's cgroup.
  int leaked = socket(AF_INET, SOCK_DGRAM, 0);  // no SOCK_CLOEXEC
  ASSERT_GE(leaked, 0);
  Result r = Sandfence({"run", "--network-access", "inherit", "--", "sh", "-c",
                        "ls /proc/self/fd | wc -l"});
  close(leaked);
  ASSERT_EQ(r.status, 0) << r.err;
  // stdin, stdout, stderr, and the fd ls opens for the directory.
  EXPECT_EQ(std::stoi(r.out), 4) << r.out;
}

}  // namespace
}  // namespace sandfence::testing

namespace sandfence::testing {
namespace {

// A stream listener outside every sandbox, at a path of the test's.
struct HostUnixListener {
  explicit HostUnixListener(const std::string& p) : path(p) {
    unlink(path.c_str());
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0)
        << path << ": " << strerror(errno);
    EXPECT_EQ(listen(fd, 8), 0);
  }
  ~HostUnixListener() {
    close(fd);
    unlink(path.c_str());
  }
  std::string path;
  int fd = -1;
};

// The agent's try: connect to a host service's Unix socket (the container
// runtime's, the system bus...) from a model_only run.
TEST(RunUnixTest, AHostServicesUnixSocketIsRefusedAndNamed) {
  REQUIRE_KERNEL_FOR_RUN();
  SANDFENCE_REQUIRE_HOST(HostChecksUnixSockets());
  HostUnixListener svc(absl::StrCat("/tmp/sf-run-unix-", getpid(), ".sock"));
  const std::string record =
      absl::StrCat("/tmp/sf-run-unix-", getpid(), ".record");
  Result r = Sandfence({"run", "--network-access", "model_only", "--model",
                        "http://127.0.0.2:9/", "--record", record, "--",
                        SANDFENCE_UNIX_PROBE_PATH, "stream-connect", svc.path});
  EXPECT_EQ(r.status, EPERM) << r.err;
  EXPECT_NE(r.err.find("1 denied"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unix"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(svc.path), std::string::npos) << r.err;
  Result shown = Sandfence({"records", "show", "--json", record});
  EXPECT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find(svc.path), std::string::npos) << shown.out;
  EXPECT_TRUE(absl::StrContains(shown.out, "\"connect_unix\"") ||
              absl::StrContains(shown.out, "\"unix_stream_connect\""))
      << shown.out;
  unlink(record.c_str());

  // Listed, it is reachable (and the sandbox's own sockets always are).
  Result listed =
      Sandfence({"run", "--network-access", "model_only", "--model",
                 "http://127.0.0.2:9/", "--unix-allow", svc.path, "--",
                 SANDFENCE_UNIX_PROBE_PATH, "stream-connect-only", svc.path});
  EXPECT_EQ(listed.status, 0) << listed.err;
  Result own =
      Sandfence({"run", "--network-access", "model_only", "--model",
                 "http://127.0.0.2:9/", "--", SANDFENCE_UNIX_PROBE_PATH,
                 "own-stream", absl::StrCat("@sf-run-own-", getpid())});
  EXPECT_EQ(own.status, 0) << own.err;
}

// Without the kernel's hooks (before 6.7) a restricted run is refused
// before anything starts, naming why; --unix unchecked runs it, and says so.
// With them, unchecked reaches the host's socket and says so too.
TEST(RunUnixTest, UnixCheckingNeedsTheKernelsHooks) {
  REQUIRE_KERNEL_FOR_RUN();
  HostUnixListener svc(absl::StrCat("/tmp/sf-run-unix2-", getpid(), ".sock"));
  const std::string marker = absl::StrCat("/tmp/sf-run-unix2-", getpid());
  unlink(marker.c_str());
  if (!HostChecksUnixSockets().ok()) {
    // --unix checked: WithUnixForThisKernel leaves the flag as it is.
    Result refused =
        Sandfence({"run", "--unix", "checked", "--network-access", "model_only",
                   "--model", "http://127.0.0.2:9/", "--", "touch", marker});
    EXPECT_EQ(refused.status, 78) << refused.err;
    EXPECT_NE(refused.err.find("connect_unix"), std::string::npos)
        << refused.err;
    EXPECT_NE(refused.err.find("--unix unchecked"), std::string::npos)
        << refused.err;
    EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran";
  }
  Result unchecked = Sandfence(
      {"run", "--unix", "unchecked", "--network-access", "model_only",
       "--model", "http://127.0.0.2:9/", "--", "bash", "-c",
       absl::StrCat(SANDFENCE_UNIX_PROBE_PATH, " stream-connect-only ",
                    svc.path, " && touch ", marker)});
  EXPECT_EQ(unchecked.status, 0) << unchecked.err;
  EXPECT_NE(unchecked.err.find("Unix sockets unchecked"), std::string::npos)
      << unchecked.err;
  EXPECT_EQ(access(marker.c_str(), F_OK), 0) << unchecked.err;
  unlink(marker.c_str());
}

}  // namespace
}  // namespace sandfence::testing
