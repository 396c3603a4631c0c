#include "enter/enter.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "confine/confine.h"
#include "confine/seccomp_filter.h"
#include "egress/spawn.h"

namespace sandfence::enter {
namespace {

struct FlagSpec {
  const char* name;
  const char* value;  // nullptr: a bool flag
  const char* help;
  bool rollout_only;
};

constexpr FlagSpec kFlags[] = {
    {"rollout", "ID",
     "join the daemon's rollout ID: its sandbox cgroup and the confinement "
     "its phases allow come from the daemon, which records the entry",
     true},
    {"socket", "PATH", "the daemon's socket (with --rollout)", true},
    {"cgroup", "PATH", "join this cgroup (a sandbox already attached)", false},
    {"allow-io-uring", nullptr, "let CMD set up io_uring (without --rollout)",
     false},
    {"deny-ptrace", nullptr,
     "no ptrace at all, even inside (without --rollout)", false},
    {"user", "UID[:GID]", "run CMD as this user (root only)", false},
    {"no-access", "PATH", "also keep CMD out of this path (repeatable)",
     false},
};

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

absl::Status Usage(absl::string_view message) { return Malformed(message); }

// The value of one flag, checked.
absl::Status Apply(absl::string_view name, absl::string_view value,
                   EnterFlags* flags) {
  auto absolute = [](absl::string_view v) {
    return v.empty() || v[0] != '/' ? Malformed("expected an absolute path")
                                    : absl::OkStatus();
  };
  if (name == "rollout") {
    flags->rollout = std::string(value);
    return value.empty() ? Malformed("empty rollout id") : absl::OkStatus();
  }
  if (name == "socket") {
    flags->socket = std::string(value);
    return value.empty() ? Malformed("empty path") : absl::OkStatus();
  }
  if (name == "cgroup") {
    flags->cgroup = std::string(value);
    return absolute(value);
  }
  if (name == "user") {
    flags->user = std::string(value);
    return value.empty() ? Malformed("expected UID, UID:GID or a user name")
                         : absl::OkStatus();
  }
  if (name == "no-access") {
    if (absl::Status s = absolute(value); !s.ok()) return s;
    flags->no_access.emplace_back(value);
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat("no handler for --", name));
}

int Refuse(const std::string& program, absl::Status status) {
  // What cannot be found (a rollout, a cgroup, the command) never will be
  // by retrying: rejected.
  if (status.code() == absl::StatusCode::kNotFound) {
    status = Rejected(status.message());
  }
  const int code = ExitCodeFor(status);
  const char* how = code == kExitConfig     ? "refused (rejected"
                    : code == kExitTempFail ? "unavailable (retry may help"
                    : code == kExitNoPerm   ? "refused (not permitted"
                    : code == kExitDataErr  ? "refused (malformed"
                                            : "failed (internal";
  absl::FPrintF(stderr, "%s: %s, exit %d): %s\n", program, how, code,
                status.message());
  return code;
}

int UsageError(const EnterHost& host, absl::string_view message) {
  absl::FPrintF(stderr, "%s: usage: %s\n(%s --help lists the flags)\n",
                host.program, message, host.program);
  return kExitUsage;
}

struct Capabilities {
  bool any = true;      // something in the permitted set
  bool setpcap = true;  // CAP_SETPCAP effective: the bounding set can shrink
};
Capabilities OwnCapabilities() {
  Capabilities c;
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return c;
  c.any = data[0].permitted != 0 || data[1].permitted != 0;
  c.setpcap = (data[CAP_SETPCAP / 32].effective >> (CAP_SETPCAP % 32)) & 1;
  return c;
}

}  // namespace

absl::StatusOr<EnterFlags> ParseEnterFlags(
    const std::vector<std::string>& args) {
  EnterFlags flags;
  std::vector<std::string> seen;
  bool dashes = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (dashes) {
      flags.command.push_back(arg);
      continue;
    }
    if (arg == "--") {
      dashes = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      flags.help = true;
      return flags;
    }
    if (!absl::StartsWith(arg, "--")) {
      return Usage(arg.size() > 1 && arg[0] == '-'
                       ? absl::StrCat("unknown flag ", Quote(arg),
                                      " (flags are written --name)")
                       : absl::StrCat("unexpected argument ", Quote(arg),
                                      " (the command goes after \"--\")"));
    }
    absl::string_view body = absl::string_view(arg).substr(2);
    absl::string_view name = body.substr(0, body.find('='));
    const FlagSpec* flag = nullptr;
    for (const FlagSpec& f : kFlags) {
      if (name == f.name) flag = &f;
    }
    if (flag == nullptr) {
      return Usage(absl::StrCat("unknown flag ", Quote(absl::StrCat("--", name))));
    }
    const bool repeatable = name == "no-access";
    for (const std::string& s : seen) {
      if (s == name && !repeatable) {
        return Usage(absl::StrCat("--", name, " is given more than once"));
      }
    }
    seen.emplace_back(name);
    const bool inline_value = name.size() < body.size();
    if (flag->value == nullptr) {
      if (inline_value) {
        return Usage(absl::StrCat("--", name, " takes no value (got ",
                                  Quote(body.substr(name.size() + 1)), ")"));
      }
      (name == "allow-io-uring" ? flags.allow_io_uring : flags.deny_ptrace) =
          true;
      continue;
    }
    std::string value;
    if (inline_value) {
      value = std::string(body.substr(name.size() + 1));
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return Usage(absl::StrCat("--", name, " needs a value (", flag->value,
                                ")"));
    }
    if (absl::Status s = Apply(name, value, &flags); !s.ok()) {
      return Usage(absl::StrCat("--", name, " ", Quote(value), ": ",
                                s.message()));
    }
  }
  if (flags.command.empty()) {
    return Usage("no command: put it after \"--\"");
  }
  if (!flags.rollout.empty() && !flags.cgroup.empty()) {
    return Usage("--rollout and --cgroup exclude each other");
  }
  if (!flags.rollout.empty() && (flags.allow_io_uring || flags.deny_ptrace)) {
    return Usage(
        "--allow-io-uring and --deny-ptrace come from the rollout's policy "
        "with --rollout");
  }
  if (flags.rollout.empty() && !flags.socket.empty()) {
    return Usage("--socket goes with --rollout");
  }
  return flags;
}

std::string EnterFlagsHelp(bool with_rollout) {
  std::string out;
  for (const FlagSpec& f : kFlags) {
    if (f.rollout_only && !with_rollout) continue;
    const std::string left =
        absl::StrCat("--", f.name, f.value ? " " : "", f.value ? f.value : "");
    absl::StrAppendFormat(&out, "  %-18s %s\n", left, f.help);
  }
  return out;
}

absl::StatusOr<std::pair<uid_t, gid_t>> LookupUserInPasswd(
    absl::string_view user, absl::string_view passwd) {
  std::vector<absl::string_view> parts = absl::StrSplit(user, ':');
  if (parts.size() > 2 || parts[0].empty()) {
    return Malformed("expected UID, UID:GID or a user name");
  }
  uint32_t uid = 0;
  const bool numeric = absl::SimpleAtoi(parts[0], &uid);
  std::optional<gid_t> gid;
  if (parts.size() == 2) {
    uint32_t g = 0;
    if (!absl::SimpleAtoi(parts[1], &g)) {
      return Malformed(absl::StrCat("GID ", Quote(parts[1]),
                                    " is not a number"));
    }
    gid = g;
  }
  bool found = false;
  for (absl::string_view line : absl::StrSplit(passwd, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ':');
    uint32_t u = 0, g = 0;
    if (f.size() < 4 || !absl::SimpleAtoi(f[2], &u) ||
        !absl::SimpleAtoi(f[3], &g)) {
      continue;
    }
    if (numeric ? u == uid : f[0] == parts[0]) {
      uid = u;
      if (!gid) gid = g;
      found = true;
      break;
    }
  }
  if (!found && !numeric) {
    return Malformed(absl::StrCat("no user ", Quote(parts[0]),
                                  " in /etc/passwd"));
  }
  return std::make_pair(static_cast<uid_t>(uid),
                        static_cast<gid_t>(gid ? *gid : uid));
}

int Enter(const std::vector<std::string>& args, const EnterHost& host) {
  absl::StatusOr<EnterFlags> parsed = ParseEnterFlags(args);
  if (!parsed.ok()) return UsageError(host, parsed.status().message());
  EnterFlags& flags = *parsed;
  if (flags.help) {
    absl::PrintF("%s%s", host.usage,
                 EnterFlagsHelp(host.ask_daemon != nullptr));
    return kExitOk;
  }
  if (!flags.rollout.empty() && host.ask_daemon == nullptr) {
    return UsageError(host,
                      absl::StrCat(host.program,
                                   " cannot ask the daemon (--rollout): use "
                                   "`sandfence enter --rollout`, or --cgroup, "
                                   "or nothing to stay in this cgroup"));
  }
  if (flags.socket.empty()) flags.socket = host.default_socket;

  // Root for what needs it; a process without capabilities may confine
  // itself in place (or join a cgroup delegated to it): no_new_privs,
  // Landlock and seccomp need no privilege.
  const bool root = ::geteuid() == 0;
  const Capabilities caps = OwnCapabilities();
  if (!root) {
    const char* why = !flags.rollout.empty()
                          ? "--rollout (the daemon answers root only)"
                      : !flags.user.empty() ? "--user"
                      : caps.any ? "a process holding capabilities (they are "
                                   "dropped before exec)"
                                 : nullptr;
    if (why != nullptr) {
      absl::FPrintF(stderr, "%s: needs root for %s (try sudo)\n", host.program,
                    why);
      return kExitNoPerm;
    }
  }
  // Capabilities to drop need CAP_SETPCAP to leave the bounding set: said
  // now, before anything changes, rather than after the point of no return.
  if (caps.any && !caps.setpcap) {
    absl::FPrintF(stderr,
                  "%s: refused (not permitted, exit %d): this process holds "
                  "capabilities but not CAP_SETPCAP, which dropping them "
                  "needs (a container: keep CAP_SETPCAP, the runtimes' "
                  "default, or drop every capability)\n",
                  host.program, kExitNoPerm);
    return kExitNoPerm;
  }
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  if (!flags.user.empty()) {
    absl::StatusOr<std::pair<uid_t, gid_t>> who = host.lookup_user(flags.user);
    if (!who.ok()) {
      return UsageError(host, absl::StrCat("--user ", Quote(flags.user), ": ",
                                           who.status().message()));
    }
    uid = who->first;
    gid = who->second;  // always set: ExecInPlace looks nothing up
  }

  ConfinePlan plan;
  plan.deny_io_uring = !flags.allow_io_uring;
  plan.deny_ptrace = flags.deny_ptrace;
  plan.no_access = host.own_paths;
  for (const std::string& p : flags.no_access) plan.no_access.push_back(p);
  // A command that is not there is refused before the daemon records an
  // entry that would never happen.
  if (absl::StatusOr<std::string> exe = FindExecutable(flags.command[0]);
      !exe.ok()) {
    return Refuse(host.program, exe.status());
  }
  std::string cgroup = flags.cgroup;
  UniqueFd supervision;
  if (!flags.rollout.empty()) {
    // Asked before anything changes: the daemon refuses callers inside a
    // sandbox, and this process is not in one yet.
    absl::StatusOr<RolloutGrant> grant = host.ask_daemon(flags);
    if (!grant.ok()) return Refuse(host.program, grant.status());
    cgroup = grant->cgroup_path;
    plan.deny_io_uring = !grant->allow_io_uring;
    plan.deny_ptrace = grant->deny_ptrace;
    for (const std::string& p : grant->no_access) plan.no_access.push_back(p);
    // Connected now, from outside the sandbox: once inside, neither its
    // hooks nor Landlock let this process reach the daemon's sockets.
    if (host.open_supervision) {
      absl::StatusOr<UniqueFd> channel = host.open_supervision(flags);
      if (!channel.ok()) return Refuse(host.program, channel.status());
      supervision = *std::move(channel);
    }
  }

  if (!root) {
    // A path this user cannot even look up (search permission denied on
    // the way: /sys/fs/bpf is root's, 0700) is out of its reach already,
    // and no_new_privs keeps it so; the plan could not resolve it.
    std::vector<std::string> kept;
    for (const std::string& p : plan.no_access) {
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0 && errno == EACCES) continue;
      kept.push_back(p);
    }
    plan.no_access = std::move(kept);
  }
  absl::StatusOr<PreparedConfinement> confinement = PrepareConfinement(plan);
  if (!confinement.ok()) {
    return Refuse(
        host.program,
        absl::Status(confinement.status().code(),
                     absl::StrCat("the process guard (Landlock + seccomp) "
                                  "cannot be applied here: ",
                                  confinement.status().message())));
  }
  UniqueFd cgroup_fd;
  if (!cgroup.empty()) {
    cgroup_fd.reset(
        ::open(cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cgroup_fd) {
      return Refuse(host.program,
                    ErrnoError(errno, absl::StrCat("open cgroup ", cgroup)));
    }
  }
  SpawnOptions options;
  options.cgroup_fd = cgroup_fd.get();
  options.argv = flags.command;
  options.uid = uid;
  options.gid = gid;
  // Without capabilities there is nothing to drop (and no CAP_SETPCAP to
  // drop it with: a container's root may have none); ApplyConfinement sets
  // no_new_privs either way, and with it an exec gains no capability (not
  // even root's), whatever the bounding set still holds.
  options.drop_privileges = caps.any;
  options.confinement = &*confinement;
  // Socket families no hook judges, and Unix paths by the socket they
  // reach: the daemon answers them (daemon/entry_supervisor.h).
  std::vector<sock_filter> socket_filter;
  if (supervision) {
    socket_filter = confine::BuildSocketFamilyFilter();
    if (socket_filter.empty()) {
      return Refuse(host.program, absl::InternalError(
                                      "the socket-family filter does not "
                                      "assemble"));
    }
    options.socket_filter = &socket_filter;
    options.socket_supervisor_channel = supervision.get();
  }
  // Returns only with an error from before anything changed.
  return Refuse(host.program, ExecInPlace(options));
}

}  // namespace sandfence::enter
