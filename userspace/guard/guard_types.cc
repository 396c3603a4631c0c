#include "guard/guard_types.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace sandfence {
namespace {

// A fixed-size, possibly unterminated kernel string.
std::string FixedString(const char* s, size_t size) {
  return std::string(s, ::strnlen(s, size));
}

std::string DescribeTask(const sf_guard_task& t) {
  return absl::StrFormat("%s[%u] uid %u euid %u",
                         FixedString(t.comm, sizeof(t.comm)), t.tgid, t.uid,
                         t.euid);
}

}  // namespace

absl::StatusOr<GuardMode> ParseGuardMode(absl::string_view text) {
  if (text == "auto") return GuardMode::kAuto;
  if (text == "lsm") return GuardMode::kLsm;
  if (text == "signal") return GuardMode::kSignal;
  if (text == "off") return GuardMode::kOff;
  if (text == "landlock") return GuardMode::kLandlock;
  return Malformed(absl::StrCat(
      "unknown guard mode \"", text,
      "\" (expected auto, lsm, landlock, signal or off)"));
}

absl::string_view GuardModeName(GuardMode mode) {
  switch (mode) {
    case GuardMode::kAuto:
      return "auto";
    case GuardMode::kLsm:
      return "lsm";
    case GuardMode::kSignal:
      return "signal";
    case GuardMode::kOff:
      return "off";
    case GuardMode::kLandlock:
      return "landlock";
  }
  return "unknown";
}

absl::string_view EnforcerName(Enforcer enforcer) {
  switch (enforcer) {
    case Enforcer::kOff:
      return "off";
    case Enforcer::kLsm:
      return "lsm";
    case Enforcer::kSignal:
      return "signal";
    case Enforcer::kLandlock:
      return "landlock";
  }
  return "unknown";
}

absl::string_view GuardWhatName(uint32_t what) {
  switch (what) {
    case SF_WHAT_PTRACE_ATTACH:
      return "ptrace_attach";
    case SF_WHAT_PTRACE_SEIZE:
      return "ptrace_seize";
    case SF_WHAT_PTRACE_TRACEME:
      return "ptrace_traceme";
    case SF_WHAT_VM_READV:
      return "process_vm_readv";
    case SF_WHAT_VM_WRITEV:
      return "process_vm_writev";
    case SF_WHAT_PIDFD_GETFD:
      return "pidfd_getfd";
    case SF_WHAT_PROC_OPEN:
      return "proc_open";
    case SF_WHAT_PROC_LINK:
      return "proc_link";
    case SF_WHAT_PTRACE_ACCESS:
      return "ptrace_access";
    case SF_WHAT_CGROUP_WRITE:
      return "cgroup_write";
    case SF_WHAT_CGROUP_CLONE:
      return "cgroup_clone";
    case SF_WHAT_PROC_WALK:
      return "proc_walk";
    case SF_WHAT_SIGNAL:
      return "signal";
    case SF_WHAT_BPF:
      return "bpf";
    case SF_WHAT_PROT_UNLINK:
      return "protected_unlink";
    case SF_WHAT_PROT_RENAME:
      return "protected_rename";
    case SF_WHAT_PROT_CREATE:
      return "protected_create";
    case SF_WHAT_PROT_SETATTR:
      return "protected_setattr";
    case SF_WHAT_PROT_WRITE:
      return "protected_write";
    case SF_WHAT_PROT_CONNECT:
      return "protected_connect";
    case SF_WHAT_IO_URING:
      return "io_uring";
    case SF_WHAT_CLONE_FILES:
      return "clone_files";
    case SF_WHAT_PERF_OPEN:
      return "perf_event_open";
    case SF_WHAT_KCMP:
      return "kcmp";
    case SF_WHAT_SYMLINK_PROC:
      return "symlink_proc";
    case SF_WHAT_PROC_HANDLE:
      return "proc_handle";
  }
  return "unknown";
}

absl::string_view GuardActionName(uint32_t action) {
  switch (action) {
    case SF_ACTION_DENIED:
      return "denied";
    case SF_ACTION_KILLED:
      return "killed";
    case SF_ACTION_AUDITED:
      return "audited";
  }
  return "unknown";
}

absl::string_view GuardEnforcerName(uint32_t enforcer) {
  switch (enforcer) {
    case SF_ENFORCER_LSM:
      return "lsm";
    case SF_ENFORCER_SIGNAL:
      return "signal";
  }
  return "unknown";
}

absl::string_view ProcClassName(uint32_t proc_class) {
  switch (proc_class) {
    case SF_PROC_NONE:
      return "";
    case SF_PROC_OTHER:
      return "other";
    case SF_PROC_PID_DIR:
      return "pid_dir";
    case SF_PROC_MEM:
      return "mem";
    case SF_PROC_ENVIRON:
      return "environ";
    case SF_PROC_CMDLINE:
      return "cmdline";
    case SF_PROC_MAPS:
      return "maps";
    case SF_PROC_SMAPS:
      return "smaps";
    case SF_PROC_STATUS:
      return "status";
    case SF_PROC_STAT:
      return "stat";
    case SF_PROC_FD_DIR:
      return "fd";
    case SF_PROC_FD_LINK:
      return "fd_link";
    case SF_PROC_FDINFO:
      return "fdinfo";
    case SF_PROC_CWD:
      return "cwd";
    case SF_PROC_ROOT:
      return "root";
    case SF_PROC_EXE:
      return "exe";
    case SF_PROC_AUXV:
      return "auxv";
    case SF_PROC_STACK:
      return "stack";
    case SF_PROC_SYSCALL:
      return "syscall";
    case SF_PROC_PAGEMAP:
      return "pagemap";
    case SF_PROC_MAP_FILES:
      return "map_files";
    case SF_PROC_READABLE_OTHER:
      return "readable_other";
    case SF_PROC_GATED_OTHER:
      return "gated_other";
    case SF_PROC_NS:
      return "ns";
  }
  return "unknown";
}

std::string DescribeGuardEvent(const sf_guard_event& e) {
  std::string s =
      absl::StrCat(GuardEnforcerName(e.enforcer), " ",
                   GuardActionName(e.action), " ", GuardWhatName(e.what));
  if (e.proc_class != SF_PROC_NONE) {
    absl::StrAppend(&s, "(", ProcClassName(e.proc_class), ")");
  }
  absl::StrAppend(&s, ": ", DescribeTask(e.actor), " in sandbox ",
                  e.sandbox_id);
  if (e.target.tgid != 0) {
    absl::StrAppend(&s, " -> ", DescribeTask(e.target));
  }
  if (e.target_cgroup != 0) {
    absl::StrAppend(&s, " (cgroup ", e.target_cgroup, ")");
  }
  std::string name = FixedString(e.name, sizeof(e.name));
  if (!name.empty()) absl::StrAppend(&s, " \"", name, "\"");
  std::string why;
  if (e.why & SF_WHY_UID) why = "uid differs";
  if (e.why & SF_WHY_OUTSIDE) {
    absl::StrAppend(&why, why.empty() ? "" : ", ", "outside the sandbox");
  }
  if (e.why & SF_WHY_PROTECTED) {
    absl::StrAppend(&why, why.empty() ? "" : ", ", "protected object");
  }
  if (e.why & SF_WHY_REFUSED) {
    absl::StrAppend(&why, why.empty() ? "" : ", ",
                    "refused in a guarded sandbox");
  }
  if (!why.empty()) absl::StrAppend(&s, " [", why, "]");
  absl::StrAppend(&s, " syscall ", e.syscall_nr);
  return s;
}

}  // namespace sandfence
