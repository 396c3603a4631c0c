#include "cli/enter_command.h"

#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/daemon_client.h"
#include "common/status.h"
#include "daemon/daemon_server.h"
#include "daemon/entry_supervisor.h"
#include "enter/enter.h"
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
    "and everything CMD starts, for their whole lives: a phase switch\n"
    "changes what CMD may reach on the network, never its confinement.\n"
    "\n"
    "  --rollout ID     join the daemon's rollout ID: its sandbox cgroup and\n"
    "                   the confinement its phases allow come from the\n"
    "                   daemon, which records the entry\n"
    "  --cgroup PATH    join this cgroup (a sandbox already attached)\n"
    "  (neither)        stay in this cgroup: a container's entrypoint,\n"
    "                   whose cgroup is the sandbox already\n"
    "\n"
    "Each enter starts a Landlock domain of its own: processes of two\n"
    "enters cannot signal or trace each other even in one sandbox. CMD keeps\n"
    "this process's PID namespace (it sees the processes there; Landlock\n"
    "keeps it from signalling, tracing or reading them). Needs root for\n"
    "--rollout, --user and a process holding capabilities; anything else\n"
    "may confine itself in place. sandfence-enter is the same, statically\n"
    "linked, for container images (no --rollout). Exit status is CMD's.\n"
    "\n";

// NSS (the host's users: LDAP and the like too), in the full binary.
absl::StatusOr<std::pair<uid_t, gid_t>> LookupUser(absl::string_view text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() > 2 || parts[0].empty()) {
    return Malformed("expected UID, UID:GID or a user name");
  }
  uint32_t uid = 0;
  std::optional<gid_t> gid;
  if (parts.size() == 2) {
    uint32_t g = 0;
    if (!absl::SimpleAtoi(parts[1], &g)) {
      return Malformed(absl::StrCat("GID \"", parts[1], "\" is not a number"));
    }
    gid = g;
  }
  if (absl::SimpleAtoi(parts[0], &uid)) {
    if (!gid) {
      struct passwd* pw = ::getpwuid(uid);
      gid = pw ? pw->pw_gid : uid;
    }
  } else {
    struct passwd* pw = ::getpwnam(parts[0].c_str());
    if (!pw) return Malformed(absl::StrCat("no user \"", parts[0], "\""));
    uid = pw->pw_uid;
    if (!gid) gid = pw->pw_gid;
  }
  return std::make_pair(static_cast<uid_t>(uid), *gid);
}

absl::StatusOr<enter::RolloutGrant> AskDaemon(const enter::EnterFlags& flags) {
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
    // The kernel refused the connect itself (a sandbox whose Unix sockets
    // are checked cannot reach sandfence's socket; a file mode): no retry
    // will help.
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
        (absl::StrContains(s.error_message(), "Operation not permitted") ||
         absl::StrContains(s.error_message(), "Permission denied"))) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the daemon's socket ", flags.socket, " refuses this process (",
          s.error_message(),
          "); from inside a sandbox it is out of reach; nothing was entered "
          "or started"));
    }
    return DaemonCallStatus(s, flags.socket,
                            "nothing was entered or started");
  }
  enter::RolloutGrant grant;
  grant.cgroup_path = response.cgroup_path();
  grant.phase = response.phase();
  grant.allow_io_uring = response.allow_io_uring();
  grant.deny_ptrace = response.deny_ptrace();
  grant.no_access.assign(response.no_access().begin(),
                         response.no_access().end());
  return grant;
}

// The channel the command's socket calls go to the daemon by
// (daemon/entry_supervisor.h): connected, the rollout id sent.
absl::StatusOr<UniqueFd> OpenSupervision(const enter::EnterFlags& flags) {
  const std::string path = SupervisionSocketPath(flags.socket);
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError(errno, "socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return Malformed(absl::StrCat("socket path ", path, " is too long"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr),
                sizeof(addr)) != 0) {
    const int err = errno;
    return absl::Status(
        absl::ErrnoToStatusCode(err) == absl::StatusCode::kPermissionDenied
            ? absl::StatusCode::kPermissionDenied
            : absl::StatusCode::kUnavailable,
        absl::StrCat("connect to the daemon's supervision socket ", path, ": ",
                     std::strerror(err),
                     "; nothing was entered or started"));
  }
  if (::send(fd.get(), flags.rollout.data(), flags.rollout.size(),
             MSG_NOSIGNAL) != static_cast<ssize_t>(flags.rollout.size())) {
    return ErrnoError(errno, absl::StrCat("send to ", path));
  }
  // The daemon looks at this process where it is now, before it moves.
  const timeval wait = {30, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  char reply[512];
  const ssize_t n = ::recv(fd.get(), reply, sizeof(reply), 0);
  if (n < 0) return ErrnoError(errno, absl::StrCat("no answer from ", path));
  const absl::string_view said(reply, static_cast<size_t>(n));
  if (said == "ok") return fd;
  // "<exit code> <why>"
  const size_t space = said.find(' ');
  int code = 0;
  if (!absl::SimpleAtoi(said.substr(0, space), &code)) code = 0;
  const std::string why = absl::StrCat(
      space == absl::string_view::npos ? said : said.substr(space + 1),
      "; nothing was entered or started");
  switch (code) {
    case kExitNoPerm:
      return absl::PermissionDeniedError(why);
    case kExitConfig:
      return Rejected(why);
    case kExitDataErr:
      return Malformed(why);
    case kExitTempFail:
      return absl::UnavailableError(why);
    default:
      return absl::InternalError(why);
  }
}

}  // namespace

int EnterCommand(int argc, char** argv) {
  enter::EnterHost host;
  host.program = "sandfence enter";
  host.usage = kUsage;
  host.default_socket = kDefaultSocketPath;
  host.ask_daemon = AskDaemon;
  host.open_supervision = OpenSupervision;
  host.lookup_user = LookupUser;
  host.own_paths = SandfenceOwnPaths(kDefaultPinRoot);
  return enter::Enter(std::vector<std::string>(argv + 1, argv + argc), host);
}

}  // namespace sandfence
