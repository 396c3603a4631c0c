// The base of the suites that run containers under a real OCI runtime with
// sandfence's hook and a real daemon: the runtime's state, the bundles and
// the shared directory in a temporary directory, containers deleted at the
// end.
#ifndef SANDFENCE_TESTS_OCI_OCI_FIXTURE_H_
#define SANDFENCE_TESTS_OCI_OCI_FIXTURE_H_

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "support/child_process.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "support/test_files.h"
#include "tests/daemon/daemon_fixture.h"

namespace sandfence::testing {

inline constexpr char kRunc[] = "/usr/sbin/runc";

// `s` as a JSON string.
inline std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Whether `path` exists within `ms` milliseconds.
inline bool WaitFor(const std::string& path, int ms) {
  for (int i = 0; i < ms / 10 && access(path.c_str(), F_OK) != 0; ++i) {
    usleep(10 * 1000);
  }
  return access(path.c_str(), F_OK) == 0;
}

class OciTest : public ::testing::Test {
 protected:
  // Skips without root, a kernel that runs the egress programs, or runc;
  // makes dir_ with policies/ (the daemon's --policy-dir), shared/ and
  // runc/ (runc's state). A suite's own SetUp calls this first, and
  // returns when it skipped or failed.
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    SANDFENCE_REQUIRE_HOST(HostKernelRunsEgress());
    if (access(kRunc, X_OK) != 0) {
      GTEST_SKIP() << "needs runc (" << kRunc
                   << "; scripts/install-deps.sh --test installs it)";
    }
    absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<ScopedTempDir>(*std::move(dir));
    for (const char* d : {"policies", "shared", "runc"}) {
      ASSERT_EQ(mkdir(dir_->Path(d).c_str(), 0755), 0) << d;
    }
  }

  void TearDown() override {
    // A container left by a failed assertion dies before its cgroup goes.
    if (dir_ != nullptr) {
      for (const std::string& id : ids_) {
        Child kill(
            {kRunc, "--root", dir_->Path("runc"), "delete", "--force", id},
            dir_->path());
        kill.Wait();
      }
    }
    daemon_.reset();
  }

  // The daemon (its directories named `name`), with the policies of
  // dir_/policies.
  void StartDaemon(absl::string_view name) {
    daemon_ = std::make_unique<DaemonProcess>(
        MakeDaemonDirs(name),
        std::vector<std::string>{"--policy-dir", dir_->Path("policies")});
    daemon_->Start();
  }

  // `runc run` of `bundle` as container `id` (deleted at TearDown when
  // the bundle's maker added it to ids_).
  std::unique_ptr<Child> Runc(const std::string& bundle,
                              const std::string& id) {
    return std::make_unique<Child>(
        std::vector<std::string>{kRunc, "--root", dir_->Path("runc"), "run",
                                 "--bundle", bundle, id},
        dir_->path());
  }

  // The hooks.d files the package installs (packaging/oci), in `hooks`
  // (made here), rewritten only to name this build's binary and this
  // test's daemon.
  void WriteHooksDir(const std::string& hooks) {
    ASSERT_EQ(mkdir(hooks.c_str(), 0755), 0);
    for (const char* name : {"sandfence-create.json", "sandfence-stop.json"}) {
      google::protobuf::Struct hook;
      ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                      FileContents(absl::StrCat(SANDFENCE_SOURCE,
                                                "/packaging/oci/", name)),
                      &hook)
                      .ok())
          << name;
      auto* h = (*hook.mutable_fields())["hook"].mutable_struct_value();
      (*h->mutable_fields())["path"].set_string_value(SandfenceBinary());
      auto* args = (*h->mutable_fields())["args"].mutable_list_value();
      ASSERT_EQ(args->values_size(), 3) << name;
      ASSERT_EQ(args->values(1).string_value(), "oci-hook") << name;
      const std::string stage = args->values(2).string_value();
      args->mutable_values(2)->set_string_value("--socket");
      args->add_values()->set_string_value(daemon_->dirs().socket());
      args->add_values()->set_string_value(stage);
      std::string json;
      ASSERT_TRUE(
          google::protobuf::util::MessageToJsonString(hook, &json).ok());
      std::ofstream(absl::StrCat(hooks, "/", name)) << json;
    }
  }

  std::unique_ptr<ScopedTempDir> dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::vector<std::string> ids_;
};

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_OCI_OCI_FIXTURE_H_
