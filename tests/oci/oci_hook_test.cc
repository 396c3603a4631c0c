// `sandfence oci-hook` under a real OCI runtime (issue 17): runc runs a
// container from a bundle this test writes (the host's /usr, /lib, ... bound
// read-only; nothing pulled), with the hook in the bundle's config.json, and
// podman runs one with the hook from packaging/oci's hooks.d files. A real
// daemon, real cgroups and BPF; every connection to loopback only.
#include <fcntl.h>
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

class OciHookTest : public OciTest {
 protected:
  void SetUp() override {
    OciTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    model_ = Listen("127.0.0.2");
    tool_ = Listen("127.0.0.3");
    forbidden_ = Listen("127.0.0.4");
    // Two phases: the tool is forbidden in setup, granted in agent.
    ASSERT_TRUE(dir_->WriteFile("policies/two.textproto",
                                "name: \"two\"\n"
                                "phase { name: \"setup\" network_access: "
                                "MODEL_ONLY }\n"
                                "phase { name: \"agent\" network_access: "
                                "MODEL_AND_TOOLS }\n")
                    .ok());
    StartDaemon("oci");
  }

  std::string Model() const {
    return absl::StrCat("http://127.0.0.2:", model_.port, "/v1");
  }
  std::string Tool() const {
    return absl::StrCat("http://127.0.0.3:", tool_.port);
  }
  static std::string Port(const Listener& l) { return std::to_string(l.port); }

  // The hook as a bundle's config.json names it, for one stage.
  std::string HookJson(const std::string& stage,
                       const std::string& socket) const {
    return absl::StrCat("[{\"path\": ", Quote(SandfenceBinary()),
                        ", \"args\": [\"sandfence\", \"oci-hook\", "
                        "\"--socket\", ",
                        Quote(socket), ", \"--timeout\", \"5\", ",
                        Quote(stage), "]}]");
  }

  // A bundle whose root is an empty directory with the host's system
  // directories bound read-only, net_probe at /net_probe, and this test's
  // shared directory at /x (read-write). The host's network namespace:
  // the loopback listeners are its.
  std::string Bundle(const std::string& id,
                     const std::map<std::string, std::string>& annotations,
                     const std::string& script,
                     const std::string& socket = "") {
    const std::string bundle = dir_->Path(absl::StrCat("bundle-", id));
    const std::string root = bundle + "/rootfs";
    EXPECT_EQ(mkdir(bundle.c_str(), 0755), 0);
    EXPECT_EQ(mkdir(root.c_str(), 0755), 0);
    std::vector<std::string> mounts = {
        R"({"destination": "/proc", "type": "proc", "source": "proc"})",
        R"({"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755"]})"};
    for (const std::string& d : HostSystemDirs(root)) {
      mounts.push_back(absl::StrCat(R"({"destination": ")", d,
                                    R"(", "type": "bind", "source": ")", d,
                                    R"(", "options": ["rbind", "ro"]})"));
    }
    EXPECT_EQ(mkdir((root + "/x").c_str(), 0755), 0);
    mounts.push_back(absl::StrCat(
        R"({"destination": "/x", "type": "bind", "source": )",
        Quote(dir_->Path("shared")), R"(, "options": ["rbind", "rw"]})"));
    close(open((root + "/net_probe").c_str(), O_CREAT | O_WRONLY, 0755));
    mounts.push_back(absl::StrCat(
        R"({"destination": "/net_probe", "type": "bind", "source": )",
        Quote(NetProbe()), R"(, "options": ["bind", "ro"]})"));
    std::vector<std::string> notes;
    for (const auto& [k, v] : annotations) {
      notes.push_back(absl::StrCat(Quote(k), ": ", Quote(v)));
    }
    const std::string sock = socket.empty() ? daemon_->dirs().socket() : socket;
    const std::string config = absl::StrCat(
        R"({"ociVersion": "1.0.2",
  "process": {"terminal": false, "user": {"uid": 0, "gid": 0},
    "args": ["/bin/sh", "-c", )",
        Quote(script), R"(],
    "env": ["PATH=/usr/bin:/bin"], "cwd": "/", "noNewPrivileges": true},
  "root": {"path": "rootfs", "readonly": true},
  "hostname": "sandboxed",
  "mounts": [)",
        absl::StrJoin(mounts, ",\n    "), R"(],
  "hooks": {"createRuntime": )",
        HookJson("createRuntime", sock), R"(, "poststop": )",
        HookJson("poststop", sock), R"(},
  "annotations": {)",
        absl::StrJoin(notes, ", "), R"(},
  "linux": {"namespaces": [{"type": "pid"}, {"type": "ipc"},
    {"type": "uts"}, {"type": "mount"}],
    "maskedPaths": [], "readonlyPaths": []}})");
    std::ofstream(bundle + "/config.json") << config;
    ids_.push_back(id);
    return bundle;
  }

  // The host's system directories a root needs to run its programs: the
  // real ones are made in `root` (to be bound read-only) and returned; a
  // link among them (merged /usr: /bin -> usr/bin) is made as that link.
  static std::vector<std::string> HostSystemDirs(const std::string& root) {
    std::vector<std::string> dirs;
    for (const char* d : {"/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc"}) {
      struct stat st {};
      if (lstat(d, &st) != 0) continue;
      if (S_ISLNK(st.st_mode)) {
        char target[256] = {};
        EXPECT_GT(readlink(d, target, sizeof(target) - 1), 0);
        EXPECT_EQ(symlink(target, (root + d).c_str()), 0);
        continue;
      }
      EXPECT_EQ(mkdir((root + d).c_str(), 0755), 0);
      dirs.push_back(d);
    }
    return dirs;
  }

  std::string Id(absl::string_view what) const {
    return absl::StrCat("sf-oci-", what, "-", getpid());
  }

  Listener model_, tool_, forbidden_;
};

// The container's first instruction is already governed: its process is
// the forbidden connection itself (net_probe exits 1 on EPERM). Then a
// second container reaches the model and not the rest, and its record is in
// the daemon's records dir once it has exited.
TEST_F(OciHookTest, ModelOnlyFromTheFirstInstruction) {
  const std::map<std::string, std::string> notes = {
      {"sandfence.dev/network-access", "model_only"},
      {"sandfence.dev/model", Model()}};
  const std::string first = Id("first");
  auto c = Runc(Bundle(first, notes,
                       absl::StrCat("exec /net_probe tcp-connect 127.0.0.4 ",
                                    Port(forbidden_))),
                first);
  EXPECT_EQ(c->Wait(), 1) << "not EPERM at the first instruction\n"
                          << c->out() << c->err() << daemon_->Log();

  const std::string id = Id("model");
  c = Runc(Bundle(id, notes,
                  absl::StrCat("/net_probe tcp-connect 127.0.0.2 ",
                               Port(model_), "; echo model=$?; ",
                               "/net_probe tcp-connect 127.0.0.4 ",
                               Port(forbidden_), "; echo forbidden=$?")),
           id);
  ASSERT_EQ(c->Wait(), 0) << c->err() << daemon_->Log();
  EXPECT_TRUE(absl::StrContains(c->out(), "model=0")) << c->out();
  EXPECT_TRUE(absl::StrContains(c->out(), "forbidden=1")) << c->out();
  // poststop ended the rollout: its record is written, the rollout gone.
  const std::string record = absl::StrCat(daemon_->dirs().records(), "/", id,
                                          ".record");
  ASSERT_EQ(access(record.c_str(), F_OK), 0) << record << "\n" << c->err();
  Child show({SandfenceBinary(), "records", "show", record}, dir_->path());
  EXPECT_EQ(show.Wait(), 0) << show.err();
  EXPECT_TRUE(absl::StrContains(show.out(),
                                absl::StrCat("127.0.0.4:", forbidden_.port)))
      << show.out();
  const v1::ListRolloutsResponse open = daemon_->List();
  for (const v1::RolloutSummary& r : open.rollout()) {
    EXPECT_NE(r.rollout_id(), id) << "still open after poststop";
  }
}

// What cannot be enforced never starts: the runtime reports the hook's
// reason, and the command (which would leave a file) did not run.
TEST_F(OciHookTest, AnUnenforceableRequestNeverStarts) {
  const struct {
    const char* what;
    std::map<std::string, std::string> notes;
    std::string socket;
    const char* says;
  } cases[] = {
      {"a required tool under model_only",
       {{"sandfence.dev/network-access", "model_only"},
        {"sandfence.dev/model", Model()},
        {"sandfence.dev/required-tool", Tool()}},
       "",
       "is required, but model_only allows only the model server"},
      {"a misspelled annotation",
       {{"sandfence.dev/network-access", "model_only"},
        {"sandfence.dev/modle", Model()}},
       "",
       "unknown annotation sandfence.dev/modle"},
      {"no daemon",
       {{"sandfence.dev/network-access", "model_only"},
        {"sandfence.dev/model", Model()}},
       dir_->Path("no-daemon.sock"),
       "no sandfence daemon answers"},
  };
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string id = Id(absl::StrCat("refused", ++n));
    const std::string ran = absl::StrCat(dir_->Path("shared"), "/ran-", n);
    auto child =
        Runc(Bundle(id, c.notes, absl::StrCat("touch /x/ran-", n), c.socket),
             id);
    EXPECT_NE(child->Wait(), 0) << "the container started";
    EXPECT_TRUE(absl::StrContains(child->err(), c.says)) << child->err();
    EXPECT_NE(access(ran.c_str(), F_OK), 0) << "the command ran";
  }
}

// A running container's phase is switched by its rollout id from the CLI:
// the tool is refused in setup and reached in agent, by the same container.
TEST_F(OciHookTest, PhaseSwitchByRolloutIdWhileItRuns) {
  const std::string id = Id("phases");
  const std::string rollout = absl::StrCat("rollout-", getpid());
  const std::string t = absl::StrCat("/net_probe tcp-connect 127.0.0.3 ",
                                     Port(tool_));
  auto c = Runc(
      Bundle(id,
             {{"sandfence.dev/policy", "two.textproto"},
              {"sandfence.dev/rollout-id", rollout},
              {"sandfence.dev/model", Model()},
              {"sandfence.dev/tool", Tool()}},
             absl::StrCat(t, "; echo setup=$? > /x/first.tmp; ",
                          "mv /x/first.tmp /x/first; ",
                          "while [ ! -e /x/go ]; do sleep 0.05; done; ", t,
                          "; echo agent=$?")),
      id);
  const std::string shared = dir_->Path("shared");
  ASSERT_TRUE(WaitFor(shared + "/first", 20000)) << c->err() << daemon_->Log();
  EXPECT_EQ(FileContents(shared + "/first"), "setup=1\n");
  Child phase({SandfenceBinary(), "phase", "--socket", daemon_->dirs().socket(),
               rollout, "agent"},
              dir_->path());
  EXPECT_EQ(phase.Wait(), 0) << phase.err();
  EXPECT_TRUE(absl::StrContains(phase.out(), "setup -> agent")) << phase.out();
  std::ofstream(shared + "/go") << "";
  ASSERT_EQ(c->Wait(), 0) << c->err();
  EXPECT_TRUE(absl::StrContains(c->out(), "agent=0")) << c->out();
}

// podman runs the hook from the hooks.d files the package installs
// (packaging/oci; here rewritten only to name this build's binary and this
// test's daemon), matched on the container's annotations.
TEST_F(OciHookTest, PodmanRunsTheHooksDFiles) {
  constexpr char kPodman[] = "/usr/bin/podman";
  if (access(kPodman, X_OK) != 0) {
    GTEST_SKIP() << "needs podman (scripts/install-deps.sh --test installs it)";
  }
  const std::string hooks = dir_->Path("hooks.d");
  WriteHooksDir(hooks);
  if (HasFatalFailure()) return;
  const std::string root = dir_->Path("podman-root");
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  const std::vector<std::string> dirs = HostSystemDirs(root);
  // This host may lack CAP_SYS_RESOURCE (podman's default limits are then
  // refused) and crun refuses hybrid cgroup hosts: runc, and limits within
  // the host's.
  auto podman = [&](std::vector<std::string> run_args) {
    std::vector<std::string> argv = {
        kPodman, "--runtime", kRunc, "--hooks-dir", hooks, "--root",
        dir_->Path("podman-storage"), "--runroot", dir_->Path("podman-run"),
        "--storage-driver", "vfs", "run", "--rm", "--network", "host",
        "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"};
    for (const std::string& d : dirs) {
      argv.insert(argv.end(), {"-v", absl::StrCat(d, ":", d, ":ro")});
    }
    argv.insert(argv.end(), {"-v", absl::StrCat(NetProbe(), ":/net_probe:ro")});
    argv.insert(argv.end(), run_args.begin(), run_args.end());
    return std::make_unique<Child>(argv, dir_->path());
  };
  // podman makes its parent cgroup on first use: made here, removed here.
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  ASSERT_TRUE(mount.ok()) << mount.status();
  const std::string libpod_parent = *mount + "/libpod_parent";
  const bool had_parent = access(libpod_parent.c_str(), F_OK) == 0;
  absl::Cleanup remove_parent = [&] {
    if (!had_parent) rmdir(libpod_parent.c_str());
  };
  // Without annotations the hook is not run: whether podman runs here.
  auto plain = podman({"--rootfs", root, "/bin/true"});
  if (int st = plain->Wait(); st != 0) {
    GTEST_SKIP() << "podman cannot run a container on this host (exit " << st
                 << "): " << plain->err();
  }
  const std::string rollout = absl::StrCat("podman-", getpid());
  auto c = podman(
      {"--annotation", "sandfence.dev/network-access=model_only",
       "--annotation", absl::StrCat("sandfence.dev/model=", Model()),
       "--annotation", absl::StrCat("sandfence.dev/rollout-id=", rollout),
       "--rootfs", root, "/bin/sh", "-c",
       absl::StrCat("/net_probe tcp-connect 127.0.0.4 ", Port(forbidden_),
                    "; echo forbidden=$?; /net_probe tcp-connect 127.0.0.2 ",
                    Port(model_), "; echo model=$?")});
  ASSERT_EQ(c->Wait(), 0) << c->err() << daemon_->Log();
  EXPECT_TRUE(absl::StrContains(c->out(), "forbidden=1")) << c->out();
  EXPECT_TRUE(absl::StrContains(c->out(), "model=0")) << c->out();
  const std::string record = absl::StrCat(daemon_->dirs().records(), "/",
                                          rollout, ".record");
  EXPECT_EQ(access(record.c_str(), F_OK), 0) << record << " (poststop)";
}

}  // namespace
}  // namespace sandfence::testing
