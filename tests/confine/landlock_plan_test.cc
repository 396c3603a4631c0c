// The walk that turns "everything but these subtrees" into Landlock rules,
// planned without a ruleset (no privileges, no Landlock needed), and the
// descriptions of what holds at each ABI.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "confine/confine.h"
#include "confine/landlock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_files.h"

namespace sandfence::confine {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;

constexpr uint64_t kAll = (1ULL << 16) - 1;  // ABI 5's file-system rights

std::map<std::string, uint64_t> RulesOf(const RulePlan& plan) {
  std::map<std::string, uint64_t> m;
  for (const PlannedRule& r : plan.rules) m[r.path] = r.rights;
  return m;
}

class LandlockPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<ScopedTempDir>(std::move(*dir));
    char real[PATH_MAX];
    ASSERT_NE(::realpath(dir_->path().c_str(), real), nullptr);
    root_ = real;
    for (const char* d : {"open", "open/deep", "hidden", "ro", "other"}) {
      ASSERT_EQ(::mkdir(Path(d).c_str(), 0755), 0) << d;
    }
    ASSERT_TRUE(dir_->WriteFile("file", "x").ok());
    ASSERT_TRUE(dir_->WriteFile("hidden/secret", "x").ok());
    ASSERT_EQ(::symlink(Path("hidden").c_str(), Path("link").c_str()), 0);
  }

  std::string Path(const std::string& rel) const {
    return absl::StrCat(root_, "/", rel);
  }

  std::unique_ptr<ScopedTempDir> dir_;
  std::string root_;
};

TEST_F(LandlockPlanTest, SiblingsGetEverythingExcludedPathsKeepWhatTheyKeep) {
  absl::StatusOr<RulePlan> plan =
      PlanRules({{Path("hidden"), 0}, {Path("ro"), kFsReadRights}}, kAll,
                /*list_ancestors=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto rules = RulesOf(*plan);
  EXPECT_EQ(rules.at(Path("open")), kAll) << "a sibling gets every right";
  EXPECT_EQ(rules.at(Path("other")), kAll);
  EXPECT_EQ(rules.at(Path("file")), kAll & kFsFileRights)
      << "a file sibling gets the file rights only";
  EXPECT_EQ(rules.at(Path("ro")), kFsReadRights) << "no_write keeps reading";
  EXPECT_EQ(rules.count(Path("hidden")), 0u) << "no_access gets no rule";
  EXPECT_EQ(rules.count(Path("hidden/secret")), 0u);
  EXPECT_EQ(rules.count(Path("link")), 0u)
      << "a symlink is never a rule: it may point into an exclusion";
  EXPECT_EQ(rules.count(Path("open/deep")), 0u)
      << "the walk does not descend into a granted sibling";
  EXPECT_EQ(rules.at("/"), kFsReadDir)
      << "ancestors of a no_access path can be listed, nothing more";
  EXPECT_EQ(rules.count(root_), 0u)
      << "redundant: / already lets every directory be listed";
  EXPECT_THAT(plan->skipped, ElementsAre());
}

TEST_F(LandlockPlanTest, StrictModeLeavesAncestorsUnlistable) {
  absl::StatusOr<RulePlan> plan =
      PlanRules({{Path("hidden"), 0}}, kAll, /*list_ancestors=*/false);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto rules = RulesOf(*plan);
  EXPECT_EQ(rules.count(root_), 0u);
  EXPECT_EQ(rules.count("/"), 0u);
  EXPECT_EQ(rules.at(Path("open")), kAll);
}

TEST_F(LandlockPlanTest, NoWriteOnlyAncestorsStayReadable) {
  absl::StatusOr<RulePlan> plan =
      PlanRules({{Path("ro"), kFsReadRights}}, kAll, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto rules = RulesOf(*plan);
  EXPECT_EQ(rules.at("/"), kFsReadRights)
      << "what every exclusion keeps is granted on the ancestors";
  EXPECT_EQ(rules.count(Path("ro")), 0u)
      << "redundant: / already grants what ro keeps";
  EXPECT_EQ(rules.at(Path("hidden")), kAll);
}

TEST_F(LandlockPlanTest, WriteOnlyHandlingNeedsNoRuleOnAncestors) {
  const uint64_t write = kAll & ~kFsReadRights;
  absl::StatusOr<RulePlan> plan =
      PlanRules({{Path("ro"), kFsReadRights}}, write, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto rules = RulesOf(*plan);
  EXPECT_EQ(rules.count("/"), 0u);
  EXPECT_EQ(rules.count(Path("ro")), 0u);
  EXPECT_EQ(rules.at(Path("open")), write);
}

TEST_F(LandlockPlanTest, AnExclusionNamedThroughASymlinkIsItsTarget) {
  absl::StatusOr<RulePlan> plan = PlanRules({{Path("link"), 0}}, kAll, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(RulesOf(*plan).count(Path("hidden")), 0u);
  ASSERT_EQ(plan->applied.size(), 1u);
  EXPECT_EQ(plan->applied[0].path, Path("hidden"));
}

TEST_F(LandlockPlanTest, MissingPathsAreSkippedRelativeOnesRefused) {
  absl::StatusOr<RulePlan> plan =
      PlanRules({{Path("absent/x"), 0}}, kAll, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->skipped, ElementsAre(Path("absent/x")));
  EXPECT_THAT(RulesOf(*plan),
              Contains(std::pair<const std::string, uint64_t>("/", kAll)))
      << "nothing excluded: / gets everything";

  absl::StatusOr<RulePlan> relative = PlanRules({{"tmp/x", 0}}, kAll, true);
  EXPECT_EQ(relative.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LandlockPlanTest, AnExclusionInsideAnEquallyStrictOneAddsNothing) {
  absl::StatusOr<RulePlan> plan =
      PlanRules({{Path("ro"), kFsReadRights},
                 {Path("ro/.."), kAll},
                 {root_, kFsReadRights},
                 {Path("open/deep"), kFsReadRights}},
                kAll, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->applied.size(), 1u);
  EXPECT_EQ(plan->applied[0].path, root_);
  EXPECT_EQ(RulesOf(*plan).count(Path("open")), 0u)
      << "root_ itself is the exclusion: not enumerated";
}

TEST(LandlockPlanProcTest, ProcIsNeverEnumerated) {
  absl::StatusOr<RulePlan> plan =
      PlanRules({{"/proc/sys", kFsReadRights}}, kAll, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->widened, ElementsAre("/proc"));
  for (const PlannedRule& r : plan->rules) {
    EXPECT_FALSE(r.path.starts_with("/proc/")) << r.path;
  }
  // /proc itself was widened to what /proc/sys keeps; / gets the same, so
  // /proc needs no rule of its own.
  EXPECT_EQ(RulesOf(*plan).at("/"), kFsReadRights);
}

TEST(LandlockPlanProcTest, SysAndProcWholeCostOneRulePerEntryOfRoot) {
  absl::StatusOr<RulePlan> plan =
      PlanRules({{"/sys", kFsReadRights}, {"/proc", kFsReadRights}},
                kAll & ~kFsReadRights, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const PlannedRule& r : plan->rules) {
    EXPECT_EQ(r.path.find('/', 1), std::string::npos)
        << "only entries of / get rules: " << r.path;
    EXPECT_NE(r.path, "/sys");
    EXPECT_NE(r.path, "/proc");
  }
}

TEST_F(LandlockPlanTest, WithheldRightsAreGrantedNowhere) {
  const uint64_t withheld = kFsMakeChar | kFsMakeBlock;
  absl::StatusOr<RulePlan> plan =
      PlanRules({{Path("ro"), kFsReadRights}}, kAll, true, -1, withheld);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const PlannedRule& r : plan->rules) {
    EXPECT_EQ(r.rights & withheld, 0u) << r.path;
  }
  EXPECT_EQ(RulesOf(*plan).at(Path("open")), kAll & ~withheld);
}

TEST(RightsBeneathTest, AFreshMountGetsWhatItsPlaceWouldHave) {
  const std::vector<Exclusion> applied = {{"/proc", kFsReadRights},
                                          {"/sys/fs/bpf/sandfence", 0}};
  const uint64_t mknod = kFsMakeChar | kFsMakeBlock;
  EXPECT_EQ(RightsBeneath(applied, "/proc", kAll, mknod), kFsReadRights);
  EXPECT_EQ(RightsBeneath(applied, "/proc/sys", kAll, mknod), kFsReadRights);
  EXPECT_EQ(RightsBeneath(applied, "/procfoo", kAll, mknod), kAll & ~mknod);
  EXPECT_EQ(RightsBeneath(applied, "/sys/fs", kAll, mknod), 0u)
      << "a rule there would reach the no_access path below";
  EXPECT_EQ(RightsBeneath(applied, "/", kAll, 0), 0u);
}

TEST(RawDevicesTest, EveryBlockDeviceAndNoOrdinaryOne) {
  absl::StatusOr<std::vector<std::string>> found = RawDeviceNodes();
  ASSERT_TRUE(found.ok()) << found.status();
  const std::set<std::string> set(found->begin(), found->end());
  for (const char* ordinary : {"/dev/null", "/dev/zero", "/dev/urandom",
                               "/dev/tty", "/dev/ptmx", "/dev/full"}) {
    EXPECT_EQ(set.count(ordinary), 0u) << ordinary;
  }
  if (DIR* d = ::opendir("/dev")) {
    while (struct dirent* e = ::readdir(d)) {
      const std::string path = absl::StrCat("/dev/", e->d_name);
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
        EXPECT_EQ(set.count(path), 1u) << path << " is a block device";
      }
    }
    ::closedir(d);
  }
  for (const char* raw : {"/dev/mem", "/dev/kmem", "/dev/port",
                          "/dev/userfaultfd", "/dev/uinput", "/dev/kmsg"}) {
    struct stat st;
    if (::lstat(raw, &st) == 0 && S_ISCHR(st.st_mode)) {
      EXPECT_EQ(set.count(raw), 1u) << raw;
    }
  }
}

TEST(MountPointsTest, FindsTypesAndDecodesEscapes) {
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<std::string> table = dir->WriteFile(
      "mountinfo",
      "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
      "30 25 0:26 / /sys/fs/cgroup/unified rw shared:9 - cgroup2 cgroup2 rw\n"
      "31 25 0:27 / /sys/fs/bpf rw - bpf bpf rw,mode=700\n"
      "40 1 0:40 / /mnt/a\\040b rw master:3 - cgroup2 none rw\n"
      "41 1 8:1 / / rw - ext4 /dev/sda1 rw\n");
  ASSERT_TRUE(table.ok());
  absl::StatusOr<std::vector<MountEntry>> mounts = ReadMountInfo(*table);
  ASSERT_TRUE(mounts.ok()) << mounts.status();
  ASSERT_EQ(mounts->size(), 5u);
  EXPECT_EQ((*mounts)[1].device, "0:26");
  EXPECT_EQ((*mounts)[1].root, "/");
  EXPECT_EQ((*mounts)[1].type, "cgroup2");
  EXPECT_THAT(MountPointsOfTypes(*mounts, {"cgroup2", "bpf"}),
              ElementsAre("/sys/fs/cgroup/unified", "/sys/fs/bpf", "/mnt/a b"));
}

// Rules bind inodes: the same file system mounted elsewhere exposes an
// excluded place under a second name, which must be excluded too.
TEST(MountPointsTest, ExclusionsGetEveryNameTheMountTableGivesThem) {
  const std::vector<MountEntry> mounts = {
      {"254:0", "/", "/", "ext4"},
      {"0:6", "/", "/sf-dev", "devtmpfs"},
      // devtmpfs mounted again in a chroot being built
      {"0:6", "/", "/sf-chroot/dev", "devtmpfs"},
      // a bind mount of a directory above an excluded one
      {"254:0", "/sf-var/lib", "/mnt/varlib", "ext4"},
      // a bind mount of a directory inside one
      {"254:0", "/sf-var/lib/sandfence/records", "/mnt/records", "ext4"},
      // the same place's other file system: not an alias
      {"0:7", "/", "/sf-other", "tmpfs"},
  };
  const std::vector<Exclusion> out = WithMountAliases(
      {{"/sf-dev/vda", 0}, {"/sf-var/lib/sandfence", kFsReadRights}}, mounts);
  std::vector<std::string> paths;
  for (const Exclusion& e : out) paths.push_back(e.path);
  EXPECT_THAT(paths, ElementsAre("/sf-dev/vda", "/sf-chroot/dev/vda",
                                 "/sf-var/lib/sandfence",
                                 "/mnt/varlib/sandfence", "/mnt/records"));
  EXPECT_EQ(out[1].keep, 0u);
  EXPECT_EQ(out[4].keep, kFsReadRights);
}

TEST(AbiTest, RightsAndScopesGrowWithTheAbi) {
  EXPECT_EQ(FsRightsOfAbi(0), 0u);
  EXPECT_EQ(FsRightsOfAbi(1), (1ULL << 13) - 1);
  EXPECT_EQ(FsRightsOfAbi(2) & kFsRefer, kFsRefer);
  EXPECT_EQ(FsRightsOfAbi(2) & kFsTruncate, 0u);
  EXPECT_EQ(FsRightsOfAbi(4) & kFsIoctlDev, 0u);
  EXPECT_EQ(FsRightsOfAbi(7), (1ULL << 16) - 1);
  EXPECT_EQ(FsWriteRightsOfAbi(7) & kFsReadRights, 0u);
  EXPECT_EQ(ScopesOfAbi(5), 0u);
  EXPECT_EQ(ScopesOfAbi(6), kScopeSignal | kScopeAbstractUnixSocket);
}

// DescribeConfinement before anything is prepared, at the ABIs that matter.
const ConfineGuarantee& Row(const std::vector<ConfineGuarantee>& rows,
                            ConfineGuaranteeId id) {
  for (const ConfineGuarantee& g : rows) {
    if (g.id == id) return g;
  }
  static const ConfineGuarantee kMissing{ConfineGuaranteeId::kNoBpf, "missing",
                                         false, "missing"};
  ADD_FAILURE() << "no row " << static_cast<int>(id);
  return kMissing;
}

TEST(DescribeTest, AbiSevenHoldsEverythingButWhatNoLayerCovers) {
  ConfinePlan plan;
  plan.no_access = {"/var/lib/sandfence"};
  const auto rows = DescribeConfinement(plan, 7);
  for (const ConfineGuarantee& g : rows) {
    SCOPED_TRACE(g.what);
    switch (g.id) {
      case ConfineGuaranteeId::kNoPathnameUnixOut:
      case ConfineGuaranteeId::kNoPriorityOfOthers:
      case ConfineGuaranteeId::kNoPtraceInside:
        EXPECT_FALSE(g.holds);
        EXPECT_TRUE(g.layer.starts_with("—")) << g.layer;
        break;
      default:
        EXPECT_TRUE(g.holds) << g.layer;
        EXPECT_FALSE(g.layer.starts_with("—")) << g.layer;
    }
  }
  EXPECT_EQ(Row(rows, ConfineGuaranteeId::kNoSignalOut).layer,
            "landlock ABI 7");
  EXPECT_EQ(Row(rows, ConfineGuaranteeId::kNoUserNamespace).layer, "seccomp");
  EXPECT_EQ(Row(rows, ConfineGuaranteeId::kNoWrites).what,
            absl::StrCat("no writes to /sys, /proc (nor to any ",
                         absl::StrJoin(DefaultNoWriteFsTypes(), ", "),
                         " mount, wherever mounted)"));
  EXPECT_EQ(Row(rows, ConfineGuaranteeId::kNoAccess).what,
            "no access to /var/lib/sandfence (names beneath them stay "
            "listable)");
}

TEST(DescribeTest, AbiFiveSaysWhatItLacks) {
  const auto rows = DescribeConfinement(ConfinePlan{}, 5);
  EXPECT_FALSE(Row(rows, ConfineGuaranteeId::kNoSignalOut).holds);
  EXPECT_EQ(Row(rows, ConfineGuaranteeId::kNoSignalOut).layer,
            "—: landlock ABI 5: no signal or abstract socket scoping (ABI 6)");
  EXPECT_FALSE(Row(rows, ConfineGuaranteeId::kNoAbstractUnixOut).holds);
  EXPECT_TRUE(Row(rows, ConfineGuaranteeId::kNoPtraceAcross).holds);
  EXPECT_TRUE(Row(rows, ConfineGuaranteeId::kNoWrites).holds);
  const auto abi2 = DescribeConfinement(ConfinePlan{}, 2);
  EXPECT_EQ(Row(abi2, ConfineGuaranteeId::kNoWrites).layer,
            "landlock ABI 2, truncate(2) not covered (ABI 3), ioctl on device "
            "files not covered (ABI 5)");
}

TEST(DescribeTest, NoLandlockHoldsOnlyTheSeccompRows) {
  const auto rows = DescribeConfinement(ConfinePlan{}, 0);
  EXPECT_FALSE(Row(rows, ConfineGuaranteeId::kNoPtraceAcross).holds);
  EXPECT_FALSE(Row(rows, ConfineGuaranteeId::kNoWrites).holds);
  EXPECT_TRUE(Row(rows, ConfineGuaranteeId::kNoBpf).holds);
}

TEST(SupportTest, AHostWithoutLandlockIsRejectedWithItsReason) {
  ConfineSupport support;
  support.landlock_errno = ENOSYS;
  support.landlock_reason = "landlock is not built into this kernel (ENOSYS)";
  support.seccomp_filter = true;
  EXPECT_FALSE(support.usable());
  const absl::Status s = support.Usable();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "this host cannot confine a command: landlock is not built into "
            "this kernel (ENOSYS)");
  support.landlock_abi = 7;
  support.applied = true;
  EXPECT_TRUE(support.Usable().ok());
}

TEST(DescribeTest, PolicyKnobsShowInTheirRows) {
  ConfinePlan plan;
  plan.deny_io_uring = false;
  plan.deny_ptrace = true;
  plan.drop_read_bypass_capabilities = false;
  const auto rows = DescribeConfinement(plan, 7);
  EXPECT_FALSE(Row(rows, ConfineGuaranteeId::kNoIoUring).holds);
  EXPECT_EQ(Row(rows, ConfineGuaranteeId::kNoIoUring).layer,
            "—: allowed by the policy");
  EXPECT_TRUE(Row(rows, ConfineGuaranteeId::kNoPtraceInside).holds);
  EXPECT_FALSE(Row(rows, ConfineGuaranteeId::kNoProcReadAcross).holds);
  EXPECT_THAT(rows, Not(Contains(::testing::Field(
                        &ConfineGuarantee::id, ConfineGuaranteeId::kNoAccess))))
      << "no no_access paths, no row";
}

}  // namespace
}  // namespace sandfence::confine
