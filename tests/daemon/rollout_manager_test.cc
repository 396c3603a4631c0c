// RolloutManager without gRPC: the daemon's core, driven directly. A
// "restart" here is destroying one manager and creating another over the
// same directories, as a new daemon process would.
#include "daemon/rollout_manager.h"

#include <bpf/bpf.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "daemon/daemon_fixture.h"
#include "egress/egress_abi.h"
#include "egress/egress_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "records/journal.h"
#include "support/test_env.h"

namespace sandfence::testing {
namespace {

class RolloutManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    model_ = Listen("127.0.0.2");
    dirs_ = MakeDaemonDirs("manager");
    options_.pin_dir = dirs_.pin_dir;
    options_.state_dir = dirs_.state();
    options_.records_dir = dirs_.records();
    options_.cgroup_parent = dirs_.cgroups;
    options_.resolvers = {*HostPort::Parse("127.0.0.1:9", 53)};
  }
  void TearDown() override {
    manager_.reset();
    if (!dirs_.root.empty()) {
      EXPECT_TRUE(RolloutManager::Cleanup(options_).ok());
      // Whatever the test did, cleanup leaves no pin behind (it removes
      // every set nobody uses, then the pin root).
      EXPECT_NE(access(dirs_.pin_dir.c_str(), F_OK), 0)
          << "pins left behind in " << dirs_.pin_dir;
      rmdir(dirs_.cgroups.c_str());
      std::error_code ignored;
      std::filesystem::remove_all(dirs_.root, ignored);
    }
  }

  void NewManager() {
    manager_.reset();
    absl::StatusOr<std::unique_ptr<RolloutManager>> m =
        RolloutManager::Create(options_);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  v1::StartRolloutRequest Request(const std::string& id) {
    v1::StartRolloutRequest req;
    req.set_rollout_id(id);
    req.mutable_sandbox()->set_create(true);
    req.set_policy_text(R"pb(
      phase {
        name: "a"
        network_access: MODEL_ONLY
        dns { mode: NONE }
      }
      phase { name: "b" network_access: INHERIT }
    )pb");
    req.mutable_endpoints()->add_model(
        absl::StrCat("http://127.0.0.2:", model_.port));
    return req;
  }

  Listener model_;
  DaemonDirs dirs_;
  ManagerOptions options_;
  std::unique_ptr<RolloutManager> manager_;
};

TEST_F(RolloutManagerTest, RestartAdoptsAndMarksTheGap) {
  ASSERT_NO_FATAL_FAILURE(NewManager());
  manager_->AdoptAndStart();
  absl::StatusOr<v1::StartRolloutResponse> started =
      manager_->Start(Request("r-1"));
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string cg = started->cgroup_path();
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.4", 27001), 1);

  ASSERT_NO_FATAL_FAILURE(
      NewManager());  // the old one is gone; the sandbox stays enforced
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.4", 27002), 1);
  std::vector<std::string> adopted = manager_->AdoptAndStart();
  ASSERT_EQ(adopted, std::vector<std::string>{"r-1"});
  v1::ListRolloutsResponse list = manager_->List();
  ASSERT_EQ(list.rollout_size(), 1);
  EXPECT_TRUE(list.rollout(0).adopted());
  EXPECT_EQ(list.rollout(0).phase(), "a");

  // Its generation is past every earlier one, and a new rollout does not
  // collide with it.
  absl::StatusOr<v1::StartRolloutResponse> other =
      manager_->Start(Request("r-2"));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_GT(other->generation(), started->generation());

  ASSERT_TRUE(manager_->SetPhase("r-1", "b").ok());
  EXPECT_EQ(ProbeIn(cg, "udp-connect", "127.0.0.4", 27003), 0);  // inherit
  EXPECT_EQ(ProbeIn(other->cgroup_path(), "tcp-connect", "127.0.0.4", 27004),
            1);

  absl::StatusOr<v1::EndRolloutResponse> ended = manager_->End("r-1");
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->journal_path_size(), 2);
  bool gap = false;
  for (const v1::RecordWarning& w : ended->record().warning()) {
    gap |= w.kind() == v1::WARNING_HANDOVER;
  }
  EXPECT_TRUE(gap) << absl::StrJoin(WarningTexts(ended->record()), "\n");
  EXPECT_TRUE(ended->record().lossy());
  ASSERT_EQ(ended->record().timeline_size(), 3);  // a | a (adopted) | b
  EXPECT_EQ(ended->record().timeline(1).name(), "a");
  EXPECT_EQ(ended->record().timeline(2).name(), "b");
  ASSERT_TRUE(manager_->End("r-2").ok());
}

TEST_F(RolloutManagerTest, CleanupDetachesAndRemovesEverything) {
  ASSERT_NO_FATAL_FAILURE(NewManager());
  manager_->AdoptAndStart();
  absl::StatusOr<v1::StartRolloutResponse> started =
      manager_->Start(Request("c-1"));
  ASSERT_TRUE(started.ok()) << started.status();
  manager_.reset();
  ASSERT_TRUE(RolloutManager::Cleanup(options_).ok());
  struct stat st {};
  EXPECT_NE(stat(dirs_.pin_dir.c_str(), &st), 0) << "pins left";
  EXPECT_NE(stat(started->cgroup_path().c_str(), &st), 0) << "sandbox left";
  for (const auto& e : std::filesystem::directory_iterator(dirs_.state())) {
    EXPECT_NE(e.path().extension(), ".state") << e.path();
  }
}

}  // namespace
}  // namespace sandfence::testing

namespace sandfence::testing {
namespace {

// A sandbox that went away while no daemon ran: the rollout is still
// adopted, and ends with its record.
TEST_F(RolloutManagerTest, AdoptsARolloutWhoseSandboxIsGone) {
  ASSERT_NO_FATAL_FAILURE(NewManager());
  manager_->AdoptAndStart();
  absl::StatusOr<v1::StartRolloutResponse> started =
      manager_->Start(Request("gone-1"));
  ASSERT_TRUE(started.ok()) << started.status();
  manager_.reset();
  ASSERT_EQ(rmdir(started->cgroup_path().c_str()), 0) << strerror(errno);

  ASSERT_NO_FATAL_FAILURE(NewManager());
  EXPECT_EQ(manager_->AdoptAndStart(), std::vector<std::string>{"gone-1"});
  absl::StatusOr<v1::EndRolloutResponse> ended = manager_->End("gone-1");
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->record().rollout_id(), "gone-1");
  EXPECT_TRUE(ended->record().complete());
  EXPECT_EQ(manager_->List().rollout_size(), 0);
}

// A sandbox the caller owns (cgroup_path) is detached at the end, never
// killed or removed.
TEST_F(RolloutManagerTest, ExistingCgroupIsDetachedNotKilled) {
  ASSERT_NO_FATAL_FAILURE(NewManager());
  manager_->AdoptAndStart();
  const std::string path = dirs_.cgroups + "/theirs";
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  absl::StatusOr<Cgroup> cg = Cgroup::Open(path);
  ASSERT_TRUE(cg.ok());
  SpawnOptions spawn;
  spawn.cgroup_fd = cg->fd();
  spawn.argv = {"sleep", "30"};
  absl::StatusOr<pid_t> sleeper = SpawnInCgroup(spawn);
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();

  v1::StartRolloutRequest req = Request("theirs-1");
  req.mutable_sandbox()->set_cgroup_path(path);
  absl::StatusOr<v1::StartRolloutResponse> started = manager_->Start(req);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(ProbeIn(path, "tcp-connect", "127.0.0.4", 28001), 1);
  ASSERT_TRUE(manager_->End("theirs-1").ok());
  EXPECT_EQ(kill(*sleeper, 0), 0) << "the caller's process was killed";
  EXPECT_EQ(ProbeIn(path, "tcp-connect", "127.0.0.2", model_.port), 0);
  EXPECT_EQ(ProbeIn(path, "tcp-connect", "127.0.0.4", 28002), 111)
      << "not detached at EndRollout";  // ECONNREFUSED: nobody listens
  kill(*sleeper, SIGKILL);
  (void)WaitForExit(*sleeper);
  rmdir(path.c_str());
}

}  // namespace
}  // namespace sandfence::testing

namespace sandfence::testing {
namespace {

// Keys of a pinned rule map that belong to `generation`.
template <typename K>
int KeysOfGeneration(const std::string& map_path, uint32_t generation) {
  int fd = bpf_obj_get(map_path.c_str());
  if (fd < 0) return -1;
  int n = 0;
  K key{}, next{};
  const K* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    if (next.generation == generation) ++n;
    key = next;
    prev = &key;
  }
  close(fd);
  return n;
}

// An adopted sandbox's rules are not known to the new daemon: its first
// switch finds them in the pinned maps by generation and deletes them all,
// exact and prefix rules alike.
TEST_F(RolloutManagerTest, AdoptedGenerationIsDeletedAtTheNextSwitch) {
  ASSERT_NO_FATAL_FAILURE(NewManager());
  manager_->AdoptAndStart();
  v1::StartRolloutRequest req = Request("gen-1");
  v1::AllowRule* cidr = req.mutable_endpoints()->add_allow();
  cidr->set_host("127.0.10.0/24");
  cidr->set_port(8080);
  absl::StatusOr<v1::StartRolloutResponse> started = manager_->Start(req);
  ASSERT_TRUE(started.ok()) << started.status();
  const uint32_t old_generation = started->generation();
  const std::string maps = PinsOf(dirs_.pin_dir).MapsDir() + "/";
  ASSERT_GT(KeysOfGeneration<sf_exact4_key>(maps + "sf_exact4", old_generation),
            0);
  ASSERT_GT(KeysOfGeneration<sf_cidr4_key>(maps + "sf_cidr4", old_generation),
            0);

  ASSERT_NO_FATAL_FAILURE(NewManager());
  ASSERT_EQ(manager_->AdoptAndStart().size(), 1u);
  EXPECT_EQ(
      ProbeIn(started->cgroup_path(), "tcp-connect", "127.0.0.2", model_.port),
      0)
      << "the adopted rules still apply";
  ASSERT_TRUE(manager_->SetPhase("gen-1", "b").ok());
  // Deleted after SetPhase returned, by the controller's reaper.
  EXPECT_TRUE(Eventually([&] {
    return KeysOfGeneration<sf_exact4_key>(maps + "sf_exact4",
                                           old_generation) == 0 &&
           KeysOfGeneration<sf_cidr4_key>(maps + "sf_cidr4",
                                          old_generation) == 0;
  })) << "the adopted generation was left behind";
  ASSERT_TRUE(manager_->End("gen-1").ok());
}

}  // namespace
}  // namespace sandfence::testing

namespace sandfence::testing {
namespace {

// Two daemons over the same state and pins would hand out the same
// generations: the second one is refused, retryably.
TEST_F(RolloutManagerTest, OneManagerPerStateDirectory) {
  ASSERT_NO_FATAL_FAILURE(NewManager());
  absl::StatusOr<std::unique_ptr<RolloutManager>> second =
      RolloutManager::Create(options_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(RefusalOf(second.status()), Refusal::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()),
              ::testing::HasSubstr("another sandfence daemon"));
  // Nor may --cleanup pull the pins from under a running daemon.
  absl::Status cleanup = RolloutManager::Cleanup(options_);
  EXPECT_EQ(RefusalOf(cleanup), Refusal::kUnavailable) << cleanup;
  manager_.reset();
  ASSERT_NO_FATAL_FAILURE(NewManager());  // free again once the first is gone
}

}  // namespace
}  // namespace sandfence::testing

namespace sandfence::testing {
namespace {

// Policies by name from the policy directory, and only from there.
TEST_F(RolloutManagerTest, PolicyFileComesFromThePolicyDirectory) {
  const std::string dir = dirs_.root + "/policies";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  {
    std::ofstream f(dir + "/gym.textproto");
    f << "name: \"gym\"\n"
         "phase { name: \"agent\" network_access: MODEL_ONLY "
         "dns { mode: NONE } }\n";
  }
  options_.policy_dir = dir;
  ASSERT_NO_FATAL_FAILURE(NewManager());
  manager_->AdoptAndStart();
  struct Case {
    const char* name;
    std::string file;
    Refusal refusal;
  };
  const Case cases[] = {
      {"a file in the directory", "gym.textproto", Refusal::kNone},
      {"a path out of it", "../state/.lock", Refusal::kMalformed},
      {"a hidden file", ".gym", Refusal::kMalformed},
      {"a missing file", "nope.textproto", Refusal::kMalformed},
  };
  int n = 0;
  for (const Case& c : cases) {
    v1::StartRolloutRequest req = Request(absl::StrCat("file-", ++n));
    req.set_policy_file(c.file);
    absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(req);
    EXPECT_EQ(RefusalOf(r.status()), c.refusal) << c.name << ": " << r.status();
    if (r.ok()) {
      EXPECT_EQ(r->policy_name(), "gym") << c.name;
      EXPECT_EQ(r->phase(), "agent") << c.name;
      EXPECT_TRUE(manager_->End(req.rollout_id()).ok()) << c.name;
    }
  }
}

// A restarted daemon switches an adopted rollout by the rules compiled at
// its start (persisted in its state), not by re-reading a policy file that
// changed meanwhile: the record's header and the kernel keep agreeing.
TEST_F(RolloutManagerTest, AdoptionKeepsTheCompiledPolicyNotTheFile) {
  const std::string dir = dirs_.root + "/policies";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  Listener first = Listen("127.0.0.3"), second = Listen("127.0.0.3");
  auto write_policy = [&](uint16_t port) {
    std::ofstream f(dir + "/p.textproto", std::ios::trunc);
    f << "name: \"p\"\n"
         "phase { name: \"setup\" network_access: INHERIT }\n"
         "phase { name: \"agent\" network_access: MODEL_ONLY "
         "dns { mode: NONE } allow { name: \"x\" host: \"127.0.0.3\" port: "
      << port << " } }\n";
  };
  write_policy(first.port);
  options_.policy_dir = dir;
  ASSERT_NO_FATAL_FAILURE(NewManager());
  manager_->AdoptAndStart();
  v1::StartRolloutRequest req = Request("file-adopt");
  req.clear_policy_text();
  req.set_policy_file("p.textproto");
  absl::StatusOr<v1::StartRolloutResponse> started = manager_->Start(req);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->phase(), "setup");

  write_policy(second.port);  // the file changes under the rollout
  ASSERT_NO_FATAL_FAILURE(NewManager());
  ASSERT_EQ(manager_->AdoptAndStart(),
            std::vector<std::string>{"file-adopt"});
  ASSERT_TRUE(manager_->SetPhase("file-adopt", "agent").ok());
  const std::string cg = started->cgroup_path();
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.3", first.port), 0)
      << "the rule compiled at the start";
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.3", second.port), 1)
      << "the file's new rule must not apply to a running rollout";
  ASSERT_TRUE(manager_->End("file-adopt").ok());
}

}  // namespace
}  // namespace sandfence::testing
