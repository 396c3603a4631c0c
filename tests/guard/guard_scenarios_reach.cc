// The guard's rows for issue 12, "out of the sandbox's reach": signals out
// of the sandbox, io_uring, perf_event_open, kcmp, namespace files,
// symbolic links and fd paths into /proc, and sandfence's protected objects
// (pins, state, socket). Each finding of the issue (E5-E8) is a row here.
//
// Unless a row says otherwise the actor is root in the guarded sandbox and
// the target runs as another UID outside it.
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "guard_fixture.h"

namespace sandfence::guard_test {
namespace {

// Names and descriptions outlive the table: keep them in static storage.
const char* Keep(std::string s) {
  static std::vector<std::unique_ptr<std::string>> kept;
  kept.push_back(std::make_unique<std::string>(std::move(s)));
  return kept.back()->c_str();
}

// A refused signal (lsm): EPERM, and the target must still run.
Expect SignalDenied() {
  Expect e = Denied(EPERM, SF_WHAT_SIGNAL);
  e.target_survives = true;
  return e;
}

// kill(-1), kill(0), kill(-pgrp): the kernel signals the members it may
// and reports success; lsm refused the others.
Expect SignalDeniedPartly() {
  return {Outcome::kDeniedPartly, 0, SF_WHAT_SIGNAL};
}

// A path walk through another process's /proc/<pid> magic link: lsm
// refuses it in ptrace_access_check, and the walk fails with EACCES.
Expect Walk() { return Denied(EACCES, SF_WHAT_PROC_WALK); }

}  // namespace

void AddReachScenarios(std::vector<Scenario>* table) {
  auto add = [table](Scenario s) { table->push_back(std::move(s)); };
  const std::string target_bin = SF_GUARD_TARGET;

  // --- Signals out of the sandbox (item 1) ----------------------------------
  // SIGTERM (15) where one target is aimed at: in signal mode the signal
  // still lands (the call runs after its entry), lsm refuses it. SIGURG
  // (23, ignored by default) where a group or everyone is: those reach the
  // test itself, which must not die of it.
  struct Signal {
    const char* name;
    const char* description;
    std::vector<std::string> args;
  };
  const Signal signals[] = {
      {"kill", "kill(pid, SIGTERM)", {"kill", "{pid}", "15"}},
      {"tkill", "tkill(tid, SIGTERM)", {"tkill", "{pid}", "15"}},
      {"tgkill", "tgkill(pid, tid, SIGTERM)", {"tgkill", "{pid}", "15"}},
      {"sigqueue",
       "rt_sigqueueinfo(pid, SIGTERM)",
       {"sigqueue", "{pid}", "15"}},
      {"tgsigqueue",
       "rt_tgsigqueueinfo(pid, tid, SIGTERM)",
       {"tgsigqueue", "{pid}", "15"}},
      {"pidfd",
       "pidfd_send_signal(pidfd, SIGTERM)",
       {"pidfd-kill", "{pid}", "15"}},
      {"procfd",
       "pidfd_send_signal(/proc/<pid> dirfd, SIGTERM)",
       {"procfd-kill", "{pid}", "15"}},
  };
  for (const Signal& sig : signals) {
    add({Keep(std::string("signal_") + sig.name + "_other_uid_outside"),
         Keep(std::string("root in the sandbox: ") + sig.description +
              " of another UID's process outside"),
         kRoot, Where::kGuarded, kOtherUid, Where::kOutside, sig.args,
         Killed(SF_WHAT_SIGNAL), SignalDenied(), LandlockSignalRefused()});
  }
  add({"signal_kill_same_uid_outside",
       "an agent: kill(pid, SIGTERM) of its own UID's process outside",
       kAgentUid,
       Where::kGuarded,
       kAgentUid,
       Where::kOutside,
       {"kill", "{pid}", "15"},
       Killed(SF_WHAT_SIGNAL),
       SignalDenied(),
       LandlockSignalRefused()});
  add({"signal_kill_everyone",
       "an agent: kill(-1, SIGURG), its own UID's processes outside too"
       "; landlock: succeeds, outside processes skipped (signal scope)",
       kAgentUid,
       Where::kGuarded,
       kAgentUid,
       Where::kOutside,
       {"kill", "-1", "23"},
       Killed(SF_WHAT_SIGNAL),
       SignalDeniedPartly(),
       ScopedOut()});
  add({"signal_kill_foreign_group",
       "root in the sandbox: kill(-pgrp, SIGURG) of a group with outsiders"
       "; landlock: succeeds, outside members skipped (signal scope)",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"kill", "-{pgid}", "23"},
       Killed(SF_WHAT_SIGNAL),
       SignalDeniedPartly(),
       ScopedOut()});
  add({"signal_kill_own_group_with_outsiders",
       "root in the sandbox: kill(0, SIGURG), its group reaching outside"
       "; landlock: succeeds, outside members skipped (signal scope)",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"kill", "0", "23"},
       Killed(SF_WHAT_SIGNAL),
       SignalDeniedPartly(),
       ScopedOut()});
  // The kernel refuses an unprivileged signal to another UID before asking
  // the LSM; signal mode judges the attempt at entry.
  add({"signal_agent_to_other_uid",
       "an agent: kill(pid, SIGTERM) of another UID's process outside",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"kill", "{pid}", "15"},
       Killed(SF_WHAT_SIGNAL),
       Refused(EPERM),
       LandlockSignalRefused()});
  add({"audit_only_signal",
       "root in an audit-only sandbox signals a process outside"
       "; landlock: not applicable (no audit-only Landlock sandbox)",
       kRoot,
       Where::kAudited,
       kOtherUid,
       Where::kOutside,
       {"kill", "{pid}", "15"},
       Audited(SF_WHAT_SIGNAL),
       Audited(SF_WHAT_SIGNAL),
       NotApplicable(kLandlockNoAudit)});
  add({"control_signal_own_child",
       "an agent signals its own child in the sandbox",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"kill-own-child"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_signal_own_group",
       "an agent in a process group of its own: kill(0, SIGUSR1)",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"kill-own-group"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_signal_other_uid_same_sandbox",
       "root signals another UID's process in its own sandbox",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kGuarded,
       {"kill", "{pid}", "15"},
       Allowed(),
       Allowed(),
       Allowed()});
  // Signal 0 delivers nothing and, refused, would still say the process
  // exists (ESRCH is answered before the LSM is asked): allowed. Landlock's
  // signal scope refuses it all the same (EPERM says as much as success).
  add({"control_signal_zero_outside",
       "root in the sandbox probes a process outside with kill(pid, 0)"
       "; landlock: refused (the signal scope refuses signal 0 too)",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"kill", "{pid}", "0"},
       Allowed(),
       Allowed(),
       Refused(EPERM)});

  // --- io_uring (item 5, finding E5) -----------------------------------------
  add({"uring_fixed_file_cgroup_escape",
       "E5: IORING_OP_OPENAT of cgroup.procs outside into a fixed-file slot, "
       "then IORING_OP_WRITE of our pid"
       "; landlock: seccomp refuses io_uring_setup",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"uring-fixed-write", "{escape}/cgroup.procs", "self"},
       Killed(SF_WHAT_IO_URING),
       Denied(EPERM, SF_WHAT_CGROUP_WRITE),
       Refused(EPERM)});
  // lsm's file_open sees an io_uring open, even into a fixed-file slot.
  add({"uring_fixed_file_environ",
       "IORING_OP_OPENAT of /proc/<pid>/environ into a fixed-file slot"
       "; landlock: seccomp refuses io_uring_setup",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"uring-fixed-open", "/proc/{pid}/environ"},
       Killed(SF_WHAT_IO_URING),
       Denied(EPERM, SF_WHAT_PROC_OPEN, SF_PROC_ENVIRON),
       Refused(EPERM)});
  add({"uring_setup_refused",
       "root in the sandbox sets up io_uring (not allowed by its policy)"
       "; landlock: seccomp refuses io_uring_setup",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"uring-open", "/dev/null"},
       Killed(SF_WHAT_IO_URING),
       Allowed(),
       Refused(EPERM)});
  add({"control_uring_allowed",
       "io_uring in a sandbox whose policy allows it",
       kRoot,
       Where::kUring,
       kOtherUid,
       Where::kOutside,
       {"uring-open", "/dev/null"},
       Allowed(),
       Allowed(),
       Allowed()});

  // --- perf_event_open (finding E7)
  // -------------------------------------------
  add({"perf_other_process",
       "E7: perf_event_open(pid) sampling another process's user stack"
       "; landlock: seccomp refuses perf_event_open",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"perf-open", "{pid}"},
       Killed(SF_WHAT_PERF_OPEN),
       Denied(EPERM, SF_WHAT_PERF_OPEN),
       Refused(EPERM)});
  add({"perf_cpu_wide",
       "perf_event_open(pid -1, cpu 0): every process on a CPU"
       "; landlock: seccomp refuses perf_event_open",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"perf-open-cpu"},
       Killed(SF_WHAT_PERF_OPEN),
       Denied(EPERM, SF_WHAT_PERF_OPEN),
       Refused(EPERM)});
  add({"control_perf_self",
       "perf_event_open on itself"
       "; landlock: refused too (seccomp refuses perf_event_open outright)",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"perf-open", "0"},
       Allowed(),
       Allowed(),
       Refused(EPERM)});

  // --- kcmp and namespace files (finding E8) ---------------------------------
  add({"kcmp_other_process",
       "E8: kcmp(self, pid, KCMP_VM) with another process outside"
       "; landlock: seccomp refuses kcmp",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"kcmp", "{pid}"},
       Killed(SF_WHAT_KCMP),
       Denied(EPERM, SF_WHAT_KCMP),
       Refused(EPERM)});
  add({"control_kcmp_own_child",
       "kcmp of two of its own processes"
       "; landlock: refused too (seccomp refuses kcmp outright)",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"kcmp-own-child"},
       Allowed(),
       Allowed(),
       Refused(EPERM)});
  add({"ns_net_other_uid",
       "E8: root in the sandbox opens /proc/<pid>/ns/net of another UID",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"open", "/proc/{pid}/ns/net"},
       Killed(SF_WHAT_PROC_LINK, SF_PROC_NS),
       Walk(),
       Refused(EACCES)});
  add({"ns_user_same_uid_outside",
       "E8: an agent opens /proc/<pid>/ns/user of its UID outside",
       kAgentUid,
       Where::kGuarded,
       kAgentUid,
       Where::kOutside,
       {"open", "/proc/{pid}/ns/user"},
       Killed(SF_WHAT_PROC_LINK, SF_PROC_NS),
       Walk(),
       Refused(EACCES)});
  add({"ns_dir_other_uid",
       "root in the sandbox opens the directory /proc/<pid>/ns"
       "; landlock: not covered (the ns/ directory itself is not ptrace-gated; "
       "each link in it is)",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"open", "/proc/{pid}/ns"},
       Killed(SF_WHAT_PROC_OPEN, SF_PROC_NS),
       Denied(EPERM, SF_WHAT_PROC_OPEN, SF_PROC_NS),
       Allowed()});
  add({"control_ns_self",
       "an agent opens its own /proc/self/ns/net",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"open", "/proc/self/ns/net"},
       Allowed(),
       Allowed(),
       Allowed()});

  // --- bpf() and shared fd tables
  // ---------------------------------------------
  add({"bpf_in_sandbox",
       "root in the sandbox calls bpf(BPF_MAP_CREATE)"
       "; landlock: seccomp refuses bpf",
       kRoot,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"bpf-map-create"},
       Killed(SF_WHAT_BPF),
       Denied(EPERM, SF_WHAT_BPF),
       Refused(EPERM)});
  // Signal mode only: a process sharing the fd table would keep an fd its
  // killed sharer opened. lsm refuses before anything is opened.
  Scenario clone_files{
      "clone_files_refused",
      "clone(CLONE_FILES) without CLONE_THREAD"
      "; landlock: not covered (nor needed: the signal enforcer kills after an "
      "open, leaving the fd to a sharer of the table; Landlock refuses before "
      "any fd exists)",
      kRoot,
      Where::kGuarded,
      kOtherUid,
      Where::kOutside,
      {"clone-files"},
      Killed(SF_WHAT_CLONE_FILES),
      Allowed(),
      Allowed()};
  clone_files.child_must_not_run = true;
  add(clone_files);
  add({"control_threads_share_files",
       "a thread (CLONE_THREAD shares the fd table) then an open",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"thread-open", "/dev/null"},
       Allowed(),
       Allowed(),
       Allowed()});

  // --- Symbolic links and fd paths into /proc (finding E6) ------------------
  // As in the finding: an agent, and a victim of its own UID outside.
  struct Path {
    const char* name;
    const char* description;
    std::vector<std::string> args;
    Expect signal;
    // Landlock: a walk through another process's magic link is refused
    // by its ptrace scope (EACCES); open_tree and name_to_handle_at by
    // seccomp (EPERM).
    Expect landlock = Refused(EACCES);
  };
  const Path paths[] = {
      {"symlink_to_pid_dir",
       "E6: ln -s /proc/<pid> lnk; cat lnk/fd/<n>",
       {"symlink-open", "/proc/{pid}", "fd/{fd}"},
       Killed(SF_WHAT_SYMLINK_PROC)},
      {"symlink_to_fd_link",
       "E6: a symlink straight to /proc/<pid>/fd/<n>",
       {"symlink-open", "/proc/{pid}/fd/{fd}", ""},
       Killed(SF_WHAT_SYMLINK_PROC)},
      {"self_fd_of_pid_dir",
       "E6: /proc/self/fd/<O_PATH fd of /proc/<pid>>/fd/<n>",
       {"own-link-open", "self", "/proc/{pid}", "fd/{fd}"},
       Killed(SF_WHAT_PROC_LINK, SF_PROC_FD_LINK)},
      {"dev_fd_of_pid_dir",
       "/dev/fd/<O_PATH fd of /proc/<pid>>/fd/<n>",
       {"own-link-open", "dev", "/proc/{pid}", "fd/{fd}"},
       Killed(SF_WHAT_PROC_LINK, SF_PROC_FD_LINK)},
      {"dev_stdin_of_pid_dir",
       "/dev/stdin/fd/<n>, stdin an O_PATH fd of /proc/<pid>",
       {"own-link-open", "stdin", "/proc/{pid}", "fd/{fd}"},
       Killed(SF_WHAT_PROC_LINK, SF_PROC_FD_LINK)},
      {"open_tree_of_fd_link",
       "E6: open_tree(/proc/<pid>/fd/<n>), reopened via /proc/self/fd",
       {"open-tree-reopen", "/proc/{pid}/fd/{fd}", ""},
       Killed(SF_WHAT_PROC_LINK, SF_PROC_FD_LINK),
       Refused(EPERM)},
      {"open_tree_of_pid_dir",
       "open_tree(/proc/<pid>), then openat(tree, \"fd/<n>\")",
       {"open-tree-reopen", "/proc/{pid}", "fd/{fd}"},
       Killed(SF_WHAT_PROC_HANDLE),
       Refused(EPERM)},
      {"cwd_through_symlink",
       "E6: ln -s /proc/<pid>/cwd lnk; cd lnk; cat a file",
       {"symlink-chdir-open", "/proc/{pid}/cwd", "{free_name}/state"},
       Killed(SF_WHAT_SYMLINK_PROC)},
      {"chdir_into_cwd_link",
       "chdir(/proc/<pid>/cwd), then open a file relative to it",
       {"chdir-open", "/proc/{pid}/cwd", "{free_name}/state"},
       Killed(SF_WHAT_PROC_LINK, SF_PROC_CWD)},
      {"path_past_cwd_link",
       "/proc/<pid>/cwd/<a file below it>",
       {"open", "/proc/{pid}/cwd/{free_name}/state"},
       Killed(SF_WHAT_PROC_LINK, SF_PROC_CWD)},
      {"path_past_fd_link_dotdot",
       "/proc/<pid>/cwd/x/../<a file below it>",
       {"open", "/proc/{pid}/cwd/{free_name}/../free/state"},
       Killed(SF_WHAT_PROC_LINK, SF_PROC_CWD)},
      {"name_to_handle_of_fd_link",
       "name_to_handle_at(/proc/<pid>/fd/<n>, AT_SYMLINK_FOLLOW)",
       {"name-to-handle", "/proc/{pid}/fd/{fd}"},
       Killed(SF_WHAT_PROC_HANDLE, SF_PROC_FD_LINK),
       Refused(EPERM)},
  };
  for (const Path& p : paths) {
    add({Keep(std::string("reach_") + p.name),
         Keep(std::string("an agent: ") + p.description +
              (p.landlock.err == EPERM ? "; landlock: seccomp refuses the call"
                                       : "")),
         kAgentUid, Where::kGuarded, kAgentUid, Where::kOutside, p.args,
         p.signal, Walk(), p.landlock});
  }
  // /proc/<pid>/root/x of a process that shares our root is /x: signal
  // mode does not judge it (docs/guard.md); lsm refuses the walk.
  add({"reach_path_past_shared_root",
       "/proc/<pid>/root/<a path> of a process sharing the caller's root",
       kAgentUid,
       Where::kGuarded,
       kAgentUid,
       Where::kOutside,
       {"open", "/proc/{pid}/root" + target_bin},
       Allowed(),
       Walk(),
       Refused(EACCES)});
  // Signal mode refuses a symlink to /dev/fd (a way into /proc/self/fd that
  // a later path need not spell); lsm has nothing against it.
  add({"reach_symlink_to_dev_fd",
       "an agent: a symlink to /dev/fd, then opened"
       "; landlock: not covered (nor needed: /dev/fd is the caller's own "
       "/proc/self/fd; only the signal enforcer's symlink heuristic refuses "
       "it)",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"symlink-open", "/dev/fd", ""},
       Killed(SF_WHAT_SYMLINK_PROC),
       Allowed(),
       Allowed()});
  add({"control_symlink_to_a_file",
       "an agent: a symlink to an ordinary file, then opened",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"symlink-open", target_bin, ""},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_self_fd_of_own_dir",
       "an agent: /proc/self/fd/<O_PATH fd of a directory>/<file>",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"own-link-open", "self", "{free}", "state"},
       Allowed(),
       Allowed(),
       Allowed()});
  add({"control_chdir_own_cwd_link",
       "an agent: chdir(/proc/self/cwd), then open a file",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"chdir-open", "/proc/self/cwd", target_bin},
       Allowed(),
       Allowed(),
       Allowed()});

  // --- Protected objects: pins, state, socket (item 3) -----------------------
  struct Change {
    const char* name;
    const char* description;
    std::vector<std::string> args;
    uint32_t signal_what;
    uint32_t lsm_what;
    // Landlock: the protected directory is a no_access path, so every
    // change beneath it is refused (EACCES; a link out of it EXDEV),
    // except what Landlock has no right for.
    Expect landlock = Refused(EACCES);
    const char* landlock_note = nullptr;
  };
  const Change changes[] = {
      {"unlink_state",
       "unlink(state)",
       {"unlink", "{prot}/state"},
       SF_WHAT_PROT_UNLINK,
       SF_WHAT_PROT_UNLINK},
      {"unlink_deep_pin",
       "unlink(pins/sub/pin)",
       {"unlink", "{prot}/pins/sub/pin"},
       SF_WHAT_PROT_UNLINK,
       SF_WHAT_PROT_UNLINK},
      {"unlinkat_dirfd",
       "unlinkat(dirfd of pins/sub, \"pin\")",
       {"unlinkat-dirfd", "{prot}/pins/sub", "pin"},
       SF_WHAT_PROT_UNLINK,
       SF_WHAT_PROT_UNLINK},
      {"unlink_relative",
       "chdir(pins), unlink(\"sub/pin\")",
       {"chdir-unlink", "{prot}/pins", "sub/pin"},
       SF_WHAT_PROT_UNLINK,
       SF_WHAT_PROT_UNLINK},
      {"unlink_relative_from_above",
       "chdir(/tmp), unlink(\"<dir>/state\")",
       {"chdir-unlink", "/tmp", "{prot_name}/state"},
       SF_WHAT_PROT_UNLINK,
       SF_WHAT_PROT_UNLINK},
      {"unlink_dotdot",
       "unlink(<dir>/../prot/state)",
       {"unlink", "{prot}/../prot/state"},
       SF_WHAT_PROT_UNLINK,
       SF_WHAT_PROT_UNLINK},
      {"rmdir_empty",
       "rmdir(pins/empty)",
       {"rmdir", "{prot}/pins/empty"},
       SF_WHAT_PROT_UNLINK,
       SF_WHAT_PROT_UNLINK},
      {"rename_dir_away",
       "rename(<the directory>, elsewhere)",
       {"rename", "{prot}", "{free}/moved"},
       SF_WHAT_PROT_RENAME,
       SF_WHAT_PROT_RENAME},
      {"rename_file_out",
       "rename(state, elsewhere)",
       {"rename", "{prot}/state", "{free}/stolen"},
       SF_WHAT_PROT_RENAME,
       SF_WHAT_PROT_RENAME},
      {"rename_over_state",
       "rename(a file of ours, state)",
       {"rename-into", "{free}", "{prot}/state"},
       SF_WHAT_PROT_RENAME,
       SF_WHAT_PROT_RENAME},
      {"mkdir_in",
       "mkdir(pins/new)",
       {"mkdir", "{prot}/pins/new"},
       SF_WHAT_PROT_CREATE,
       SF_WHAT_PROT_CREATE},
      // Signal mode judges the file the open created (it exists by then).
      {"create_in",
       "open(new, O_CREAT)",
       {"create", "{prot}/new"},
       SF_WHAT_PROT_WRITE,
       SF_WHAT_PROT_CREATE},
      {"write_state",
       "open(state, O_WRONLY) and write",
       {"write", "{prot}/state", "x"},
       SF_WHAT_PROT_WRITE,
       SF_WHAT_PROT_WRITE},
      {"truncate_state",
       "truncate(state)",
       {"truncate", "{prot}/state"},
       SF_WHAT_PROT_SETATTR,
       SF_WHAT_PROT_SETATTR},
      {"chmod_pins",
       "chmod(pins)",
       {"chmod", "{prot}/pins"},
       SF_WHAT_PROT_SETATTR,
       SF_WHAT_PROT_SETATTR,
       Allowed(),
       "not covered (Landlock has no right for chmod or chown: a file's "
       "metadata changes under every rule; DAC lets root)"},
      // A new name made by mknod (a FIFO here) or by bind() of a Unix
      // socket: lsm's inode_mknod sees both; signal mode judges both calls.
      {"mkfifo_in",
       "mknod(<dir>/fifo, S_IFIFO)",
       {"mkfifo", "{prot}/fifo"},
       SF_WHAT_PROT_CREATE,
       SF_WHAT_PROT_CREATE},
      {"bind_socket_in",
       "bind() a Unix socket at <dir>/new.sock",
       {"bind", "{prot}/new.sock"},
       SF_WHAT_PROT_CREATE,
       SF_WHAT_PROT_CREATE},
      {"link_out",
       "link(state, elsewhere)",
       {"link", "{prot}/state", "{free}/hard"},
       SF_WHAT_PROT_CREATE,
       SF_WHAT_PROT_CREATE,
       Refused(EXDEV),
       "refused with EXDEV (Landlock refuses a link that would give a file "
       "more rights under its new name than it has where it is)"},
      {"symlink_in",
       "symlink(a file, <dir>/lnk)",
       {"symlink", target_bin, "{prot}/lnk"},
       SF_WHAT_PROT_CREATE,
       SF_WHAT_PROT_CREATE},
      {"connect_daemon_socket",
       "connect() to the daemon's socket",
       {"connect", "{prot}/daemon.sock"},
       SF_WHAT_PROT_CONNECT,
       SF_WHAT_PROT_CONNECT,
       Allowed(),
       "not covered (connecting to a pathname Unix socket needs no Landlock "
       "right on 6.18, even under a no_access path: the right comes in a "
       "later kernel; file permissions still apply)"},
      {"connect_protected_socket",
       "connect() to a socket protected itself",
       {"connect", "{sock}"},
       SF_WHAT_PROT_CONNECT,
       SF_WHAT_PROT_CONNECT,
       Allowed(),
       "not covered (connecting to a pathname Unix socket needs no Landlock "
       "right on 6.18, even under a no_access path: the right comes in a "
       "later kernel; file permissions still apply)"},
      {"datagram_to_protected",
       "connect() and send() to a datagram socket",
       {"connect-dgram", "{prot}/dgram.sock"},
       SF_WHAT_PROT_CONNECT,
       SF_WHAT_PROT_CONNECT,
       Allowed(),
       "not covered (connecting to a pathname Unix socket needs no Landlock "
       "right on 6.18, even under a no_access path: the right comes in a "
       "later kernel; file permissions still apply)"},
  };
  for (const Change& c : changes) {
    add({Keep(std::string("protected_") + c.name),
         Keep(std::string("root in the sandbox, on sandfence's files: ") +
              c.description +
              (c.landlock_note != nullptr
                   ? std::string("; landlock: ") + c.landlock_note
                   : std::string())),
         kRoot, Where::kGuarded, kOtherUid, Where::kOutside, c.args,
         Killed(c.signal_what), Denied(EPERM, c.lsm_what), c.landlock});
  }
  add({"protected_agent_unlink_state",
       "an agent (DAC would let it) unlinks sandfence's state file",
       kAgentUid,
       Where::kGuarded,
       kOtherUid,
       Where::kOutside,
       {"unlink", "{prot}/state"},
       Killed(SF_WHAT_PROT_UNLINK),
       Denied(EPERM, SF_WHAT_PROT_UNLINK),
       Refused(EACCES)});
  add({"audit_only_protected_unlink",
       "root in an audit-only sandbox unlinks sandfence's state file"
       "; landlock: not applicable (no audit-only Landlock sandbox)",
       kRoot,
       Where::kAudited,
       kOtherUid,
       Where::kOutside,
       {"unlink", "{prot}/state"},
       Audited(SF_WHAT_PROT_UNLINK),
       Audited(SF_WHAT_PROT_UNLINK),
       NotApplicable(kLandlockNoAudit)});
  struct Free {
    const char* name;
    const char* description;
    std::vector<std::string> args;
    Where where = Where::kGuarded;
    Expect landlock = Allowed();
    const char* landlock_note = nullptr;
  };
  const Free frees[] = {
      {"read_protected",
       "reads sandfence's state file",
       {"open", "{prot}/state"},
       Where::kGuarded,
       Refused(EACCES),
       "refused (a no_access path: Landlock hides it from reads too, "
       "where the BPF guards refuse only changes)"},
      {"unlink_own_file",
       "creates and removes a file of its own",
       {"unlink-own", "{free}"}},
      {"write_unprotected",
       "writes a file in an unprotected directory",
       {"write", "{free}/state", "x"}},
      {"create_unprotected",
       "creates a file in an unprotected directory",
       {"create", "{free}/new"}},
      {"rename_unprotected",
       "renames a file of its own",
       {"rename-into", "{free}", "{free}/renamed"}},
      {"connect_unprotected",
       "connects to an unprotected socket",
       {"connect", "{free}/free.sock"}},
      {"outside_unlinks_state",
       "outside every sandbox: unlinks the state file",
       {"unlink", "{prot}/state"},
       Where::kOutside},
  };
  for (const Free& f : frees) {
    add({Keep(std::string("control_") + f.name),
         Keep(std::string("root ") + f.description +
              (f.landlock_note != nullptr
                   ? std::string("; landlock: ") + f.landlock_note
                   : std::string())),
         kRoot, f.where, kOtherUid, Where::kOutside, f.args, Allowed(),
         Allowed(), f.landlock});
  }
}

}  // namespace sandfence::guard_test
