// The guard's vocabulary and tables, without privileges.
#include <cstring>
#include <set>
#include <string>

#include "common/status.h"
#include "gtest/gtest.h"
#include "guard/guard_abi.h"
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

}  // namespace
}  // namespace sandfence
