// The guard's specification as a table: who, in which sandbox, does what to
// which process, and what each enforcer makes of it.
//
// Unless a row says otherwise the actor is root (every capability) in the
// guarded sandbox and the target runs as another UID outside it: the case
// the kernel itself allows and sandfence must not.
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "guard_fixture.h"

namespace sandfence::guard_test {
namespace {

// A /proc/<pid>/ entry opened by root in the sandbox.
struct ProcFile {
  const char* name;  // test name suffix
  const char* path;  // after /proc/{pid}/
  uint32_t cls;
  // kWalked: the kernel checks ptrace access while walking the path
  // (fdinfo/); with lsm it fails there, with EACCES, before any open.
  enum Kind { kGated, kReadable, kLink, kWalked } kind;
  // landlock: the errno of the refusal (0: allowed), whether it comes at
  // the read rather than the open, and why (for the description).
  int ll_err;
  bool ll_at_read;
  const char* ll_note;
};

// What Landlock's ptrace scope refuses is what the kernel checks with
// ptrace_may_access(); the files any process may read stay readable.
constexpr char kAnyoneReads[] = "not ptrace-gated: any process may read it";
constexpr ProcFile kProcFiles[] = {
    {"mem", "mem", SF_PROC_MEM, ProcFile::kGated, EACCES, false, nullptr},
    {"environ", "environ", SF_PROC_ENVIRON, ProcFile::kGated, EACCES, false,
     nullptr},
    {"cmdline", "cmdline", SF_PROC_CMDLINE, ProcFile::kReadable, 0, false,
     kAnyoneReads},
    {"maps", "maps", SF_PROC_MAPS, ProcFile::kGated, EACCES, false, nullptr},
    {"smaps", "smaps", SF_PROC_SMAPS, ProcFile::kGated, EACCES, false, nullptr},
    {"status", "status", SF_PROC_STATUS, ProcFile::kReadable, 0, false,
     kAnyoneReads},
    {"stat", "stat", SF_PROC_STAT, ProcFile::kReadable, 0, false, kAnyoneReads},
    {"fd_dir", "fd", SF_PROC_FD_DIR, ProcFile::kGated, 0, false,
     "the fd/ directory opens and lists fd numbers, not ptrace-gated; each "
     "fd/<n> link in it is refused"},
    {"fdinfo_dir", "fdinfo", SF_PROC_FDINFO, ProcFile::kWalked, EACCES, false,
     nullptr},
    {"fdinfo_entry", "fdinfo/{fd}", SF_PROC_FDINFO, ProcFile::kWalked, EACCES,
     false, nullptr},
    {"auxv", "auxv", SF_PROC_AUXV, ProcFile::kGated, EACCES, false, nullptr},
    {"stack", "stack", SF_PROC_STACK, ProcFile::kGated, EACCES, true,
     "the kernel asks for CAP_SYS_ADMIN when it is read, which the "
     "confinement drops"},
    {"syscall", "syscall", SF_PROC_SYSCALL, ProcFile::kGated, EPERM, true,
     "the kernel checks ptrace access when it is read, not when opened"},
    {"pagemap", "pagemap", SF_PROC_PAGEMAP, ProcFile::kGated, EACCES, false,
     nullptr},
    {"cwd", "cwd", SF_PROC_CWD, ProcFile::kLink, EACCES, false, nullptr},
    {"root", "root", SF_PROC_ROOT, ProcFile::kLink, EACCES, false, nullptr},
    {"exe", "exe", SF_PROC_EXE, ProcFile::kLink, EACCES, false, nullptr},
    {"fd_link", "fd/{fd}", SF_PROC_FD_LINK, ProcFile::kLink, EACCES, false,
     nullptr},
};

// Signal mode kills for gated files and links, audits the readable ones;
// lsm mode refuses them all: EPERM from file_open, EACCES for a magic link
// or fdinfo/ (the kernel reports a refused ptrace_may_access() in a path walk
// so, and the hook cannot tell which entry it was).
Expect SignalFor(const ProcFile& f) {
  switch (f.kind) {
    case ProcFile::kReadable:
      return Audited(SF_WHAT_PROC_OPEN, f.cls);
    case ProcFile::kGated:
    case ProcFile::kWalked:
      return Killed(SF_WHAT_PROC_OPEN, f.cls);
    case ProcFile::kLink:
      return Killed(SF_WHAT_PROC_LINK, f.cls);
  }
  return Allowed();
}

Expect LsmFor(const ProcFile& f) {
  if (f.kind == ProcFile::kLink || f.kind == ProcFile::kWalked) {
    return Denied(EACCES, SF_WHAT_PROC_WALK);
  }
  return Denied(EPERM, SF_WHAT_PROC_OPEN, f.cls);
}

// Landlock refuses what is gated by ptrace access (its scope), never with
// an event.
Expect LandlockFor(const ProcFile& f) {
  if (f.ll_err == 0) return Allowed();
  return f.ll_at_read ? ReadRefused(f.ll_err) : Refused(f.ll_err);
}

// What a description says of a row Landlock does not refuse outright.
std::string LandlockNote(const ProcFile& f) {
  if (f.ll_err == 0) {
    return std::string("; landlock: not covered (") + f.ll_note + ")";
  }
  if (f.ll_at_read) {
    return std::string("; landlock: opens, the read is refused (") + f.ll_note +
           ")";
  }
  return "";
}

const ProcFile& FindFile(const char* name) {
  for (const ProcFile& f : kProcFiles) {
    if (std::string(f.name) == name) return f;
  }
  return kProcFiles[0];
}

// Names and descriptions outlive the table: keep them in static storage.
const char* Keep(std::string s) {
  static std::vector<std::unique_ptr<std::string>> kept;
  kept.push_back(std::make_unique<std::string>(std::move(s)));
  return kept.back()->c_str();
}

std::vector<Scenario> Build() {
  std::vector<Scenario> t;
  auto add = [&t](Scenario s) { t.push_back(std::move(s)); };

  // --- The ptrace family ---------------------------------------------------
  add({"ptrace_attach_other_uid",
       "root in the sandbox: PTRACE_ATTACH to another UID's process",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"ptrace-attach", "{pid}"},
       Killed(SF_WHAT_PTRACE_ATTACH),
       Denied(EPERM, SF_WHAT_PTRACE_ATTACH),
       Refused(EPERM)});
  add({"ptrace_seize_other_uid",
       "root in the sandbox: PTRACE_SEIZE of another UID's process",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"ptrace-seize", "{pid}"},
       Killed(SF_WHAT_PTRACE_SEIZE),
       Denied(EPERM, SF_WHAT_PTRACE_SEIZE),
       Refused(EPERM)});
  add({"ptrace_seize_int80",
       "root in the sandbox: PTRACE_SEIZE through the 32-bit int $0x80 entry"
       "; landlock: seccomp refuses the 32-bit entry",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"ptrace32-seize", "{pid}"},
       Killed(SF_WHAT_PTRACE_SEIZE),
       Denied(EPERM, SF_WHAT_PTRACE_SEIZE),
       Refused(EPERM)});
  add({"ptrace_traceme_foreign_parent",
       "an agent asks its parent (root, outside the sandbox) to trace it"
       "; landlock: not covered (Landlock lets a tracer outside the domain "
       "trace a process inside it: TRACEME hands the caller to its parent "
       "outside, and reaches nothing of the parent)",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"ptrace-traceme"},
       Killed(SF_WHAT_PTRACE_TRACEME),
       Denied(EPERM, SF_WHAT_PTRACE_TRACEME),
       Allowed()});
  add({"vm_readv_other_uid",
       "root in the sandbox: process_vm_readv of another UID's memory",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"vm-readv", "{pid}", "{addr}", "{len}"},
       Killed(SF_WHAT_VM_READV),
       Denied(EPERM, SF_WHAT_VM_READV),
       Refused(EPERM)});
  add({"vm_writev_other_uid",
       "root in the sandbox: process_vm_writev into another UID's memory",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"vm-writev", "{pid}", "{addr}", "pwned"},
       Killed(SF_WHAT_VM_WRITEV),
       Denied(EPERM, SF_WHAT_VM_WRITEV),
       Refused(EPERM)});
  add({"pidfd_getfd_other_uid",
       "root in the sandbox: pidfd_getfd of another UID's open file",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"pidfd-getfd", "{pid}", "{fd}"},
       Killed(SF_WHAT_PIDFD_GETFD),
       Denied(EPERM, SF_WHAT_PIDFD_GETFD),
       Refused(EPERM)});
  add({"ptrace_attach_other_uid_same_sandbox",
       "root: PTRACE_ATTACH to another UID's process in the same sandbox"
       "; landlock: not covered (one domain: Landlock scopes by domain, not by "
       "UID; `run` also drops CAP_SYS_PTRACE, which this suite leaves to root)",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kGuarded,
       {"ptrace-attach", "{pid}"},
       Killed(SF_WHAT_PTRACE_ATTACH),
       Denied(EPERM, SF_WHAT_PTRACE_ATTACH),
       Allowed()});
  add({"ptrace_attach_same_uid_outside",
       "an agent: PTRACE_ATTACH to its own UID's process outside the sandbox",
       kAgentUid,
       Where::kGuarded,
       kAgentUid,
       Where::kOutside,
       {"ptrace-attach", "{pid}"},
       Killed(SF_WHAT_PTRACE_ATTACH),
       Denied(EPERM, SF_WHAT_PTRACE_ATTACH),
       Refused(EPERM)});
  add({"vm_readv_same_uid_outside",
       "an agent: process_vm_readv of its own UID's process outside",
       kAgentUid,
       Where::kGuarded,
       kAgentUid,
       Where::kOutside,
       {"vm-readv", "{pid}", "{addr}", "{len}"},
       Killed(SF_WHAT_VM_READV),
       Denied(EPERM, SF_WHAT_VM_READV),
       Refused(EPERM)});
  // The kernel refuses this itself (never asking the LSM); the signal
  // enforcer judges the attempt at entry and kills it all the same.
  add({"agent_ptrace_root",
       "an unprivileged agent: PTRACE_ATTACH to root's process",
       kAgentUid,
       Where::kGuarded,
       kRoot,
       Where::kOutside,
       {"ptrace-attach", "{pid}"},
       Killed(SF_WHAT_PTRACE_ATTACH),
       Refused(EPERM),
       Refused(EPERM)});

  // --- /proc/<pid>/ files, opened directly --------------------------------
  for (const ProcFile& f : kProcFiles) {
    add({Keep(std::string("proc_") + f.name),
         Keep(std::string("root in the sandbox opens /proc/<other uid>/") +
              f.path + LandlockNote(f)),
         kRoot,
         Where::kGuarded,
         kOtherUid,
         Where::kOutside,
         {"open", std::string("/proc/{pid}/") + f.path},
         SignalFor(f),
         LsmFor(f),
         LandlockFor(f)});
  }

  // --- ... however the path is spelled ------------------------------------
  struct Spelling {
    const char* name;
    const char* description;
    const char* file;
    std::vector<std::string> args;
    Where where = Where::kGuarded;
  };
  const Spelling spellings[] = {
      {"environ_via_dotdot",
       "/proc/self/../<pid>/environ",
       "environ",
       {"open", "/proc/self/../{pid}/environ"}},
      {"environ_via_task_dir",
       "/proc/<pid>/task/<tid>/environ",
       "environ",
       {"open", "/proc/{pid}/task/{pid}/environ"}},
      {"environ_via_proc_dirfd",
       "openat(/proc dirfd, \"<pid>/environ\")",
       "environ",
       {"openat", "/proc", "{pid}/environ"}},
      {"environ_via_pid_dirfd",
       "openat(/proc/<pid> dirfd, \"environ\")",
       "environ",
       {"openat", "/proc/{pid}", "environ"}},
      {"environ_via_openat2",
       "openat2(/proc/<pid> dirfd, \"environ\")",
       "environ",
       {"openat2", "/proc/{pid}", "environ"}},
      {"environ_via_chdir",
       "chdir(/proc/<pid>) then open(\"environ\")",
       "environ",
       {"chdir-open", "/proc/{pid}", "environ"}},
      {"environ_via_second_procfs",
       "<another procfs mount>/<pid>/environ",
       "environ",
       {"open", "{procmnt}/{pid}/environ"}},
      {"environ_via_extra_slashes",
       "//proc//<pid>/./environ",
       "environ",
       {"open", "//proc//{pid}/./environ"}},
      {"environ_via_int80",
       "open(/proc/<pid>/environ) through int $0x80",
       "environ",
       {"open32", "/proc/{pid}/environ"}},
      {"environ_via_int80_openat2",
       "openat2(/proc/<pid>/environ) through int $0x80",
       "environ",
       {"openat2-32", "/proc/{pid}/environ"}},
      // In a sandbox that allows io_uring (signal mode refuses the ring
      // itself elsewhere): the completion is judged on the fd installed.
      {"environ_via_io_uring",
       "IORING_OP_OPENAT of /proc/<pid>/environ (io_uring allowed)",
       "environ",
       {"uring-open", "/proc/{pid}/environ"},
       Where::kUring},
      {"mem_via_io_uring",
       "IORING_OP_OPENAT of /proc/<pid>/mem (io_uring allowed)",
       "mem",
       {"uring-open", "/proc/{pid}/mem"},
       Where::kUring},
      {"mem_via_task_dir",
       "/proc/<pid>/task/<tid>/mem",
       "mem",
       {"open", "/proc/{pid}/task/{pid}/mem"}},
      {"cmdline_via_dotdot",
       "/proc/self/../<pid>/cmdline",
       "cmdline",
       {"open", "/proc/self/../{pid}/cmdline"}},
      {"exe_via_dotdot",
       "/proc/self/../<pid>/exe",
       "exe",
       {"open", "/proc/self/../{pid}/exe"}},
      {"exe_via_pid_dirfd",
       "openat(/proc/<pid> dirfd, \"exe\")",
       "exe",
       {"openat", "/proc/{pid}", "exe"}},
      {"cwd_via_task_dir",
       "/proc/<pid>/task/<tid>/cwd",
       "cwd",
       {"open", "/proc/{pid}/task/{pid}/cwd"}},
      {"root_via_second_procfs",
       "<another procfs mount>/<pid>/root",
       "root",
       {"open", "{procmnt}/{pid}/root"}},
      {"root_via_o_path",
       "open(/proc/<pid>/root, O_PATH)",
       "root",
       {"open-path", "/proc/{pid}/root"}},
      {"fd_link_via_chdir",
       "chdir(/proc/<pid>) then open(\"fd/<n>\")",
       "fd_link",
       {"chdir-open", "/proc/{pid}", "fd/{fd}"}},
      {"fd_link_via_dotdot",
       "/proc/<pid>/fd/../fd/<n>",
       "fd_link",
       {"open", "/proc/{pid}/fd/../fd/{fd}"}},
  };
  for (const Spelling& sp : spellings) {
    const ProcFile& f = FindFile(sp.file);
    // landlock: seccomp refuses every call through the 32-bit entry (its
    // own numbers would get around a filter by number).
    const bool int80 = sp.args[0] == "open32" || sp.args[0] == "openat2-32";
    add({Keep(std::string("spelled_") + sp.name),
         Keep(std::string("root in the sandbox opens ") + sp.description +
              (int80 ? "; landlock: seccomp refuses the 32-bit entry"
                     : LandlockNote(f))),
         kRoot, sp.where, kOtherUid, Where::kOutside, sp.args, SignalFor(f),
         LsmFor(f), int80 ? Refused(EPERM) : LandlockFor(f)});
  }

  // --- Unprivileged agents --------------------------------------------------
  add({"agent_environ_other_uid",
       "an agent opens /proc/<other uid>/environ: the kernel refuses",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"open", "/proc/{pid}/environ"},
       Refused(EACCES),
       Refused(EACCES),
       Refused(EACCES)});
  add({"agent_stat_other_uid",
       "an agent opens /proc/<other uid>/stat (readable by anyone)"
       "; landlock: not covered (stat is not ptrace-gated: any process may "
       "read it)",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"open", "/proc/{pid}/stat"},
       Audited(SF_WHAT_PROC_OPEN, SF_PROC_STAT),
       Denied(EPERM, SF_WHAT_PROC_OPEN, SF_PROC_STAT),
       Allowed()});
  add({"agent_environ_same_uid_outside",
       "an agent opens /proc/<its own UID, outside the sandbox>/environ",
       kAgentUid,
       Where::kGuarded,
       kAgentUid,
       Where::kOutside,
       {"open", "/proc/{pid}/environ"},
       Killed(SF_WHAT_PROC_OPEN, SF_PROC_ENVIRON),
       Denied(EPERM, SF_WHAT_PROC_OPEN, SF_PROC_ENVIRON),
       Refused(EACCES)});

  // --- Leaving the sandbox's cgroup -----------------------------------------
  add({"cgroup_move_self_out",
       "root in the sandbox writes itself into a cgroup outside",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"write", "{escape}/cgroup.procs", "0"},
       Killed(SF_WHAT_CGROUP_WRITE),
       Denied(EPERM, SF_WHAT_CGROUP_WRITE),
       Refused(EACCES)});
  add({"cgroup_move_other_out",
       "root in the sandbox moves another sandboxed process out",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kGuarded,
       {"write", "{escape}/cgroup.threads", "{pid}"},
       Killed(SF_WHAT_CGROUP_WRITE),
       Denied(EPERM, SF_WHAT_CGROUP_WRITE),
       Refused(EACCES)});
  Scenario clone_out{
      "cgroup_clone_into_outside",
      "root in the sandbox: clone3(CLONE_INTO_CGROUP) to a cgroup outside"
      "; landlock: seccomp answers clone3 with ENOSYS",
      kRoot,
      Where::kGuarded,
      kOtherUid,
      Where::kOutside,
      {"clone-into-cgroup", "{escape}"},
      Killed(SF_WHAT_CGROUP_CLONE),
      Denied(EPERM, SF_WHAT_CGROUP_CLONE),
      Refused(ENOSYS)};
  clone_out.child_must_not_run = true;
  add(clone_out);
  // The kernel asks for write permission on the common ancestor's
  // cgroup.procs (outside the sandbox) before moving a process in: lsm
  // refuses that too; signal mode judges only the file opened (inside).
  add({"cgroup_pull_outside_process_in",
       "root in the sandbox moves an outside process into its sandbox",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"write", "{guarded}/cgroup.procs", "{pid}"},
       Allowed(),
       Denied(EPERM, SF_WHAT_CGROUP_WRITE),
       Refused(EACCES)});
  add({"agent_cgroup_move_self_out",
       "an agent writes itself into a cgroup outside: the kernel refuses",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"write", "{escape}/cgroup.procs", "0"},
       Refused(EACCES),
       Refused(EACCES),
       Refused(EACCES)});

  // --- What must keep working -----------------------------------------------
  add({"control_move_into_sub_cgroup",
       "root moves itself into a child cgroup of its own sandbox"
       "; landlock: refused too (a confined process writes no cgroup.procs, "
       "not even its own sandbox's)",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"write", "{sub}/cgroup.procs", "0"},
       Allowed(),
       Allowed(),
       Refused(EACCES)});
  add({"control_clone_into_sub_cgroup",
       "clone3(CLONE_INTO_CGROUP) into a child cgroup of the sandbox"
       "; landlock: refused too (seccomp answers clone3 with ENOSYS)",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"clone-into-cgroup", "{sub}"},
       Allowed(),
       Allowed(),
       Refused(ENOSYS)});
  add({"control_root_traces_own_child",
       "root in the sandbox debugs its own child (attach, mem, peek)",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"own-child-trace"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_agent_traces_own_child",
       "an agent debugs its own child (attach, mem, peek)",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"own-child-trace"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_agent_child_traceme",
       "an agent's child asks the agent to trace it (PTRACE_TRACEME)",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"own-child-traceme"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_agent_reads_own_proc",
       "an agent reads every /proc file of its own child",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"own-proc-reads"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_agent_environ_same_uid_same_sandbox",
       "an agent reads /proc/<pid>/environ of its own UID in its sandbox",
       kAgentUid,
       Where::kGuarded,
       kAgentUid,
       Where::kGuarded,
       {"open", "/proc/{pid}/environ"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_agent_seize_same_uid_same_sandbox",
       "an agent seizes a process of its own UID in its sandbox",
       kAgentUid,
       Where::kGuarded,
       kAgentUid,
       Where::kGuarded,
       {"ptrace-seize", "{pid}"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_agent_exe_same_uid_sub_cgroup",
       "an agent opens /proc/<pid>/exe of its UID in a child cgroup",
       kAgentUid,
       Where::kGuarded,
       kAgentUid,
       Where::kSub,
       {"open", "/proc/{pid}/exe"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_root_reads_self",
       "root in the sandbox reads /proc/self/environ and friends",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"open", "/proc/self/environ"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_root_reads_thread_self_exe",
       "root in the sandbox opens /proc/thread-self/exe",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"open", "/proc/thread-self/exe"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_opens_target_binary_by_path",
       "root in the sandbox opens the target's binary by its real path",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"open", SF_GUARD_TARGET},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_unguarded_environ",
       "root in an unguarded cgroup reads /proc/<other uid>/environ",
       kRoot,
       Where::kUnguarded,
       kOtherUid,
       Where::kOutside,
       {"open", "/proc/{pid}/environ"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_unguarded_ptrace",
       "root in an unguarded cgroup attaches to another UID's process",
       kRoot,
       Where::kUnguarded,
       kOtherUid,
       Where::kOutside,
       {"ptrace-attach", "{pid}"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_outside_environ",
       "root outside every sandbox reads /proc/<other uid>/environ",
       kRoot,
       Where::kOutside,
       kOtherUid,
       Where::kOutside,
       {"open", "/proc/{pid}/environ"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_io_uring_opens_own_proc",
       "root in a sandbox allowing io_uring opens /proc/self/environ with it",
       kRoot,
       Where::kUring,
       kOtherUid,
       Where::kOutside,
       {"uring-open", "/proc/self/environ"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_outside_cgroup_move",
       "root outside every sandbox moves itself between cgroups",
       kRoot,
       Where::kOutside,
       kOtherUid,
       Where::kOutside,
       {"write", "{escape}/cgroup.procs", "0"},
       Allowed(),
       Allowed(),
       Allowed()});

  // --- An audit-only sandbox records and stops nothing ----------------------
  add({"audit_only_environ",
       "root in an audit-only sandbox reads /proc/<other uid>/environ"
       "; landlock: not applicable (no audit-only Landlock sandbox)",
       kRoot,
       Where::kAudited,
       kOtherUid,
       Where::kOutside,
       {"open", "/proc/{pid}/environ"},
       Audited(SF_WHAT_PROC_OPEN, SF_PROC_ENVIRON),
       Audited(SF_WHAT_PROC_OPEN, SF_PROC_ENVIRON),
       NotApplicable(kLandlockNoAudit)});
  add({"audit_only_ptrace",
       "root in an audit-only sandbox attaches to another UID's process"
       "; landlock: not applicable (no audit-only Landlock sandbox)",
       kRoot,
       Where::kAudited,
       kOtherUid,
       Where::kOutside,
       {"ptrace-attach", "{pid}"},
       Audited(SF_WHAT_PTRACE_ATTACH),
       Audited(SF_WHAT_PTRACE_ATTACH),
       NotApplicable(kLandlockNoAudit)});

  // Signals, io_uring, perf, kcmp, symlinks and fd paths into /proc,
  // protected objects (issue 12): guard_scenarios_reach.cc.
  AddReachScenarios(&t);
  return t;
}

}  // namespace

const std::vector<Scenario>& GuardScenarios() {
  static const std::vector<Scenario> table = Build();
  return table;
}

}  // namespace sandfence::guard_test
