// The guard's vocabulary and tables, without privileges.
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>

#include "common/status.h"
#include "gtest/gtest.h"
#include "guard/guard_abi.h"
#include "guard/guard_protect.h"
#include "guard/guard_types.h"
#include "guard/proc_names.h"

namespace sandfence {
namespace {

TEST(GuardMode, ParsesEveryModeAPolicyCanName) {
  const struct {
    const char* text;
    GuardMode mode;
  } kRows[] = {{"auto", GuardMode::kAuto},
               {"lsm", GuardMode::kLsm},
               {"signal", GuardMode::kSignal},
               {"off", GuardMode::kOff}};
  for (const auto& row : kRows) {
    absl::StatusOr<GuardMode> mode = ParseGuardMode(row.text);
    ASSERT_TRUE(mode.ok()) << row.text << ": " << mode.status();
    EXPECT_EQ(*mode, row.mode) << row.text;
    EXPECT_EQ(GuardModeName(*mode), row.text);
  }
}

TEST(GuardMode, AnUnknownModeIsMalformed) {
  for (const char* text : {"", "LSM", "kill", "auto ", "signals"}) {
    absl::StatusOr<GuardMode> mode = ParseGuardMode(text);
    EXPECT_EQ(RefusalOf(mode.status()), Refusal::kMalformed)
        << "\"" << text << "\"";
  }
}

TEST(Enforcer, RecordsNameWhichEnforcerRan) {
  EXPECT_EQ(EnforcerName(Enforcer::kLsm), "lsm");
  EXPECT_EQ(EnforcerName(Enforcer::kSignal), "signal");
  EXPECT_EQ(EnforcerName(Enforcer::kOff), "off");
  EXPECT_EQ(GuardEnforcerName(SF_ENFORCER_LSM), "lsm");
  EXPECT_EQ(GuardEnforcerName(SF_ENFORCER_SIGNAL), "signal");
}

TEST(ProcNames, EveryNameFitsTheKernelKey) {
  std::set<std::string> seen;
  for (const ProcNameEntry& e : ProcNameTable()) {
    EXPECT_LT(std::strlen(e.name), sizeof(sf_procname::name)) << e.name;
    EXPECT_TRUE(seen.insert(e.name).second) << "duplicate " << e.name;
    EXPECT_NE(ProcClassName(e.proc_class), "unknown") << e.name;
  }
}

// The promise: ps keeps working in signal mode (these are audited),
// everything gated by ptrace access is killed.
TEST(ProcNames, WhatPsReadsIsReadableTheRestIsGated) {
  for (const char* name : {"cmdline", "stat", "status", "statm", "comm"}) {
    const ProcNameEntry* e = FindProcName(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_TRUE(e->flags & SF_PROCNAME_F_READABLE) << name;
  }
  for (const char* name :
       {"mem", "environ", "maps", "smaps", "fd", "fdinfo", "cwd", "root", "exe",
        "auxv", "stack", "syscall", "pagemap", "map_files", "io"}) {
    const ProcNameEntry* e = FindProcName(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_FALSE(e->flags & (SF_PROCNAME_F_READABLE | SF_PROCNAME_F_IGNORE))
        << name << " must be gated";
  }
}

TEST(ProcNames, EntriesOfFdDirectoriesAreGatedTooAndTaskIsOnlyListed) {
  for (const char* name : {"fd", "fdinfo", "map_files"}) {
    const ProcNameEntry* e = FindProcName(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_TRUE(e->flags & SF_PROCNAME_F_PARENT) << name;
    EXPECT_FALSE(e->child_flags & SF_PROCNAME_F_READABLE) << name;
  }
  const ProcNameEntry* task = FindProcName("task");
  ASSERT_NE(task, nullptr);
  EXPECT_TRUE(task->flags & SF_PROCNAME_F_IGNORE);
  EXPECT_TRUE(task->child_flags & SF_PROCNAME_F_IGNORE);
}

TEST(GuardEvent, DescriptionNamesWhoWhatWhomAndOutcome) {
  sf_guard_event e = {};
  e.enforcer = SF_ENFORCER_SIGNAL;
  e.action = SF_ACTION_KILLED;
  e.what = SF_WHAT_PROC_OPEN;
  e.proc_class = SF_PROC_ENVIRON;
  e.why = SF_WHY_UID | SF_WHY_OUTSIDE;
  e.sandbox_id = 77;
  e.actor.pid = e.actor.tgid = 10;
  std::strcpy(e.actor.comm, "agent");
  e.target.pid = e.target.tgid = 20;
  e.target.uid = e.target.euid = 4343;
  std::strcpy(e.target.comm, "grader");
  std::strcpy(e.name, "environ");
  std::string d = DescribeGuardEvent(e);
  for (const char* part :
       {"signal killed proc_open(environ)", "agent[10] uid 0",
        "grader[20] uid 4343", "sandbox 77", "uid differs",
        "outside the sandbox", "\"environ\""}) {
    EXPECT_NE(d.find(part), std::string::npos) << part << " in: " << d;
  }
}

TEST(GuardEvent, NewWhatCodesHaveNames) {
  for (uint32_t what = SF_WHAT_SIGNAL; what <= SF_WHAT_PROC_HANDLE; ++what) {
    EXPECT_NE(GuardWhatName(what), "unknown") << what;
  }
  sf_guard_event e = {};
  e.enforcer = SF_ENFORCER_LSM;
  e.action = SF_ACTION_DENIED;
  e.what = SF_WHAT_PROT_UNLINK;
  e.why = SF_WHY_PROTECTED;
  std::strcpy(e.name, "state");
  std::string d = DescribeGuardEvent(e);
  EXPECT_NE(d.find("lsm denied protected_unlink"), std::string::npos) << d;
  EXPECT_NE(d.find("protected object"), std::string::npos) << d;
}

// The key the BPF side builds from super_block.s_dev: major << 20 | minor.
TEST(ProtectedObjects, DeviceNumbersInTheKernelsEncoding) {
  EXPECT_EQ(KernelDev(makedev(8, 1)), (8u << 20) | 1u);
  EXPECT_EQ(KernelDev(makedev(0, 1234)), 1234u);
  EXPECT_EQ(KernelDev(makedev(259, 70000)), (259u << 20) | 70000u);
}

TEST(ProtectedObjects, ChainFromRootToTheObject) {
  char dir[] = "/tmp/sf-guard-unit-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string sub = std::string(dir) + "/pins";
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  absl::StatusOr<ProtectedChain> chain =
      ResolveProtected(std::string(dir) + "/./pins/");
  ::rmdir(sub.c_str());
  ::rmdir(dir);
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->canonical, sub);
  // /tmp, sf-guard-unit-*, pins (realpath may resolve /tmp elsewhere).
  ASSERT_GE(chain->dirents.size(), 3u);
  EXPECT_STREQ(chain->dirents.back().first.name, "pins");
  EXPECT_EQ(chain->dirents.back().second.ino, chain->object.ino);
  EXPECT_EQ(chain->dirents.back().second.dev, chain->object.dev);
  // Each entry's parent is the previous entry's child.
  for (size_t i = 1; i < chain->dirents.size(); ++i) {
    EXPECT_EQ(chain->dirents[i].first.parent.ino,
              chain->dirents[i - 1].second.ino);
  }
  struct stat root;
  ASSERT_EQ(::stat("/", &root), 0);
  EXPECT_EQ(chain->dirents.front().first.parent.ino, root.st_ino);
}

TEST(ProtectedObjects, BadPathsAreRefusedWithTheReason) {
  EXPECT_EQ(RefusalOf(ResolveProtected("relative/dir").status()),
            Refusal::kMalformed);
  EXPECT_EQ(RefusalOf(ResolveProtected("").status()), Refusal::kMalformed);
  absl::Status missing = ResolveProtected("/nonexistent-sf-guard").status();
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("/nonexistent-sf-guard"), std::string::npos)
      << missing;
  char dir[] = "/tmp/sf-guard-unit-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string longname(SF_GUARD_PROTNAME_LEN, 'x');
  std::string path = std::string(dir) + "/" + longname;
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  absl::Status s = ResolveProtected(path).status();
  ::rmdir(path.c_str());
  ::rmdir(dir);
  EXPECT_EQ(RefusalOf(s), Refusal::kMalformed) << s;
  EXPECT_NE(s.message().find(longname), std::string::npos) << s;
}

}  // namespace
}  // namespace sandfence
