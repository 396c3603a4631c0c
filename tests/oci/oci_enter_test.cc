// sandfence-enter as a container's entrypoint (issue 32): the statically
// linked `enter`, bind-mounted into an image that holds nothing but a
// static busybox (no /lib, no /usr: nothing sandfence-enter could load),
// under runc and podman, with sandfence's OCI hook making the container's
// cgroup the rollout's sandbox (a real daemon; the rollout's policy asks
// for the landlock guard). The agent is confined -- no_new_privs, seccomp
// (its own filter on top of the runtime's), a Landlock refusal, no user
// namespace -- and the hook's egress policy still decides its connects.
// Each runtime also runs the same script without sandfence-enter, the
// control. A process the runtime execs into the container later is outside
// the agent's Landlock domain: the agent cannot signal or read it.
// Loopback only: the listeners are the test's own.
#include <elf.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "confine/confine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/child_process.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "support/test_files.h"
#include "tests/daemon/daemon_fixture.h"
#include "tests/egress/egress_fixture.h"
#include "tests/oci/oci_fixture.h"

namespace sandfence::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kPodman[] = "/usr/bin/podman";
constexpr char kBusybox[] = "/bin/busybox";

std::string StaticEnter() {
  const char* env = getenv("SANDFENCE_ENTER_STATIC");
  return env ? env : SANDFENCE_ENTER_STATIC_PATH;
}

// Whether an ELF executable asks for a program interpreter (is dynamic).
bool IsDynamic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof(eh))) return true;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    in.seekg(static_cast<std::streamoff>(eh.e_phoff + i * eh.e_phentsize));
    if (!in.read(reinterpret_cast<char*>(&ph), sizeof(ph))) return true;
    if (ph.p_type == PT_INTERP) return true;
  }
  return false;
}

// The CapEff line of a /proc/<pid>/status text.
uint64_t CapEff(const std::string& status) {
  const size_t at = status.find("CapEff:\t");
  if (at == std::string::npos) return 0;
  return std::stoull(status.substr(at + 8, 16), nullptr, 16);
}

class OciEnterTest : public OciTest {
 protected:
  void SetUp() override {
    OciTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (StaticEnter().empty()) {
      GTEST_SKIP() << "sandfence-enter is not built here (no static libc or "
                      "Abseil archives: userspace/enter/CMakeLists.txt)";
    }
    if (access(kBusybox, X_OK) != 0 || IsDynamic(kBusybox)) {
      GTEST_SKIP() << "needs a static busybox at " << kBusybox
                   << " (apt-get install busybox-static): the image holds "
                      "nothing else";
    }
    absl::StatusOr<ConfineSupport> support = ProbeConfinement();
    ASSERT_TRUE(support.ok()) << support.status();
    if (!support->usable()) {
      GTEST_SKIP() << "this host cannot confine (Landlock + seccomp): "
                   << support->Usable().message();
    }
    chmod(dir_->Path("shared").c_str(), 0777);
    model_ = Listen("127.0.0.2");
    forbidden_ = Listen("127.0.0.4");
    // The rollout asks for the landlock guard: what confines its
    // processes is what they apply to themselves (sandfence-enter), no
    // BPF guard on the host.
    ASSERT_TRUE(dir_->WriteFile("policies/enter.textproto",
                                "name: \"enter\"\n"
                                "phase { name: \"agent\" network_access: "
                                "MODEL_ONLY guard { mode: LANDLOCK } }\n")
                    .ok());
    StartDaemon("oci-enter");
  }

  std::map<std::string, std::string> Annotations(const std::string& rollout) {
    return {{"sandfence.dev/policy", "enter.textproto"},
            {"sandfence.dev/model",
             absl::StrCat("http://127.0.0.2:", model_.port, "/v1")},
            {"sandfence.dev/rollout-id", rollout}};
  }

  // An image of one static busybox: /bin/{busybox,sh,true}, and an empty
  // /.sandfence-enter for the bind mount. No /lib, no /usr, no /etc.
  static void BusyboxRoot(const std::string& root) {
    for (const char* d : {"", "/bin", "/proc", "/dev", "/sys", "/tmp", "/x"}) {
      ASSERT_EQ(mkdir((root + d).c_str(), 0755), 0) << root << d;
    }
    std::ifstream src(kBusybox, std::ios::binary);
    std::ofstream dst(root + "/bin/busybox", std::ios::binary);
    dst << src.rdbuf();
    dst.close();
    chmod((root + "/bin/busybox").c_str(), 0755);
    ASSERT_EQ(symlink("busybox", (root + "/bin/sh").c_str()), 0);
    ASSERT_EQ(symlink("busybox", (root + "/bin/true").c_str()), 0);
    close(open((root + "/.sandfence-enter").c_str(), O_CREAT | O_WRONLY,
               0755));
  }

  // What the agent reports, the same in every container of this test.
  std::string Script() const {
    return absl::StrCat(
        "busybox grep -E '^(NoNewPrivs|Seccomp|Seccomp_filters|CapEff):' "
        "/proc/self/status; ",
        "echo 500 > /proc/self/oom_score_adj; echo oom=$?; ",
        "busybox unshare -U /bin/true; echo unshare=$?; ",
        "busybox nc -w 2 127.0.0.2 ", model_.port,
        " -e /bin/true; echo model=$?; ", "busybox nc -w 2 127.0.0.4 ",
        forbidden_.port, " -e /bin/true; echo forbidden=$?; ",
        "busybox ls /lib /usr >/dev/null 2>&1; echo libs=$?");
  }

  // A runc bundle: the busybox image, the hook at createRuntime and
  // poststop, sandfence-enter bound at /.sandfence-enter, the test's shared
  // directory at /x, the host's network namespace (the listeners are its),
  // and the capabilities runc and podman give a container by default
  // (CAP_SETPCAP among them: enough to drop the rest).
  std::string Bundle(const std::string& id,
                     const std::map<std::string, std::string>& annotations,
                     const std::vector<std::string>& args) {
    const std::string bundle = dir_->Path(absl::StrCat("bundle-", id));
    EXPECT_EQ(mkdir(bundle.c_str(), 0755), 0);
    BusyboxRoot(bundle + "/rootfs");
    std::vector<std::string> quoted;
    for (const std::string& a : args) quoted.push_back(Quote(a));
    std::vector<std::string> notes;
    for (const auto& [k, v] : annotations) {
      notes.push_back(absl::StrCat(Quote(k), ": ", Quote(v)));
    }
    const std::string caps =
        R"(["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER",
        "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP",
        "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",
        "CAP_AUDIT_WRITE"])";
    auto hook = [&](const std::string& stage) {
      return absl::StrCat("[{\"path\": ", Quote(SandfenceBinary()),
                          ", \"args\": [\"sandfence\", \"oci-hook\", "
                          "\"--socket\", ",
                          Quote(daemon_->dirs().socket()),
                          ", \"--timeout\", \"5\", ", Quote(stage), "]}]");
    };
    const std::string config = absl::StrCat(
        R"({"ociVersion": "1.0.2",
  "process": {"terminal": false, "user": {"uid": 0, "gid": 0},
    "args": [)",
        absl::StrJoin(quoted, ", "), R"(],
    "env": ["PATH=/bin"], "cwd": "/",
    "capabilities": {"bounding": )",
        caps, R"(, "effective": )", caps, R"(, "permitted": )", caps, R"(}},
  "root": {"path": "rootfs", "readonly": true},
  "hostname": "sandboxed",
  "mounts": [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755"]},
    {"destination": "/x", "type": "bind", "source": )",
        Quote(dir_->Path("shared")), R"(, "options": ["rbind", "rw"]},
    {"destination": "/.sandfence-enter", "type": "bind", "source": )",
        Quote(StaticEnter()), R"(, "options": ["bind", "ro"]}],
  "hooks": {"createRuntime": )",
        hook("createRuntime"), R"(, "poststop": )", hook("poststop"), R"(},
  "annotations": {)",
        absl::StrJoin(notes, ", "), R"(},
  "linux": {"namespaces": [{"type": "pid"}, {"type": "ipc"},
    {"type": "uts"}, {"type": "mount"}],
    "maskedPaths": [], "readonlyPaths": []}})");
    std::ofstream(bundle + "/config.json") << config;
    ids_.push_back(id);
    return bundle;
  }

  std::string Id(absl::string_view what) const {
    return absl::StrCat("sf-oci-enter-", what, "-", getpid());
  }

  // The record of an ended container's rollout, as `records show` says it.
  std::string ShowRecord(const std::string& rollout) {
    const std::string record =
        absl::StrCat(daemon_->dirs().records(), "/", rollout, ".record");
    EXPECT_EQ(access(record.c_str(), F_OK), 0) << record << " (poststop)";
    Child show({SandfenceBinary(), "records", "show", record}, dir_->path());
    EXPECT_EQ(show.Wait(), 0) << show.err();
    return show.out();
  }

  Listener model_, forbidden_;
};

// runc: the same busybox image and script with and without sandfence-enter
// as the entrypoint.
TEST_F(OciEnterTest, RuncEntrypointConfinesTheAgentUnderTheHooksPolicy) {
  const std::string script = Script();
  // The control: the hook's egress policy, no confinement.
  const std::string plain = Id("plain");
  auto c = Runc(Bundle(plain, Annotations(plain), {"/bin/sh", "-c", script}),
                plain);
  ASSERT_EQ(c->Wait(), 0) << c->out() << c->err() << daemon_->Log();
  const std::string control = c->out();
  EXPECT_THAT(control, HasSubstr("NoNewPrivs:\t0\n"));
  EXPECT_THAT(control, HasSubstr("oom=0\n"));
  EXPECT_THAT(control, HasSubstr("unshare=0\n"));
  EXPECT_THAT(control, HasSubstr("model=0\n"));
  EXPECT_THAT(control, HasSubstr("forbidden=1\n"));
  std::cout << "[ CONTROL ] runc, no enter:\n" << control;

  const std::string entered = Id("entered");
  c = Runc(Bundle(entered, Annotations(entered),
                  {"/.sandfence-enter", "--", "/bin/sh", "-c", script}),
           entered);
  ASSERT_EQ(c->Wait(), 0) << c->out() << c->err() << daemon_->Log();
  const std::string out = c->out();
  std::cout << "[ ENTERED ] runc, sandfence-enter:\n" << out << c->err();
  EXPECT_THAT(out, HasSubstr("NoNewPrivs:\t1\n"));
  EXPECT_THAT(out, HasSubstr("Seccomp:\t2\n"));
  EXPECT_THAT(out, HasSubstr("oom=1\n"));  // Landlock: /proc is read-only
  EXPECT_THAT(c->err(), HasSubstr("oom_score_adj: Permission denied"));
  EXPECT_THAT(out, HasSubstr("unshare=1\n"));  // seccomp
  EXPECT_THAT(c->err(), HasSubstr("Operation not permitted"));
  EXPECT_THAT(out, HasSubstr("model=0\n"));      // the hook's policy allows
  EXPECT_THAT(out, HasSubstr("forbidden=1\n"));  // and denies (EPERM)
  EXPECT_THAT(out, HasSubstr("libs=1\n"));       // nothing but busybox
  // CAP_NET_RAW and CAP_MKNOD were the container's (the control had
  // them); enter dropped them, and kept CAP_KILL (not one it drops).
  for (const std::string* o : {&control, &out}) {
    const uint64_t eff = CapEff(*o);
    const bool dropped = o == &out;
    EXPECT_EQ((eff >> CAP_NET_RAW) & 1, dropped ? 0u : 1u) << *o;
    EXPECT_EQ((eff >> CAP_MKNOD) & 1, dropped ? 0u : 1u) << *o;
    EXPECT_EQ((eff >> CAP_KILL) & 1, 1u) << *o;
  }
  const std::string shown = ShowRecord(entered);
  EXPECT_THAT(shown, HasSubstr(absl::StrCat("127.0.0.4:", forbidden_.port)));
}

// A process the runtime execs into the running container (`runc exec`,
// `podman exec`) shares its namespaces and cgroup but not the agent's
// Landlock domain: the agent can name it and cannot signal or read it.
// Without sandfence-enter the same agent kills it.
TEST_F(OciEnterTest, AnExecIntoTheContainerIsOutsideTheAgentsDomain) {
  const std::string shared = dir_->Path("shared");
  for (bool enter : {true, false}) {
    SCOPED_TRACE(enter ? "sandfence-enter" : "no enter (control)");
    for (const char* f : {"ready", "victim", "done", "go"}) {
      unlink(absl::StrCat(shared, "/", f).c_str());
    }
    const std::string script =
        "echo > /x/ready; "
        "while [ ! -e /x/victim ]; do busybox sleep 0.05; done; "
        "v=$(busybox cat /x/victim); "
        "busybox cat /proc/$v/environ >/dev/null; echo environ=$?; "
        "kill -9 $v; echo kill=$?; echo > /x/done; "
        "while [ ! -e /x/go ]; do busybox sleep 0.05; done";
    const std::string id = Id(enter ? "domain" : "domain-plain");
    std::vector<std::string> args = {"/bin/sh", "-c", script};
    if (enter) args.insert(args.begin(), {"/.sandfence-enter", "--"});
    auto c = Runc(Bundle(id, Annotations(id), args), id);
    ASSERT_TRUE(WaitFor(shared + "/ready", 30000))
        << c->err() << daemon_->Log();
    Child exec({kRunc, "--root", dir_->Path("runc"), "exec", id, "/bin/sh",
                "-c",
                "echo $$ > /x/victim.tmp; busybox mv /x/victim.tmp /x/victim; "
                "exec busybox sleep 1000"},
               dir_->path());
    ASSERT_TRUE(WaitFor(shared + "/done", 30000)) << c->out() << c->err();
    if (enter) {
      EXPECT_TRUE(exec.Running()) << "the exec'd process died";
    } else {
      EXPECT_EQ(exec.Wait(), 128 + SIGKILL) << exec.err();
    }
    std::ofstream(shared + "/go") << "";
    ASSERT_EQ(c->Wait(), 0) << c->out() << c->err();
    const std::string out = c->out();
    EXPECT_THAT(out, HasSubstr(enter ? "environ=1\n" : "environ=0\n"));
    EXPECT_THAT(out, HasSubstr(enter ? "kill=1\n" : "kill=0\n"));
    if (enter) {
      EXPECT_THAT(c->err(), HasSubstr("Operation not permitted"));
      EXPECT_THAT(c->err(), HasSubstr("Permission denied"));
    }
    std::cout << "[ " << (enter ? "ENTERED" : "CONTROL") << " ] " << out;
    exec.Wait();  // gone with the container's PID namespace
  }
}

// podman: sandfence-enter as the command of a --rootfs container (bound in
// with -v), the hook from the hooks.d files the package installs. podman
// has a seccomp filter of its own: sandfence's is a second one.
TEST_F(OciEnterTest, PodmanEntrypointConfinesTheAgentUnderTheHooksPolicy) {
  if (access(kPodman, X_OK) != 0) {
    GTEST_SKIP() << "needs podman (scripts/install-deps.sh --test installs it)";
  }
  const std::string hooks = dir_->Path("hooks.d");
  WriteHooksDir(hooks);
  if (HasFatalFailure()) return;
  const std::string root = dir_->Path("podman-root");
  BusyboxRoot(root);
  auto podman = [&](const std::string& rollout,
                    std::vector<std::string> command) {
    std::vector<std::string> argv = {
        kPodman, "--runtime", kRunc, "--hooks-dir", hooks, "--root",
        dir_->Path("podman-storage"), "--runroot", dir_->Path("podman-run"),
        "--storage-driver", "vfs", "run", "--rm", "--network", "host",
        "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
        "-v", absl::StrCat(StaticEnter(), ":/.sandfence-enter:ro")};
    for (const auto& [k, v] : Annotations(rollout)) {
      argv.insert(argv.end(), {"--annotation", absl::StrCat(k, "=", v)});
    }
    argv.insert(argv.end(), {"--rootfs", root});
    argv.insert(argv.end(), command.begin(), command.end());
    return std::make_unique<Child>(argv, dir_->path());
  };
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  ASSERT_TRUE(mount.ok()) << mount.status();
  const std::string libpod_parent = *mount + "/libpod_parent";
  const bool had_parent = access(libpod_parent.c_str(), F_OK) == 0;
  absl::Cleanup remove_parent = [&] {
    if (!had_parent) rmdir(libpod_parent.c_str());
  };
  const std::string script = Script();
  const std::string plain = absl::StrCat("podman-plain-", getpid());
  auto c = podman(plain, {"/bin/sh", "-c", script});
  if (int st = c->Wait(); st != 0) {
    GTEST_SKIP() << "podman cannot run this container here (exit " << st
                 << "): " << c->err();
  }
  std::string out = c->out();
  std::cout << "[ CONTROL ] podman, no enter:\n" << out;
  EXPECT_THAT(out, HasSubstr("NoNewPrivs:\t0\n"));
  EXPECT_THAT(out, HasSubstr("Seccomp_filters:\t1\n"));  // podman's
  EXPECT_THAT(out, HasSubstr("oom=0\n"));
  EXPECT_THAT(out, HasSubstr("unshare=0\n"));
  EXPECT_THAT(out, HasSubstr("forbidden=1\n"));

  const std::string entered = absl::StrCat("podman-enter-", getpid());
  c = podman(entered,
             {"/.sandfence-enter", "--", "/bin/sh", "-c", script});
  ASSERT_EQ(c->Wait(), 0) << c->out() << c->err() << daemon_->Log();
  out = c->out();
  std::cout << "[ ENTERED ] podman, sandfence-enter:\n" << out << c->err();
  EXPECT_THAT(out, HasSubstr("NoNewPrivs:\t1\n"));
  EXPECT_THAT(out, HasSubstr("Seccomp:\t2\n"));
  EXPECT_THAT(out, HasSubstr("Seccomp_filters:\t2\n"));  // podman's + ours
  EXPECT_THAT(out, HasSubstr("oom=1\n"));
  EXPECT_THAT(c->err(), HasSubstr("oom_score_adj: Permission denied"));
  EXPECT_THAT(out, HasSubstr("unshare=1\n"));
  EXPECT_THAT(out, HasSubstr("model=0\n"));
  EXPECT_THAT(out, HasSubstr("forbidden=1\n"));
  EXPECT_THAT(out, HasSubstr("libs=1\n"));
  EXPECT_THAT(ShowRecord(entered),
              HasSubstr(absl::StrCat("127.0.0.4:", forbidden_.port)));
}

}  // namespace
}  // namespace sandfence::testing
