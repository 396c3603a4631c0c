// RolloutManager's own rules over FakeEnforcement (no root, no BPF):
// idempotent retries, borrowing, refusals that leave nothing behind, phase
// rules, adoption by a successor over the same state directory, and
// decisions made by status codes, never by error text. The kernel side is
// covered by rollout_manager_test and the daemon's e2e tests.
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/cgroup.h"
#include "daemon/metrics_server.h"
#include "daemon/rollout_manager.h"
#include "daemon/state_store.h"
#include "egress/egress_abi.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandbox/fake_enforcement.h"
#include "support/test_files.h"

namespace sandfence::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kTwoPhases[] = R"pb(
  phase {
    name: "agent"
    network_access: MODEL_ONLY
    dns { mode: NONE }
  }
  phase { name: "verify" network_access: INHERIT }
  phase {
    name: "grade"
    network_access: MODEL_ONLY
    dns { mode: NONE }
  }
)pb";
constexpr char kInheritOnly[] = R"pb(
  phase { name: "watch" network_access: INHERIT }
  phase { name: "after" network_access: INHERIT }
)pb";

// Files in dir whose name ends with suffix.
std::vector<std::string> FilesEndingWith(const std::string& dir,
                                         absl::string_view suffix) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    if (absl::EndsWith(e->d_name, suffix)) out.push_back(e->d_name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// A cgroup of this test's own making when it may make one (root): one
// found by searching could be another test's, removed under it (ctest -j2).
std::string OwnForeignCgroup(const std::string& mount) {
  static const std::string made = [&]() -> std::string {
    const std::string path =
        absl::StrCat(mount, "/sf-foreign-", static_cast<long>(::getpid()));
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return "";
    static std::string to_remove;
    to_remove = path;
    std::atexit([] { ::rmdir(to_remove.c_str()); });
    return path;
  }();
  return made;
}

// A cgroup v2 directory a rollout may name as its sandbox: not the root,
// not one holding this test process, not deeper than the kernel judges.
// The manager inspects cgroup_path on disk (InspectCgroup) before the
// enforcement sees it; the fake never writes to it.
std::string FindForeignCgroup() {
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  absl::StatusOr<std::string> mine = CgroupOfPid(::getpid());
  if (!mount.ok() || !mine.ok()) return "";
  if (std::string made = OwnForeignCgroup(*mount); !made.empty()) return made;
  const std::string own = absl::StrCat(*mount, *mine == "/" ? "" : *mine);
  std::vector<std::pair<std::string, int>> todo = {{*mount, 0}};
  while (!todo.empty()) {
    auto [dir, level] = todo.front();
    todo.erase(todo.begin());
    if (level >= 3) continue;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    std::vector<std::string> subdirs;
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      // Other tests' and sandfence's own cgroups come and go.
      if (absl::StartsWith(name, "sandfence") || absl::StartsWith(name, "sf-")) {
        continue;
      }
      const std::string path = absl::StrCat(dir, "/", name);
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
      subdirs.push_back(path);
    }
    ::closedir(d);
    std::sort(subdirs.begin(), subdirs.end());
    for (const std::string& path : subdirs) {
      const bool ours =
          own == path || absl::StartsWith(own, absl::StrCat(path, "/"));
      if (!ours && level + 1 <= SF_MAX_CGROUP_DEPTH) return path;
      todo.push_back({path, level + 1});
    }
  }
  return "";
}

class RolloutManagerUnitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<ScopedTempDir>(*std::move(dir));
    options_.state_dir = dir_->Path("state");
    options_.records_dir = dir_->Path("records");
    options_.cgroup_parent = "/fake/sandfence";
    options_.resolvers = {*HostPort::Parse("127.0.0.1:9", 53)};
    options_.reap_interval_ms = 0;
    kernel_ = std::make_shared<FakeKernel>();
    ASSERT_NO_FATAL_FAILURE(NewManager());
  }

  void NewManager() {
    manager_.reset();  // a daemon that stopped: its rollouts stay enforced
    absl::StatusOr<std::unique_ptr<RolloutManager>> m =
        RolloutManager::CreateWith(options_,
                                   std::make_unique<FakeEnforcement>(kernel_));
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  static v1::StartRolloutRequest Request(const std::string& id) {
    v1::StartRolloutRequest req;
    req.set_rollout_id(id);
    req.mutable_sandbox()->set_create(true);
    req.set_policy_text(kTwoPhases);
    req.mutable_endpoints()->add_model("http://127.0.0.2:9");
    return req;
  }

  static v1::StartRolloutRequest OnCgroup(const std::string& id,
                                          const std::string& cgroup,
                                          bool borrowed) {
    v1::StartRolloutRequest req = Request(id);
    req.mutable_sandbox()->set_cgroup_path(cgroup);
    req.set_borrowed(borrowed);
    if (borrowed) req.set_policy_text(kInheritOnly);
    return req;
  }

  std::unique_ptr<ScopedTempDir> dir_;
  ManagerOptions options_;
  std::shared_ptr<FakeKernel> kernel_;
  std::unique_ptr<RolloutManager> manager_;
};

#define REQUIRE_FOREIGN_CGROUP(var)                                      \
  const std::string var = FindForeignCgroup();                           \
  if (var.empty()) {                                                     \
    GTEST_SKIP() << "no cgroup v2 directory on this host outside this "  \
                    "test's own cgroup chain (needed as a cgroup_path; " \
                    "the fake never writes to it)";                      \
  }

// --- Idempotent retries ---

TEST_F(RolloutManagerUnitTest, SameRequestGetsTheSameAnswer) {
  absl::StatusOr<v1::StartRolloutResponse> first =
      manager_->Start(Request("r1"));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<v1::StartRolloutResponse> again =
      manager_->Start(Request("r1"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(DeterministicBytes(*again), DeterministicBytes(*first));
  EXPECT_EQ(kernel_->CallCount(FakeCall::kCreateCgroup), 1);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAttachEgress), 1);
  EXPECT_EQ(first->generation(),
            kernel_->Egress(first->cgroup_id())->generation);
}

TEST_F(RolloutManagerUnitTest, ConcurrentRetriesStartOnce) {
  constexpr int kThreads = 8;
  absl::Notification go;
  absl::Mutex mu;
  std::vector<absl::StatusOr<v1::StartRolloutResponse>> answers;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      go.WaitForNotification();
      absl::StatusOr<v1::StartRolloutResponse> r =
          manager_->Start(Request("r1"));
      absl::MutexLock lock(&mu);
      answers.push_back(std::move(r));
    });
  }
  go.Notify();
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(answers.size(), static_cast<size_t>(kThreads));
  ASSERT_TRUE(answers[0].ok()) << answers[0].status();
  for (const auto& a : answers) {
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(DeterministicBytes(*a), DeterministicBytes(*answers[0]));
  }
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAttachEgress), 1);
}

TEST_F(RolloutManagerUnitTest, DifferentRequestWithAnOpenIdIsAlreadyExists) {
  ASSERT_TRUE(manager_->Start(Request("r1")).ok());
  v1::StartRolloutRequest other = Request("r1");
  other.set_initial_phase("verify");
  absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(other);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("different request"));
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAttachEgress), 1);
}

TEST_F(RolloutManagerUnitTest, EndedIdsAreNotReused) {
  ASSERT_TRUE(manager_->Start(Request("r1")).ok());
  ASSERT_TRUE(manager_->End("r1").ok());
  const int created = kernel_->CallCount(FakeCall::kCreateCgroup);
  for (const v1::StartRolloutRequest& req :
       {Request("r1"), OnCgroup("r1", "/elsewhere", false)}) {
    absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(req);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("not reused"));
  }
  EXPECT_EQ(kernel_->CallCount(FakeCall::kCreateCgroup), created);
  // A retried End gets the record again.
  absl::StatusOr<v1::EndRolloutResponse> end = manager_->End("r1");
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->record().rollout_id(), "r1");
}

// --- Borrowing ---

TEST_F(RolloutManagerUnitTest, BorrowingIsInheritOnlyAndAttachesNothing) {
  REQUIRE_FOREIGN_CGROUP(cgroup);
  absl::StatusOr<v1::StartRolloutResponse> owner =
      manager_->Start(OnCgroup("owner", cgroup, false));
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_EQ(owner->borrowed_from(), "");

  // Not asked as borrowed: refused, and says how.
  absl::StatusOr<v1::StartRolloutResponse> second =
      manager_->Start(OnCgroup("second", cgroup, false));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("part of open rollout \"owner\""));

  // Borrowed with a restricted phase: refused by the compiler.
  v1::StartRolloutRequest restricted = OnCgroup("b0", cgroup, true);
  restricted.set_policy_text(kTwoPhases);
  absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(restricted);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("only inherit"));

  // Borrowed, inherit only: a record, nothing attached.
  absl::StatusOr<v1::StartRolloutResponse> borrower =
      manager_->Start(OnCgroup("b1", cgroup, true));
  ASSERT_TRUE(borrower.ok()) << borrower.status();
  EXPECT_EQ(borrower->borrowed_from(), "owner");
  EXPECT_EQ(borrower->cgroup_id(), owner->cgroup_id());
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAttachEgress), 1);
  ASSERT_TRUE(manager_->SetPhase("b1", "after").ok());
  EXPECT_EQ(kernel_->CallCount(FakeCall::kSwitchEgress), 0);
  ASSERT_TRUE(manager_->End("b1").ok());
  EXPECT_TRUE(kernel_->Egress(owner->cgroup_id()).has_value())
      << "a borrower's end must leave the owner's enforcement";
  EXPECT_EQ(kernel_->CallCount(FakeCall::kDetachEgress), 0);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kRemoveGuard), 0);
  ASSERT_TRUE(manager_->End("owner").ok());
  EXPECT_FALSE(kernel_->Egress(owner->cgroup_id()).has_value());
  EXPECT_FALSE(kernel_->Cgroup(cgroup)->removed)
      << "an existing cgroup is never removed";
  EXPECT_EQ(kernel_->CallCount(FakeCall::kKillCgroup), 0);
}

// Borrowing was check-then-act: the owner map was read at start and
// written after the attach, so a concurrent owner could be refused (or two
// could both believe they own the cgroup).
TEST_F(RolloutManagerUnitTest, ConcurrentOwnerAndBorrowersExactlyOneOwner) {
  REQUIRE_FOREIGN_CGROUP(cgroup);
  constexpr int kRounds = 20;
  constexpr int kBorrowers = 7;
  for (int round = 0; round < kRounds; ++round) {
    const std::string owner_id = absl::StrCat("owner-", round);
    absl::Notification go;
    absl::Mutex mu;
    std::vector<
        std::pair<std::string, absl::StatusOr<v1::StartRolloutResponse>>>
        answers;
    std::vector<std::thread> threads;
    for (int i = 0; i <= kBorrowers; ++i) {
      const std::string id =
          i == 0 ? owner_id : absl::StrCat("borrower-", round, "-", i);
      const v1::StartRolloutRequest req = OnCgroup(id, cgroup, i != 0);
      threads.emplace_back([&, id, req] {
        go.WaitForNotification();
        absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(req);
        absl::MutexLock lock(&mu);
        answers.emplace_back(id, std::move(r));
      });
    }
    go.Notify();
    for (std::thread& t : threads) t.join();
    int owners = 0;
    for (const auto& [id, r] : answers) {
      ASSERT_TRUE(r.ok()) << "round " << round << ": " << id
                          << " refused: " << r.status();
      if (id == owner_id) {
        EXPECT_EQ(r->borrowed_from(), "") << "round " << round;
        ++owners;
      } else {
        // A borrower that came first borrows from nobody yet; later ones
        // name the owner.
        EXPECT_THAT(r->borrowed_from(), ::testing::AnyOf("", owner_id))
            << "round " << round << ": " << id;
      }
    }
    EXPECT_EQ(owners, 1);
    EXPECT_EQ(kernel_->AllEgress().size(), 1u) << "round " << round;
    for (const auto& [id, r] : answers) {
      ASSERT_TRUE(manager_->End(id).ok()) << id;
    }
    ASSERT_THAT(kernel_->AllEgress(), IsEmpty()) << "round " << round;
  }
}

TEST_F(RolloutManagerUnitTest,
       ConcurrentOwnersExactlyOneWinsOthersToldToBorrow) {
  REQUIRE_FOREIGN_CGROUP(cgroup);
  constexpr int kRounds = 20;
  constexpr int kOwners = 6;
  for (int round = 0; round < kRounds; ++round) {
    absl::Notification go;
    absl::Mutex mu;
    std::vector<
        std::pair<std::string, absl::StatusOr<v1::StartRolloutResponse>>>
        answers;
    std::vector<std::thread> threads;
    for (int i = 0; i < kOwners; ++i) {
      const std::string id = absl::StrCat("o-", round, "-", i);
      threads.emplace_back([&, id] {
        go.WaitForNotification();
        absl::StatusOr<v1::StartRolloutResponse> r =
            manager_->Start(OnCgroup(id, cgroup, false));
        absl::MutexLock lock(&mu);
        answers.emplace_back(id, std::move(r));
      });
    }
    go.Notify();
    for (std::thread& t : threads) t.join();
    std::string winner;
    for (const auto& [id, r] : answers) {
      if (r.ok()) {
        EXPECT_EQ(winner, "")
            << "round " << round << ": two owners, " << winner << " and " << id;
        winner = id;
        continue;
      }
      // Refused because another owns it, never because the kernel entry
      // was there already (two starts that both believed they owned it).
      EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition)
          << r.status();
      EXPECT_THAT(std::string(r.status().message()),
                  HasSubstr("borrowed = true"))
          << "round " << round << ": " << id;
    }
    ASSERT_NE(winner, "") << "round " << round << ": no owner at all";
    ASSERT_TRUE(manager_->End(winner).ok());
  }
}

// --- Refusals change nothing ---

TEST_F(RolloutManagerUnitTest, FailedAttachLeavesNothingBehind) {
  kernel_->FailNth(FakeCall::kAttachEgress, 1,
                   absl::InternalError("fake: the map is full"));
  absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(Request("r1"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(FilesEndingWith(options_.state_dir, ".state"), IsEmpty());
  EXPECT_THAT(FilesEndingWith(options_.records_dir, ".record"), IsEmpty());
  EXPECT_THAT(kernel_->AllEgress(), IsEmpty());
  EXPECT_TRUE(kernel_->Cgroup("/fake/sandfence/r1")->removed);
  EXPECT_EQ(manager_->List().rollout_size(), 0);
  const ManagerMetrics m = manager_->Metrics();
  EXPECT_EQ(m.rollouts_open, 0u);
  EXPECT_EQ(m.rollouts_started, 0u);
  EXPECT_EQ(m.refusals, 1u);
  EXPECT_FALSE(manager_->IsOpen("r1"));
  // The same id starts once the fault is gone: nothing of it was kept.
  absl::StatusOr<v1::StartRolloutResponse> again =
      manager_->Start(Request("r1"));
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST_F(RolloutManagerUnitTest, FailedAttachOnACgroupLeavesNoOwner) {
  REQUIRE_FOREIGN_CGROUP(cgroup);
  kernel_->FailNth(FakeCall::kAttachEgress, 1,
                   absl::InternalError("fake: the map is full"));
  ASSERT_FALSE(manager_->Start(OnCgroup("first", cgroup, false)).ok());
  EXPECT_THAT(FilesEndingWith(options_.state_dir, ".state"), IsEmpty());
  EXPECT_THAT(FilesEndingWith(options_.records_dir, ".record"), IsEmpty());
  // No owner entry was left: another rollout owns the cgroup, not borrows.
  absl::StatusOr<v1::StartRolloutResponse> next =
      manager_->Start(OnCgroup("next", cgroup, false));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->borrowed_from(), "");
  EXPECT_EQ(kernel_->AllEgress().size(), 1u);
}

TEST_F(RolloutManagerUnitTest, FailedGuardLeavesNothingBehind) {
  kernel_->FailNth(FakeCall::kAddGuard, 1,
                   absl::InternalError("fake: guard map is full"));
  absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(Request("r1"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("process guard"));
  EXPECT_THAT(FilesEndingWith(options_.state_dir, ".state"), IsEmpty());
  EXPECT_THAT(FilesEndingWith(options_.records_dir, ".record"), IsEmpty());
  EXPECT_THAT(kernel_->AllEgress(), IsEmpty());
  EXPECT_EQ(manager_->Metrics().rollouts_open, 0u);
}

TEST_F(RolloutManagerUnitTest, PolicyRefusalCreatesNothing) {
  v1::StartRolloutRequest req = Request("r1");
  req.clear_endpoints();  // model_only without a model: refused
  absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(kernel_->Calls(), IsEmpty());
  EXPECT_THAT(FilesEndingWith(options_.records_dir, ".record"), IsEmpty());
}

// --- Phase rules ---

TEST_F(RolloutManagerUnitTest, UnknownInitialPhaseIsMalformedWithTheNames) {
  v1::StartRolloutRequest req = Request("r1");
  req.set_initial_phase("review");
  absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("\"review\""));
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("agent, verify, grade"));
  EXPECT_EQ(kernel_->CallCount(FakeCall::kCreateCgroup), 0);
}

TEST_F(RolloutManagerUnitTest, SetPhaseRules) {
  absl::StatusOr<v1::StartRolloutResponse> started =
      manager_->Start(Request("r1"));
  ASSERT_TRUE(started.ok()) << started.status();
  const uint64_t id = started->cgroup_id();

  absl::StatusOr<v1::SetPhaseResponse> bad = manager_->SetPhase("r1", "review");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("agent, verify, grade"));
  EXPECT_EQ(kernel_->Egress(id)->generation, started->generation());

  absl::StatusOr<v1::SetPhaseResponse> v = manager_->SetPhase("r1", "verify");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->previous_phase(), "agent");
  EXPECT_EQ(v->phase(), "verify");
  EXPECT_EQ(v->generation(), kernel_->Egress(id)->generation);
  EXPECT_GT(v->generation(), started->generation());
  EXPECT_EQ(kernel_->Egress(id)->phase, 1);

  // A retry: the same generation, nothing switched.
  absl::StatusOr<v1::SetPhaseResponse> retry =
      manager_->SetPhase("r1", "verify");
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->generation(), v->generation());
  EXPECT_EQ(kernel_->CallCount(FakeCall::kSwitchEgress), 1);

  v1::ListRolloutsResponse list = manager_->List();
  ASSERT_EQ(list.rollout_size(), 1);
  EXPECT_EQ(list.rollout(0).phase(), "verify");
  EXPECT_EQ(list.rollout(0).generation(), v->generation());
  EXPECT_EQ(manager_->Metrics().phase_switches, 1u);

  EXPECT_EQ(manager_->SetPhase("nope", "verify").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(manager_->End("r1").ok());
  EXPECT_EQ(manager_->SetPhase("r1", "grade").status().code(),
            absl::StatusCode::kNotFound);
}

// --- Adoption ---

TEST_F(RolloutManagerUnitTest, SecondManagerIsRefusedWhileTheFirstRuns) {
  absl::StatusOr<std::unique_ptr<RolloutManager>> second =
      RolloutManager::CreateWith(options_,
                                 std::make_unique<FakeEnforcement>(kernel_));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(RolloutManagerUnitTest, SuccessorAdoptsWithTheKernelsPhase) {
  manager_->AdoptAndStart();
  absl::StatusOr<v1::StartRolloutResponse> r1 = manager_->Start(Request("r1"));
  ASSERT_TRUE(r1.ok()) << r1.status();
  absl::StatusOr<v1::StartRolloutResponse> r2 = manager_->Start(Request("r2"));
  ASSERT_TRUE(r2.ok()) << r2.status();
  absl::StatusOr<v1::SetPhaseResponse> v = manager_->SetPhase("r2", "verify");
  ASSERT_TRUE(v.ok()) << v.status();

  ASSERT_NO_FATAL_FAILURE(NewManager());
  // The first daemon is gone; everything it enforced is still enforced.
  ASSERT_TRUE(kernel_->Egress(r1->cgroup_id()).has_value());
  ASSERT_TRUE(kernel_->Guarded(r1->cgroup_id()).has_value());
  // It switched r1 to "grade" and died before saving that: the kernel
  // says grade, the state says agent.
  FakeEgress switched = *kernel_->Egress(r1->cgroup_id());
  switched.phase = 2;
  switched.generation = kernel_->last_generation() + 1;
  kernel_->PutEgress(r1->cgroup_id(), switched);

  std::vector<std::string> adopted = manager_->AdoptAndStart();
  std::sort(adopted.begin(), adopted.end());
  EXPECT_EQ(adopted, (std::vector<std::string>{"r1", "r2"}));
  v1::ListRolloutsResponse list = manager_->List();
  ASSERT_EQ(list.rollout_size(), 2);
  EXPECT_EQ(list.rollout(0).rollout_id(), "r1");
  EXPECT_TRUE(list.rollout(0).adopted());
  EXPECT_EQ(list.rollout(0).phase(), "grade");
  EXPECT_EQ(list.rollout(0).generation(), switched.generation);
  EXPECT_EQ(list.rollout(1).phase(), "verify");
  EXPECT_EQ(list.rollout(1).generation(), v->generation());
  EXPECT_EQ(manager_->Metrics().rollouts_adopted, 2u);
  // Adopted as they were: nothing attached, killed or guarded again.
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAttachEgress), 2);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kKillCgroup), 0);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAddGuard), 2);

  // A retried StartRollout of the same request still gets its answer.
  absl::StatusOr<v1::StartRolloutResponse> retry =
      manager_->Start(Request("r1"));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->cgroup_id(), r1->cgroup_id());
  // A new rollout gets a generation past every earlier one.
  absl::StatusOr<v1::StartRolloutResponse> r3 = manager_->Start(Request("r3"));
  ASSERT_TRUE(r3.ok()) << r3.status();
  EXPECT_GT(r3->generation(), switched.generation);

  absl::StatusOr<v1::EndRolloutResponse> end = manager_->End("r1");
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->journal_path_size(), 2);
  std::vector<std::string> adoption;
  for (const v1::RecordWarning& w : end->record().warning()) {
    if (w.kind() == v1::WARNING_ADOPTION) adoption.push_back(w.text());
  }
  ASSERT_EQ(adoption.size(), 1u);
  EXPECT_THAT(adoption[0], HasSubstr("believed phase \"agent\""));
  EXPECT_THAT(adoption[0], HasSubstr("enforced phase \"grade\""));
  EXPECT_FALSE(kernel_->Egress(r1->cgroup_id()).has_value());
  EXPECT_TRUE(kernel_->CgroupById(r1->cgroup_id())->removed);
}

TEST_F(RolloutManagerUnitTest, SuccessorKeepsADeadDaemonsUnnamedSandbox) {
  // A daemon died between attaching and saving its state: the kernel has
  // a sandbox no state names.
  const CgroupRef cg = kernel_->AddCgroup("/fake/sandfence/lost");
  FakeEgress left;
  left.generation = 77;
  left.ring = 30;
  kernel_->PutEgress(cg.id, left);
  kernel_->PutGuard(cg.id, GuardMode::kAuto);
  kernel_->AddDeadDriver(30, DriverKind::kDaemon, 12345);
  EXPECT_THAT(manager_->AdoptAndStart(), IsEmpty());
  // Kept enforced, not ended; the dead daemon's slot is freed.
  ASSERT_TRUE(kernel_->Egress(cg.id).has_value());
  EXPECT_NE(kernel_->Egress(cg.id)->ring, 30);
  EXPECT_TRUE(kernel_->Guarded(cg.id).has_value());
  EXPECT_EQ(kernel_->CallCount(FakeCall::kDetachEgress), 0);
  EXPECT_EQ(kernel_->ForgottenSlots(), std::vector<uint32_t>{30});
}

// The same, but its cgroup is gone too: nothing can run there and no state
// names a record, so its hooks, rules and guard entry are freed (issue 36).
TEST_F(RolloutManagerUnitTest, ADeadDaemonsUnnamedSandboxWhoseCgroupIsGoneIsFreed) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/sandfence/lost-and-gone");
  FakeEgress left;
  left.generation = 78;
  left.ring = 31;
  kernel_->PutEgress(cg.id, left);
  kernel_->PutGuard(cg.id, GuardMode::kAuto);
  kernel_->AddDeadDriver(31, DriverKind::kDaemon, 12346);
  kernel_->RemoveCgroupBehindOurBack("/fake/sandfence/lost-and-gone");
  EXPECT_THAT(manager_->AdoptAndStart(), IsEmpty());
  EXPECT_FALSE(kernel_->Egress(cg.id).has_value());
  EXPECT_FALSE(kernel_->Guarded(cg.id).has_value());
  EXPECT_EQ(manager_->Metrics().sandboxes_gone, 1u);
  EXPECT_EQ(kernel_->ForgottenSlots(), std::vector<uint32_t>{31});
}

TEST_F(RolloutManagerUnitTest, ADeadRunsSandboxIsReapedAtStart) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/run/s1");
  FakeEgress left;
  left.generation = 9;
  left.ring = 31;
  kernel_->PutEgress(cg.id, left);
  kernel_->PutGuard(cg.id, GuardMode::kSignal);
  kernel_->AddDeadDriver(31, DriverKind::kRun, 4321);
  EXPECT_THAT(manager_->AdoptAndStart(), IsEmpty());
  // Its processes die first, then the guard and the hooks come off.
  const std::vector<std::string> calls = kernel_->Calls();
  auto at = [&](absl::string_view name) {
    return std::find_if(calls.begin(), calls.end(),
                        [&](const std::string& c) {
                          return absl::StartsWith(c, name);
                        }) -
           calls.begin();
  };
  EXPECT_LT(at("KillCgroup"), at("RemoveGuard")) << absl::StrJoin(calls, " ");
  EXPECT_LT(at("RemoveGuard"), at("DetachEgress")) << absl::StrJoin(calls, " ");
  EXPECT_FALSE(kernel_->Egress(cg.id).has_value());
  EXPECT_FALSE(kernel_->Guarded(cg.id).has_value());
  EXPECT_TRUE(kernel_->Cgroup(cg.path)->removed);
  EXPECT_EQ(manager_->Metrics().runs_reaped, 1u);
}

TEST_F(RolloutManagerUnitTest, SuccessorRestoresOwnershipAndBorrowing) {
  REQUIRE_FOREIGN_CGROUP(cgroup);
  ASSERT_TRUE(manager_->Start(OnCgroup("owner", cgroup, false)).ok());
  absl::StatusOr<v1::StartRolloutResponse> b1 =
      manager_->Start(OnCgroup("b1", cgroup, true));
  ASSERT_TRUE(b1.ok()) << b1.status();
  ASSERT_NO_FATAL_FAILURE(NewManager());
  std::vector<std::string> adopted = manager_->AdoptAndStart();
  std::sort(adopted.begin(), adopted.end());
  EXPECT_EQ(adopted, (std::vector<std::string>{"b1", "owner"}));
  // The adopted owner still owns the cgroup: a new owner is refused, a new
  // borrower names it.
  absl::StatusOr<v1::StartRolloutResponse> other =
      manager_->Start(OnCgroup("other", cgroup, false));
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("part of open rollout \"owner\""));
  absl::StatusOr<v1::StartRolloutResponse> b2 =
      manager_->Start(OnCgroup("b2", cgroup, true));
  ASSERT_TRUE(b2.ok()) << b2.status();
  EXPECT_EQ(b2->borrowed_from(), "owner");
  // The adopted borrower attached nothing.
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAttachEgress), 1);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAdoptEgress), 1);
}

// --- What the daemon shows ---

TEST_F(RolloutManagerUnitTest, ListAndMetricsReadTheKernelsCounters) {
  absl::StatusOr<v1::StartRolloutResponse> r1 = manager_->Start(Request("r1"));
  ASSERT_TRUE(r1.ok()) << r1.status();
  SandboxCounters c;
  c.allowed = 5;
  c.denied = 3;
  c.events_lost = 2;
  kernel_->SetCounters(r1->cgroup_id(), c);
  v1::ListRolloutsResponse list = manager_->List();
  ASSERT_EQ(list.rollout_size(), 1);
  EXPECT_EQ(list.rollout(0).allowed(), 5u);
  EXPECT_EQ(list.rollout(0).denied(), 3u);
  const ManagerMetrics m = manager_->Metrics();
  EXPECT_EQ(m.rollouts_open, 1u);
  EXPECT_EQ(m.rollouts_started, 1u);
  EXPECT_EQ(m.events_lost, 2u);
}

// --- Audit-only phases (issue 15) ---

// The agent phase audit only, the grade phase enforced.
constexpr char kAuditAgent[] = R"pb(
  phase {
    name: "agent"
    network_access: MODEL_ONLY
    enforce: AUDIT
    dns { mode: NONE }
  }
  phase {
    name: "grade"
    network_access: MODEL_ONLY
    dns { mode: NONE }
  }
)pb";

TEST_F(RolloutManagerUnitTest, AnAuditPolicyIsRefusedWithoutAllowAudit) {
  v1::StartRolloutRequest req = Request("r1");
  req.set_policy_text(kAuditAgent);
  absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("phase \"agent\""));
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("audit only (enforce: AUDIT)"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("allow_audit"));
  EXPECT_THAT(kernel_->Calls(), IsEmpty()) << "refused before anything";
  EXPECT_THAT(FilesEndingWith(options_.records_dir, ".record"), IsEmpty());
  EXPECT_EQ(manager_->Metrics().refusals, 1u);
  // The same with the policy-level enforce.
  req.set_policy_text(absl::StrCat("enforce: AUDIT\n", kTwoPhases));
  r = manager_->Start(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("phases \"agent\", \"grade\""));
  EXPECT_THAT(kernel_->Calls(), IsEmpty());
}

TEST_F(RolloutManagerUnitTest, AnAllowedAuditRolloutSaysSoEverywhere) {
  v1::StartRolloutRequest req = Request("r1");
  req.set_policy_text(kAuditAgent);
  req.set_allow_audit(true);
  absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->audit_only());
  EXPECT_EQ(std::vector<std::string>(r->audit_only_phase().begin(),
                                     r->audit_only_phase().end()),
            std::vector<std::string>{"agent"});
  ASSERT_EQ(r->phase_policy_size(), 2);
  EXPECT_TRUE(r->phase_policy(0).audit_only());
  EXPECT_FALSE(r->phase_policy(1).audit_only());
  // Another rollout, enforcing: counted apart.
  ASSERT_TRUE(manager_->Start(Request("r2")).ok());

  SandboxCounters c;
  c.allowed = 7;
  c.audit_denied = 4;
  kernel_->SetCounters(r->cgroup_id(), c);
  v1::ListRolloutsResponse list = manager_->List();
  ASSERT_EQ(list.rollout_size(), 2);
  EXPECT_TRUE(list.rollout(0).audit_only());
  EXPECT_EQ(list.rollout(0).would_deny(), 4u);
  EXPECT_FALSE(list.rollout(1).audit_only());
  v1::HealthResponse health = manager_->Health();
  EXPECT_EQ(health.audit_only_rollouts(), 1u);
  ASSERT_EQ(health.audit_only_rollout_size(), 1);
  EXPECT_EQ(health.audit_only_rollout(0), "r1");
  EXPECT_EQ(manager_->Metrics().audit_only_sandboxes, 1u);
  EXPECT_THAT(RenderMetrics(manager_->Metrics()),
              HasSubstr("\nsandfence_audit_only_sandboxes 1\n"));

  // Switched to the enforcing phase: no longer audit only anywhere.
  absl::StatusOr<v1::SetPhaseResponse> grade =
      manager_->SetPhase("r1", "grade");
  ASSERT_TRUE(grade.ok()) << grade.status();
  EXPECT_FALSE(grade->audit_only());
  EXPECT_EQ(manager_->Health().audit_only_rollouts(), 0u);
  EXPECT_THAT(RenderMetrics(manager_->Metrics()),
              HasSubstr("\nsandfence_audit_only_sandboxes 0\n"));
  absl::StatusOr<v1::SetPhaseResponse> back = manager_->SetPhase("r1", "agent");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->audit_only());
  // The kernel's entry carries the audit bit only in the audit phase: the
  // fake records the compiled phase it was given.
  EXPECT_TRUE(kernel_->Egress(r->cgroup_id())->audit_only);

  // A successor adopts it as audit only (from the saved compiled phases).
  ASSERT_NO_FATAL_FAILURE(NewManager());
  manager_->AdoptAndStart();
  EXPECT_EQ(manager_->Health().audit_only_rollouts(), 1u);
  ASSERT_TRUE(manager_->End("r1").ok());
  EXPECT_EQ(manager_->Health().audit_only_rollouts(), 0u);
}

// --- Metrics: counters that outlive their rollouts (issue 38) ---

constexpr char kDnsFiltered[] = R"pb(
  phase {
    name: "agent"
    network_access: MODEL_ONLY
    allow { host: "*.tool.test" port: 443 }
    dns { mode: FILTERED resolver: "127.0.0.1:5353" }
  }
)pb";

TEST_F(RolloutManagerUnitTest, MetricsCountersNeverGoDownWhenARolloutEnds) {
  std::map<std::string, uint64_t> cgroup_of;
  for (const char* id : {"r1", "r2"}) {
    v1::StartRolloutRequest req = Request(id);
    req.set_policy_text(kDnsFiltered);
    absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(req);
    ASSERT_TRUE(r.ok()) << id << ": " << r.status();
    cgroup_of[id] = r->cgroup_id();
  }
  // The filters decide queries (what the fake's DNS server reports).
  auto query = [&](const std::string& id, const std::string& verdict) {
    std::optional<FakeDns> dns = kernel_->Dns(cgroup_of[id]);
    ASSERT_TRUE(dns.has_value()) << id;
    dns->on_query(DnsQueryInfo{.name = "a.tool.test",
                               .type = 1,
                               .verdict = verdict,
                               .transport = "udp",
                               .latency_ns = 2'000'000});
  };
  ASSERT_NO_FATAL_FAILURE(query("r1", "allowed"));
  ASSERT_NO_FATAL_FAILURE(query("r1", "blocked"));
  ASSERT_NO_FATAL_FAILURE(query("r2", "allowed"));
  SandboxCounters lost;
  lost.events_lost = 5;
  kernel_->SetCounters(cgroup_of["r1"], lost);
  lost.events_lost = 3;
  kernel_->SetCounters(cgroup_of["r2"], lost);

  ManagerMetrics m = manager_->Metrics();
  EXPECT_EQ(m.events_lost, 8u);
  EXPECT_EQ(m.dns_total.by_verdict["allowed"], 2u);
  EXPECT_EQ(m.dns_total.by_verdict["blocked"], 1u);
  EXPECT_EQ(m.dns_total.latency_count, 3u);
  ASSERT_EQ(m.dns.size(), 2u);

  // r1 loses 2 more after that scrape, answers one more query, and ends:
  // the kernel's final counters (read as it detaches) stay in the sums.
  lost.events_lost = 7;
  kernel_->SetCounters(cgroup_of["r1"], lost);
  ASSERT_NO_FATAL_FAILURE(query("r1", "allowed"));
  ASSERT_TRUE(manager_->End("r1").ok());
  m = manager_->Metrics();
  EXPECT_EQ(m.events_lost, 10u);
  EXPECT_EQ(m.dns_total.by_verdict["allowed"], 3u);
  EXPECT_EQ(m.dns_total.by_verdict["blocked"], 1u);
  EXPECT_EQ(m.dns_total.latency_count, 4u);
  ASSERT_EQ(m.dns.size(), 1u);
  EXPECT_EQ(m.dns[0].rollout_id, "r2");

  const std::string summed = RenderMetrics(m);
  EXPECT_THAT(summed, HasSubstr("\nsandfence_events_lost_total 10\n"));
  EXPECT_THAT(
      summed,
      HasSubstr("\nsandfence_dns_queries_total{verdict=\"allowed\"} 3\n"));
  EXPECT_THAT(summed, ::testing::Not(HasSubstr("rollout=")));
  // Labelled by rollout: the open one only, as before issue 38.
  const std::string labelled = RenderMetrics(m, {.per_rollout = true});
  EXPECT_THAT(labelled,
              HasSubstr("\nsandfence_dns_queries_total{rollout=\"r2\","
                        "verdict=\"allowed\"} 1\n"));
  EXPECT_THAT(labelled, ::testing::Not(HasSubstr("rollout=\"r1\"")));

  // Nor does the last rollout's end lower them.
  ASSERT_TRUE(manager_->End("r2").ok());
  m = manager_->Metrics();
  EXPECT_EQ(m.events_lost, 10u);
  EXPECT_EQ(m.dns_total.by_verdict["allowed"], 3u);
  EXPECT_THAT(m.dns, IsEmpty());
}

TEST_F(RolloutManagerUnitTest, WatchSeesTheRolloutsEventsFromTheEventThread) {
  manager_->AdoptAndStart();  // starts the event thread
  absl::StatusOr<v1::StartRolloutResponse> r1 = manager_->Start(Request("r1"));
  ASSERT_TRUE(r1.ok()) << r1.status();
  absl::Notification seen;
  v1::RolloutEvent got;
  absl::StatusOr<uint64_t> watch =
      manager_->Watch("r1", [&](const v1::RolloutEvent& e) {
        if (seen.HasBeenNotified()) return;
        got = e;
        seen.Notify();
      });
  ASSERT_TRUE(watch.ok()) << watch.status();
  auto* fake = dynamic_cast<FakeEnforcement*>(&manager_->enforcement());
  ASSERT_NE(fake, nullptr);
  NetEvent e;
  e.sandbox = r1->cgroup_id();
  e.cgroup = r1->cgroup_id();
  e.generation = r1->generation();
  e.verdict = SF_VERDICT_DENY;
  e.reason = SF_REASON_NO_RULE;
  e.hook = SF_HOOK_CONNECT4;
  e.protocol = 6;
  e.port = 9;
  e.addr = *IpAddress::Parse("127.0.0.9");
  fake->Queue(e);
  // A bound on a hang, not a speed assertion.
  ASSERT_TRUE(seen.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "the event thread never delivered the queued event";
  EXPECT_EQ(got.rollout_id(), "r1");
  EXPECT_EQ(got.verdict(), v1::VERDICT_DENY);
  EXPECT_EQ(got.address(), "127.0.0.9");
  EXPECT_EQ(got.port(), 9u);
  EXPECT_EQ(got.generation(), r1->generation());
  EXPECT_EQ(manager_->Metrics().decisions_denied, 1u);
  manager_->Unwatch(*watch);
  ASSERT_TRUE(manager_->End("r1").ok());
  EXPECT_FALSE(manager_->IsOpen("r1"));
}

// --- Dead sandboxes (issue 36) ---

// A sandbox whose cgroup is removed behind the daemon's back is ended by
// the event thread: its egress entry, guard and DNS filter go, nothing is
// killed or removed by its path (which may name another cgroup now), the
// record says how it ended, and the other rollouts are left alone.
TEST_F(RolloutManagerUnitTest, ARemovedSandboxIsEndedByTheEventThread) {
  manager_->AdoptAndStart();  // starts the event thread
  absl::StatusOr<v1::StartRolloutResponse> gone =
      manager_->Start(Request("gone"));
  ASSERT_TRUE(gone.ok()) << gone.status();
  absl::StatusOr<v1::StartRolloutResponse> kept =
      manager_->Start(Request("kept"));
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_TRUE(kernel_->Egress(gone->cgroup_id()).has_value());
  const int kills = kernel_->CallCount(FakeCall::kKillCgroup);

  kernel_->RemoveCgroupBehindOurBack(gone->cgroup_path());
  // A bound on a hang, not a speed assertion. The count comes just after
  // the end (the rollout's record is there as soon as it is not open).
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((manager_->IsOpen("gone") || manager_->Metrics().sandboxes_gone == 0) &&
         absl::Now() < deadline) {
    if (!manager_->IsOpen("gone")) {
      EXPECT_TRUE(manager_->GetRecord("gone").ok())
          << "neither open nor ended";
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_FALSE(manager_->IsOpen("gone")) << "never reclaimed";
  EXPECT_FALSE(kernel_->Egress(gone->cgroup_id()).has_value());
  EXPECT_FALSE(kernel_->Guarded(gone->cgroup_id()).has_value());
  EXPECT_EQ(kernel_->CallCount(FakeCall::kKillCgroup), kills)
      << "a gone sandbox is not killed by its path";
  EXPECT_EQ(manager_->Metrics().sandboxes_gone, 1u);
  // Its record, written as an EndRollout writes it, says why.
  absl::StatusOr<v1::GetRecordResponse> record = manager_->GetRecord("gone");
  ASSERT_TRUE(record.ok()) << record.status();
  bool said = false;
  for (const v1::RecordWarning& w : record->record().warning()) {
    said |= w.kind() == v1::WARNING_SANDBOX_GONE &&
            absl::StrContains(w.text(), gone->cgroup_path());
  }
  EXPECT_TRUE(said) << record->record().DebugString();
  // The other rollout is open and enforced.
  EXPECT_TRUE(manager_->IsOpen("kept"));
  EXPECT_TRUE(kernel_->Egress(kept->cgroup_id()).has_value());
  ASSERT_TRUE(manager_->End("kept").ok());
}

// --- Decisions by code, never by text ---

TEST_F(RolloutManagerUnitTest, AttachAlreadyExistsIsTheAlreadyEnforcedRefusal) {
  kernel_->FailNth(FakeCall::kAttachEgress, 1,
                   absl::AlreadyExistsError("fake: qqq"));
  absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(Request("r1"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("already enforced by sandfence"));
}

TEST_F(RolloutManagerUnitTest, ErrorTextSayingFileExistsDecidesNothing) {
  kernel_->FailNth(FakeCall::kAttachEgress, 1,
                   absl::InternalError("bpf_map_update_elem: File exists"));
  absl::StatusOr<v1::StartRolloutResponse> r = manager_->Start(Request("r1"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::Not(HasSubstr("already enforced")));
}

}  // namespace
}  // namespace sandfence::testing
