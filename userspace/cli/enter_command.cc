#include "cli/enter_command.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/daemon_client.h"
#include "cli/policy_flags.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "confine/confine.h"
#include "daemon/daemon_server.h"
#include "egress/spawn.h"
#include "host/host_state.h"

namespace sandfence {
namespace {

constexpr char kUsage[] =
    "usage: sandfence enter [--rollout ID [--socket PATH] | --cgroup PATH]\n"
    "           [--allow-io-uring] [--deny-ptrace] [--user UID[:GID]]\n"
    "           [--no-access PATH]... -- CMD [ARG]...\n"
    "\n"
    "Runs CMD in place of this process, inside a sandbox, with the process\n"
    "guard the kernel enforces: Landlock (no ptrace, /proc/<pid> reads or\n"
    "signals across the sandbox's boundary, no abstract Unix sockets\n"
    "outside, no writes to /sys or /proc, sandfence's own files out of\n"
    "reach) and seccomp (no user namespaces, mounts, bpf, perf, kernel\n"
    "modules, 32-bit entry; io_uring unless allowed), with no_new_privs and\n"
    "the capabilities that take enforcement apart dropped. It holds for CMD\n"
    "and everything CMD starts, for their whole lives.\n"
    "\n"
    "  --rollout ID     join the daemon's rollout ID: its sandbox cgroup and\n"
    "                   the confinement its phases allow come from the\n"
    "                   daemon, which records the entry\n"
    "  --cgroup PATH    join this cgroup (a sandbox already attached)\n"
    "  (neither)        stay in this cgroup: a container's entrypoint,\n"
    "                   whose cgroup is the sandbox already\n"
    "\n"
    "Each enter starts a Landlock domain of its own: processes of two\n"
    "enters cannot signal or trace each other even in one sandbox. Needs\n"
    "root (it writes cgroup.procs and drops capabilities); exit status is\n"
    "CMD's.\n"
    "\n";

struct EnterFlags {
  std::string rollout;
  std::string socket = kDefaultSocketPath;
  std::string cgroup;
  bool allow_io_uring = false;
  bool deny_ptrace = false;
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  std::vector<std::string> no_access;
};

absl::Status ParseUser(absl::string_view text, EnterFlags* flags) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() > 2 || parts[0].empty()) {
    return Malformed("expected UID, UID:GID or a user name");
  }
  uint32_t uid = 0;
  if (!absl::SimpleAtoi(parts[0], &uid)) {
    struct passwd* pw = ::getpwnam(parts[0].c_str());
    if (!pw) return Malformed(absl::StrCat("no user \"", parts[0], "\""));
    uid = pw->pw_uid;
  }
  flags->uid = uid;
  if (parts.size() == 2) {
    uint32_t gid = 0;
    if (!absl::SimpleAtoi(parts[1], &gid)) {
      return Malformed(absl::StrCat("GID \"", parts[1], "\" is not a number"));
    }
    flags->gid = gid;
  }
  return absl::OkStatus();
}

int Refuse(const absl::Status& status) {
  const int code = ExitCodeFor(status);
  absl::FPrintF(stderr, "sandfence enter: %s (%s, exit %d): %s\n",
                code == kExitConfig     ? "refused"
                : code == kExitTempFail ? "unavailable, retry may help"
                                        : "failed",
                RefusalName(RefusalOf(status)), code, status.message());
  return code;
}

}  // namespace

int EnterCommand(int argc, char** argv) {
  EnterFlags flags;
  FlagParser parser;
  parser.AddValueFlag("rollout", "ID", "the daemon's rollout to enter",
                      [&](absl::string_view v) {
                        flags.rollout = std::string(v);
                        return v.empty() ? Malformed("empty rollout id")
                                         : absl::OkStatus();
                      });
  parser.AddValueFlag("socket", "PATH", "the daemon's socket (with --rollout)",
                      [&](absl::string_view v) {
                        flags.socket = std::string(v);
                        return v.empty() ? Malformed("empty path")
                                         : absl::OkStatus();
                      });
  parser.AddValueFlag("cgroup", "PATH", "the sandbox cgroup to join",
                      [&](absl::string_view v) {
                        flags.cgroup = std::string(v);
                        return v.empty() || v[0] != '/'
                                   ? Malformed("expected an absolute path")
                                   : absl::OkStatus();
                      });
  parser.AddBoolFlag("allow-io-uring",
                     "let CMD set up io_uring (without --rollout)",
                     &flags.allow_io_uring);
  parser.AddBoolFlag("deny-ptrace",
                     "no ptrace at all, even inside (without --rollout)",
                     &flags.deny_ptrace);
  parser.AddValueFlag("user", "UID[:GID]", "run CMD as this user",
                      [&](absl::string_view v) { return ParseUser(v, &flags); });
  parser.AddValueFlag(
      "no-access", "PATH", "also keep CMD out of this path (repeatable)",
      [&](absl::string_view v) {
        if (v.empty() || v[0] != '/') {
          return Malformed("expected an absolute path");
        }
        flags.no_access.emplace_back(v);
        return absl::OkStatus();
      },
      /*repeatable=*/true);

  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<FlagParser::Result> parsed = parser.Parse(args);
  if (parsed.ok() && parsed->help) {
    absl::PrintF("%s%s", kUsage, parser.Help());
    return kExitOk;
  }
  absl::Status usage = parsed.status();
  if (usage.ok() && parsed->after_dashes.empty()) {
    usage = Malformed("no command: put it after \"--\"");
  }
  if (usage.ok() && !parsed->positionals.empty()) {
    usage = Malformed(absl::StrCat("unexpected argument \"",
                                   parsed->positionals[0], "\""));
  }
  if (usage.ok() && !flags.rollout.empty() && !flags.cgroup.empty()) {
    usage = Malformed("--rollout and --cgroup exclude each other");
  }
  if (usage.ok() && !flags.rollout.empty() &&
      (flags.allow_io_uring || flags.deny_ptrace)) {
    usage = Malformed(
        "--allow-io-uring and --deny-ptrace come from the rollout's policy "
        "with --rollout");
  }
  if (!usage.ok()) {
    absl::FPrintF(stderr,
                  "sandfence enter: usage: %s\n"
                  "(sandfence enter --help lists the flags)\n",
                  usage.message());
    return kExitUsage;
  }
  if (::geteuid() != 0) {
    absl::FPrintF(stderr,
                  "sandfence enter: needs root: it joins a cgroup and drops "
                  "capabilities (try sudo)\n");
    return kExitNoPerm;
  }

  ConfinePlan plan;
  plan.deny_io_uring = !flags.allow_io_uring;
  plan.deny_ptrace = flags.deny_ptrace;
  plan.no_access = SandfenceOwnPaths(kDefaultPinRoot, flags.no_access);
  std::string cgroup = flags.cgroup;
  if (!flags.rollout.empty()) {
    // Asked before anything changes: the daemon refuses callers inside a
    // sandbox, and this process is not in one yet.
    std::unique_ptr<v1::Sandfence::Stub> stub = ConnectDaemon(flags.socket);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    v1::EnterRolloutRequest request;
    request.set_rollout_id(flags.rollout);
    request.set_pid(static_cast<uint32_t>(::getpid()));
    v1::EnterRolloutResponse response;
    grpc::Status s = stub->EnterRollout(&context, request, &response);
    if (!s.ok()) {
      return Refuse(DaemonCallStatus(s, flags.socket,
                                     "; nothing was entered or started"));
    }
    cgroup = response.cgroup_path();
    plan.deny_io_uring = !response.allow_io_uring();
    plan.deny_ptrace = response.deny_ptrace();
    for (const std::string& p : response.no_access()) {
      plan.no_access.push_back(p);
    }
  }

  absl::StatusOr<PreparedConfinement> confinement = PrepareConfinement(plan);
  if (!confinement.ok()) {
    return Refuse(absl::Status(
        confinement.status().code(),
        absl::StrCat("the process guard (Landlock + seccomp) cannot be "
                     "applied here: ",
                     confinement.status().message())));
  }
  UniqueFd cgroup_fd;
  if (!cgroup.empty()) {
    cgroup_fd.reset(::open(cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cgroup_fd) {
      return Refuse(ErrnoError(errno, absl::StrCat("open cgroup ", cgroup)));
    }
  }
  SpawnOptions options;
  options.cgroup_fd = cgroup_fd.get();
  options.argv = parsed->after_dashes;
  options.uid = flags.uid;
  options.gid = flags.gid;
  options.confinement = &*confinement;
  // Returns only with an error from before anything changed.
  return Refuse(ExecInPlace(options));
}

}  // namespace sandfence
