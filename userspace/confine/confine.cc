#include "confine/confine.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "confine/seccomp_filter.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif

namespace sandfence {
namespace {

using confine::kFsReadRights;

// Raw system calls only: this runs between clone and exec.
int DropReadBypassCapabilities() noexcept {
  static constexpr int kCaps[] = {CAP_SYS_ADMIN, CAP_PERFMON};
  for (int cap : kCaps) {
    // EINVAL: a capability this kernel does not know. EPERM: no
    // CAP_SETPCAP to shrink the bounding set; with no_new_privs and the
    // capability gone from the permitted set, exec cannot bring it back.
    if (::syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 &&
        errno != EINVAL && errno != EPERM) {
      return -errno;
    }
    ::syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, cap, 0, 0);
  }
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  if (::syscall(SYS_capget, &header, data) != 0) return -errno;
  for (int cap : kCaps) {
    const uint32_t bit = 1u << (cap % 32);
    data[cap / 32].effective &= ~bit;
    data[cap / 32].permitted &= ~bit;
    data[cap / 32].inheritable &= ~bit;
  }
  if (::syscall(SYS_capset, &header, data) != 0) return -errno;
  return 0;
}

std::string Paths(const std::vector<std::string>& paths) {
  return paths.empty() ? "(none)" : absl::StrJoin(paths, ", ");
}

// What the described rows need from either a plan or a prepared one.
struct Facts {
  const ConfinePlan* plan = nullptr;
  int abi = 0;
  uint64_t handled_fs = 0;
  uint64_t scoped = 0;
  std::vector<std::string> no_write;   // as applied, or as planned
  std::vector<std::string> no_access;  // likewise
  std::vector<std::string> absent;     // no_access paths that do not exist
  std::vector<std::string> devices;    // hidden raw devices, when prepared
};

std::vector<ConfineGuarantee> Describe(const Facts& f) {
  const ConfinePlan& plan = *f.plan;
  std::vector<ConfineGuarantee> out;
  const std::string landlock = absl::StrCat("landlock ABI ", f.abi);
  const std::string no_landlock =
      "—: no landlock on this kernel (the caller must refuse or fall back)";
  auto add = [&out](ConfineGuaranteeId id, std::string what, bool holds,
                    std::string layer) {
    out.push_back({id, std::move(what), holds, std::move(layer)});
  };
  const bool has_landlock = f.abi >= 1;
  add(ConfineGuaranteeId::kNoPtraceAcross,
      "no ptrace, process_vm_readv/writev, pidfd_getfd or /proc/<pid>/mem "
      "across the sandbox boundary",
      has_landlock, has_landlock ? landlock : no_landlock);
  if (!has_landlock) {
    add(ConfineGuaranteeId::kNoProcReadAcross,
        "no /proc/<pid>/{environ,maps,auxv,pagemap,fd,cwd,root,exe} of a "
        "process outside",
        false, no_landlock);
  } else if (plan.drop_read_bypass_capabilities) {
    add(ConfineGuaranteeId::kNoProcReadAcross,
        "no /proc/<pid>/{environ,maps,auxv,pagemap,fd,cwd,root,exe} of a "
        "process outside",
        true, absl::StrCat(landlock, " + CAP_PERFMON, CAP_SYS_ADMIN dropped"));
  } else {
    add(ConfineGuaranteeId::kNoProcReadAcross,
        "no /proc/<pid>/{environ,maps,auxv,pagemap,fd,cwd,root,exe} of a "
        "process outside",
        false,
        "—: CAP_PERFMON/CAP_SYS_ADMIN kept: mm_access() lets them read "
        "environ, maps, auxv, pagemap, smaps past every LSM (fd, cwd, root, "
        "exe stay denied)");
  }
  const bool scopes = (f.scoped & confine::kScopeSignal) != 0;
  const std::string no_scopes =
      has_landlock
          ? absl::StrCat("—: landlock ABI ", f.abi,
                         ": no signal or abstract socket scoping (ABI 6)")
          : no_landlock;
  add(ConfineGuaranteeId::kNoSignalOut,
      "no signal to a process outside (kill, tgkill, pidfd_send_signal, "
      "SIGIO through F_SETOWN)",
      scopes, scopes ? landlock : no_scopes);
  add(ConfineGuaranteeId::kNoAbstractUnixOut,
      "no connect or send to an abstract Unix socket outside",
      (f.scoped & confine::kScopeAbstractUnixSocket) != 0,
      (f.scoped & confine::kScopeAbstractUnixSocket) != 0 ? landlock
                                                          : no_scopes);
  add(ConfineGuaranteeId::kNoPathnameUnixOut,
      "no connect to a Unix socket file under a no_access path", false,
      absl::StrCat("—: ", has_landlock ? landlock : "no landlock",
                   " has no right for pathname Unix sockets (kernels after "
                   "6.18 add one); file permissions, a mount namespace, or "
                   "the server checking its peer must"));
  add(ConfineGuaranteeId::kNoLimitsOnOthers,
      "no resource limits set on another process (RLIMIT_CPU makes the "
      "kernel kill it)",
      true, "seccomp");
  add(ConfineGuaranteeId::kNoPriorityOfOthers,
      "no scheduling or I/O priority change of a process outside", false,
      "—: neither layer has a right for it (setpriority, sched_setattr, "
      "ioprio_set need only the same uid to lower another's priority); drop "
      "CAP_SYS_NICE to keep it to that");
  add(ConfineGuaranteeId::kNoUserNamespace, "no user namespace", true,
      "seccomp");
  add(ConfineGuaranteeId::kNoOtherNamespace,
      "no other new namespace (mount, pid, net, uts, ipc, cgroup, time), no "
      "setns",
      true, "seccomp");
  add(ConfineGuaranteeId::kNoMount,
      "no mount, umount, pivot_root, chroot or new mount API", true,
      has_landlock ? absl::StrCat("seccomp + ", landlock) : "seccomp");
  add(ConfineGuaranteeId::kNoBpf, "no bpf()", true, "seccomp");
  add(ConfineGuaranteeId::kNoPerfEvents, "no perf_event_open", true, "seccomp");
  add(ConfineGuaranteeId::kNoKernelCode, "no kernel modules, no kexec", true,
      "seccomp");
  add(ConfineGuaranteeId::kNoHostWideCalls,
      "no host-wide calls (clock, reboot, swap, accounting, quotas, syslog, "
      "I/O ports, file handles, userfaultfd, kcmp, process_madvise)",
      true, "seccomp");
  add(ConfineGuaranteeId::kNoKeyrings, "no keyrings", true, "seccomp");
  add(ConfineGuaranteeId::kNoTerminalInjection,
      "no input pushed into a terminal (TIOCSTI, TIOCLINUX)", true, "seccomp");

  // File-system rows.
  const uint64_t write_rights = f.handled_fs & ~kFsReadRights;
  std::string fs_notes;
  if (has_landlock) {
    if (f.abi < 3) fs_notes += ", truncate(2) not covered (ABI 3)";
    if (f.abi < 5) fs_notes += ", ioctl on device files not covered (ABI 5)";
  }
  std::string writes = absl::StrCat("no writes to ", Paths(f.no_write));
  if (!plan.no_write_fs_types.empty()) {
    absl::StrAppend(&writes, " (nor to any ",
                    absl::StrJoin(plan.no_write_fs_types, ", "),
                    " mount, wherever mounted)");
  }
  add(ConfineGuaranteeId::kNoWrites, writes, has_landlock && write_rights != 0,
      has_landlock ? absl::StrCat(landlock, fs_notes) : no_landlock);
  if (!f.no_access.empty() || !plan.no_access.empty()) {
    std::string what = absl::StrCat("no access to ", Paths(f.no_access));
    if (!f.absent.empty()) {
      absl::StrAppend(&what, " (absent, so skipped: ", Paths(f.absent), ")");
    }
    if (plan.list_ancestors_of_no_access) {
      absl::StrAppend(&what, " (names beneath them stay listable)");
    }
    add(ConfineGuaranteeId::kNoAccess, what, has_landlock,
        has_landlock ? absl::StrCat(landlock, fs_notes) : no_landlock);
  }
  if (plan.hide_raw_devices) {
    std::string what =
        "no raw disk, memory, SCSI/NVMe, userfaultfd, virtual input, console, "
        "watchdog or kernel log device opened";
    if (!f.devices.empty()) {
      absl::StrAppend(&what, " (", f.devices.size(), " under /dev, e.g. ",
                      f.devices.front(), ")");
    }
    add(ConfineGuaranteeId::kNoRawDevices, what, has_landlock,
        has_landlock ? landlock : no_landlock);
  }
  if (plan.no_device_nodes) {
    add(ConfineGuaranteeId::kNoDeviceNodes,
        "no device node created (mknod of a character or block device)",
        has_landlock, has_landlock ? landlock : no_landlock);
  }
  add(ConfineGuaranteeId::kNo32BitEntry, "no 32-bit (int $0x80) or x32 entry",
      true, "seccomp");
  add(ConfineGuaranteeId::kNoIoUring, "no io_uring", plan.deny_io_uring,
      plan.deny_io_uring ? "seccomp" : "—: allowed by the policy");
  add(ConfineGuaranteeId::kNoPtraceInside, "no ptrace even inside the sandbox",
      plan.deny_ptrace,
      plan.deny_ptrace ? "seccomp"
                       : "—: allowed by the policy (landlock keeps it inside)");
  add(ConfineGuaranteeId::kNoPrivilegeGainAtExec,
      "no privilege gained at exec (setuid, file capabilities)", true,
      "no_new_privs");
  return out;
}

}  // namespace

std::vector<std::string> DefaultNoWriteFsTypes() {
  return {"cgroup",     "cgroup2",     "bpf",       "sysfs",    "proc",
          "securityfs", "debugfs",     "tracefs",   "configfs", "efivarfs",
          "pstore",     "binfmt_misc", "selinuxfs", "smackfs",  "fusectl"};
}

absl::StatusOr<PreparedConfinement> PrepareConfinement(
    const ConfinePlan& plan) {
  const confine::LandlockAbi abi = confine::ProbeLandlockAbi();
  if (abi.version < 1) {
    return Rejected(absl::StrCat("cannot confine the command: ", abi.reason,
                                 " (the command is not started unconfined)"));
  }
  PreparedConfinement p;
  p.plan_ = plan;
  p.landlock_abi_ = abi.version;

  const uint64_t write_rights = confine::FsWriteRightsOfAbi(abi.version);
  p.handled_fs_ = write_rights;
  p.scoped_ = confine::ScopesOfAbi(abi.version);
  if (abi.version < 2) {
    p.lacking_.push_back(
        "REFER (ABI 2): every rename or link across directories is refused");
  }
  if (abi.version < 3) p.lacking_.push_back("TRUNCATE (ABI 3)");
  if (abi.version < 5) p.lacking_.push_back("IOCTL_DEV (ABI 5)");
  if (abi.version < 6) {
    p.lacking_.push_back("signal and abstract Unix socket scoping (ABI 6)");
  }

  std::vector<confine::Exclusion> exclusions;
  for (const std::string& path : plan.no_write) {
    exclusions.push_back({path, kFsReadRights});
  }
  absl::StatusOr<std::vector<confine::MountEntry>> mounts =
      confine::ReadMountInfo();
  if (!mounts.ok()) return mounts.status();
  for (std::string& m :
       confine::MountPointsOfTypes(*mounts, plan.no_write_fs_types)) {
    exclusions.push_back({std::move(m), kFsReadRights});
  }
  for (const std::string& path : plan.no_access) {
    exclusions.push_back({path, 0});
  }
  if (plan.hide_raw_devices) {
    absl::StatusOr<std::vector<std::string>> devices =
        confine::RawDeviceNodes();
    if (!devices.ok()) return devices.status();
    p.raw_devices_ = std::move(*devices);
    for (const std::string& path : p.raw_devices_) {
      exclusions.push_back({path, 0});
    }
  }
  // Every other name the mount table gives an excluded place (devtmpfs
  // mounted again in a chroot exposes /dev/vda there) is excluded too.
  exclusions = confine::WithMountAliases(exclusions, *mounts);
  // What the child's mount namespace will not have.
  auto detached = [&plan](const std::string& path) {
    for (const std::string& d : plan.detached_mounts) {
      if (path == d || absl::StartsWith(path, d + "/")) return true;
    }
    return false;
  };
  exclusions.erase(std::remove_if(exclusions.begin(), exclusions.end(),
                                  [&](const confine::Exclusion& e) {
                                    return detached(e.path);
                                  }),
                   exclusions.end());
  // Reading is handled (and granted everywhere else) only when something
  // must not be read.
  for (const confine::Exclusion& e : exclusions) {
    if (e.keep == 0) p.handled_fs_ |= kFsReadRights;
  }

  absl::StatusOr<UniqueFd> ruleset =
      confine::CreateRuleset(abi.version, p.handled_fs_, p.scoped_);
  if (!ruleset.ok()) return ruleset.status();
  const uint64_t withheld =
      plan.no_device_nodes ? confine::kFsMakeChar | confine::kFsMakeBlock : 0;
  absl::StatusOr<confine::RulePlan> rules = confine::PlanRules(
      exclusions, p.handled_fs_, plan.list_ancestors_of_no_access,
      ruleset->get(), withheld);
  if (!rules.ok()) return rules.status();
  p.ruleset_ = std::move(*ruleset);
  p.rules_ = std::move(*rules);
  for (const std::string& path : plan.fresh_mounts) {
    if (path.empty() || path[0] != '/') {
      return Malformed(absl::StrCat("confinement: fresh mount \"", path,
                                    "\" is not absolute"));
    }
    const uint64_t rights =
        confine::RightsBeneath(p.rules_.applied, path, p.handled_fs_, withheld);
    if (rights != 0) p.fresh_mounts_.push_back({path, rights});
  }

  p.filter_ = confine::BuildSeccompFilter(
      {.deny_io_uring = plan.deny_io_uring, .deny_ptrace = plan.deny_ptrace});
  if (p.filter_.empty() || p.filter_.size() > BPF_MAXINSNS) {
    return absl::InternalError(
        absl::StrCat("seccomp program does not assemble (", p.filter_.size(),
                     " instructions): a bug in confine/seccomp_filter.cc"));
  }
  return p;
}

const char* ConfineStepName(int step) noexcept {
  switch (step) {
    case kConfineStepNoNewPrivs:
      return "set no_new_privs";
    case kConfineStepCapabilities:
      return "drop CAP_SYS_ADMIN and CAP_PERFMON";
    case kConfineStepLandlock:
      return "restrict itself with landlock";
    case kConfineStepSeccomp:
      return "install the seccomp filter";
    case kConfineStepFreshMounts:
      return "add the landlock rules of its fresh mounts";
  }
  return "confine itself";
}

int ApplyConfinement(const PreparedConfinement& prepared,
                     int* failed_step) noexcept {
  const auto fail = [failed_step](int step, int err) {
    if (failed_step != nullptr) *failed_step = step;
    return -err;
  };
  // First: landlock_restrict_self and a seccomp filter each need it (or
  // CAP_SYS_ADMIN, which we are about to drop), and it keeps exec from
  // giving back what the next steps take.
  if (::syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return fail(kConfineStepNoNewPrivs, errno);
  }
  if (prepared.plan_.drop_read_bypass_capabilities) {
    const int rc = DropReadBypassCapabilities();
    if (rc != 0) return fail(kConfineStepCapabilities, -rc);
  }
  const int ruleset = prepared.ruleset_.release();
  if (ruleset < 0) return fail(kConfineStepLandlock, EBADF);
  // The ruleset is shared with the parent (one open file): a rule added
  // here stays in it, naming this child's mount, which no later child can
  // reach (its own namespaces, and Landlock keeps it out of ours).
  for (const PreparedConfinement::FreshMount& m : prepared.fresh_mounts_) {
    const int fd = static_cast<int>(
        ::syscall(SYS_openat, AT_FDCWD, m.path.c_str(), O_PATH | O_CLOEXEC, 0));
    if (fd < 0) {
      const int err = errno;
      ::close(ruleset);
      return fail(kConfineStepFreshMounts, err);
    }
    struct landlock_path_beneath_attr beneath;
    beneath.allowed_access = m.rights;
    beneath.parent_fd = fd;
    const long added = ::syscall(SYS_landlock_add_rule, ruleset,
                                 LANDLOCK_RULE_PATH_BENEATH, &beneath, 0);
    const int err = errno;
    ::close(fd);
    if (added != 0) {
      ::close(ruleset);
      return fail(kConfineStepFreshMounts, err);
    }
  }
  const long restricted = ::syscall(SYS_landlock_restrict_self, ruleset, 0);
  const int restrict_errno = errno;
  ::close(ruleset);
  if (restricted != 0) return fail(kConfineStepLandlock, restrict_errno);
  // Last: nothing we still do before exec may be refused by it.
  struct sock_fprog program;
  program.len = static_cast<unsigned short>(prepared.filter_.size());
  program.filter = const_cast<sock_filter*>(prepared.filter_.data());
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0) {
    return fail(kConfineStepSeccomp, errno);
  }
  return 0;
}

std::vector<ConfineGuarantee> DescribeConfinement(
    const PreparedConfinement& prepared) {
  Facts f;
  f.plan = &prepared.plan();
  f.abi = prepared.landlock_abi();
  f.handled_fs = prepared.handled_fs();
  f.scoped = prepared.scoped();
  const std::set<std::string> devices(prepared.raw_devices().begin(),
                                      prepared.raw_devices().end());
  // What an exclusion keeps is relative to what is handled: without the
  // read rights handled (nothing to hide), every exclusion is no_write.
  const bool reads_handled = (f.handled_fs & kFsReadRights) != 0;
  for (const confine::Exclusion& e : prepared.rules().applied) {
    if (devices.count(e.path) != 0) {
      f.devices.push_back(e.path);
    } else if (e.keep == 0 && reads_handled) {
      f.no_access.push_back(e.path);
    } else {
      f.no_write.push_back(e.path);
    }
  }
  for (const std::string& path : prepared.rules().skipped) {
    for (const std::string& hidden : prepared.plan().no_access) {
      if (path == hidden) f.absent.push_back(path);
    }
  }
  return Describe(f);
}

std::vector<ConfineGuarantee> DescribeConfinement(const ConfinePlan& plan,
                                                  int landlock_abi) {
  Facts f;
  f.plan = &plan;
  f.abi = landlock_abi;
  f.scoped = confine::ScopesOfAbi(landlock_abi);
  f.no_write = plan.no_write;
  f.no_access = plan.no_access;
  if (landlock_abi >= 1) {
    f.handled_fs = confine::FsWriteRightsOfAbi(landlock_abi);
    if (!plan.no_access.empty() || plan.hide_raw_devices) {
      f.handled_fs |= kFsReadRights;
    }
  }
  return Describe(f);
}

absl::Status ConfineSupport::Usable() const {
  if (usable()) return absl::OkStatus();
  std::vector<std::string> why;
  if (landlock_abi < 1) why.push_back(landlock_reason);
  if (!seccomp_filter) why.push_back(seccomp_reason);
  if (landlock_abi >= 1 && seccomp_filter && !applied) {
    why.push_back(apply_reason);
  }
  return Rejected(absl::StrCat("this host cannot confine a command: ",
                               absl::StrJoin(why, "; ")));
}

absl::StatusOr<ConfineSupport> ProbeConfinement() {
  ConfineSupport support;
  const confine::LandlockAbi abi = confine::ProbeLandlockAbi();
  support.landlock_abi = abi.version;
  support.landlock_errata = abi.errata;
  support.landlock_errno = abi.error;
  support.landlock_reason = abi.reason;

  uint32_t action = SECCOMP_RET_ERRNO;
  if (::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0) {
    support.seccomp_filter = true;
  } else {
    support.seccomp_reason =
        errno == ENOSYS || errno == EINVAL
            ? "seccomp filters are not built into this kernel"
            : std::string(
                  ErrnoError(errno, "seccomp(GET_ACTION_AVAIL, RET_ERRNO)")
                      .message());
  }
  if (abi.version < 1 || !support.seccomp_filter) return support;

  // Probe by applying: a child applies the default plan (no paths: the
  // walk stays at /) and checks one denial of each layer.
  ConfinePlan plan;
  plan.no_write.clear();
  plan.no_write_fs_types.clear();
  plan.hide_raw_devices = false;
  absl::StatusOr<PreparedConfinement> prepared = PrepareConfinement(plan);
  if (!prepared.ok()) {
    support.apply_reason = std::string(prepared.status().message());
    return support;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2");
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  const pid_t child = ::fork();
  if (child < 0) return ErrnoError(errno, "fork the confinement probe");
  if (child == 0) {
    struct {
      int step, err, seccomp_err, landlock_err;
    } r = {0, 0, 0, 0};
    // Named before applying: /proc/<pid>/mem of our parent, outside the
    // domain the child is about to enter.
    char mem[32] = "/proc/";
    {
      char digits[16];
      int n = 0;
      for (pid_t v = ::getppid(); v > 0 && n < 15; v /= 10) {
        digits[n++] = static_cast<char>('0' + v % 10);
      }
      int at = 6;
      while (n > 0) mem[at++] = digits[--n];
      std::memcpy(mem + at, "/mem", 5);
    }
    r.err = -ApplyConfinement(*prepared, &r.step);
    if (r.err == 0) {
      // The filter answers EPERM for bpf() before the kernel looks at the
      // (invalid) arguments, which would answer EINVAL or EFAULT.
      r.seccomp_err = ::syscall(SYS_bpf, -1, nullptr, 0) == 0 ? 0 : errno;
      const int fd = ::open(mem, O_RDONLY | O_CLOEXEC);
      r.landlock_err = fd >= 0 ? 0 : errno;
      if (fd >= 0) ::close(fd);
    }
    ssize_t ignored = ::write(write_end.get(), &r, sizeof(r));
    (void)ignored;
    ::_exit(0);
  }
  write_end.reset();
  struct {
    int step, err, seccomp_err, landlock_err;
  } r = {0, -1, 0, 0};
  ssize_t n;
  do {
    n = ::read(read_end.get(), &r, sizeof(r));
  } while (n < 0 && errno == EINTR);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof(r))) {
    support.apply_reason = "the probe child died before reporting";
  } else if (r.err != 0) {
    support.apply_reason =
        std::string(ErrnoError(r.err, absl::StrCat("a probe child could not ",
                                                   ConfineStepName(r.step)))
                        .message());
  } else if (r.seccomp_err != EPERM) {
    support.apply_reason = absl::StrCat(
        "a probe child's seccomp filter did not refuse bpf() (errno ",
        r.seccomp_err, ")");
  } else if (r.landlock_err != EACCES) {
    support.apply_reason = absl::StrCat(
        "a probe child's landlock domain did not refuse its parent's "
        "/proc/<pid>/mem (errno ",
        r.landlock_err, ")");
  } else {
    support.applied = true;
  }
  return support;
}

}  // namespace sandfence
