// `enter`: how a process sandfence does not start itself gets the process
// guard the kernel enforces. A container entrypoint or a rollout framework
// execs through it: it joins the sandbox's cgroup (or stays in its own, a
// container's, which is the sandbox already), confines itself with
// Landlock + seccomp (no_new_privs, the capabilities that take enforcement
// apart dropped) and execs the command in its place.
//
// Two binaries share this code:
//   - `sandfence enter` (the full, dynamically linked binary) adds
//     --rollout: it asks the daemon for the rollout's cgroup and what its
//     phases allow, and the daemon records the entry;
//   - `sandfence-enter`, statically linked (no gRPC, no libbpf, no NSS),
//     runs in any container image as its entrypoint, bind-mounted in:
//     --cgroup or in place.
//
// What it guarantees, and what it does not:
//   - one Landlock domain per enter: the command and everything it starts
//     share it; two enters (two containers, two agents of one rollout) are
//     two domains, which cannot signal or trace each other either;
//   - the command keeps the caller's PID namespace (a container's own, or
//     the host's for a framework on the host): it can still see and name
//     every process there, and Landlock, not invisibility, keeps it from
//     signalling, tracing or reading them (/proc/<pid>/cmdline, status and
//     stat of any process stay readable: not ptrace-gated);
//   - the confinement is fixed for the process's life: a phase switch
//     changes the egress policy (kernel maps) at once, but never the
//     confinement of a process already entered, which is the strictest of
//     the phases from the one it entered in to the last (a later phase
//     that allows io_uring does not give it back);
//   - everything before exec happens once: a process the command starts
//     is confined as its parent, with no way to leave the domain.
#ifndef SANDFENCE_ENTER_ENTER_H_
#define SANDFENCE_ENTER_ENTER_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/unique_fd.h"

namespace sandfence::enter {

struct EnterFlags {
  std::string rollout;
  std::string socket;  // with --rollout; default EnterHost::default_socket
  std::string cgroup;
  bool allow_io_uring = false;
  bool deny_ptrace = false;
  std::string user;  // --user as given ("" = stay)
  std::vector<std::string> no_access;
  std::vector<std::string> command;  // after "--"
  bool help = false;
};

// What the daemon answers for --rollout (EnterRolloutResponse).
struct RolloutGrant {
  std::string cgroup_path;
  std::string phase;
  bool allow_io_uring = false;
  bool deny_ptrace = false;
  std::vector<std::string> no_access;
};

// What differs between the two binaries.
struct EnterHost {
  std::string program;  // "sandfence enter", "sandfence-enter": messages
  std::string usage;    // printed before the flags by --help
  std::string default_socket;
  // Asks the daemon for --rollout; null: this binary cannot (a usage
  // error names the binary that can).
  std::function<absl::StatusOr<RolloutGrant>(const EnterFlags&)> ask_daemon;
  // "UID", "UID:GID" or a user name -> uid and gid (the user's own group
  // when none is given). Malformed: a usage error.
  std::function<absl::StatusOr<std::pair<uid_t, gid_t>>(absl::string_view)>
      lookup_user;
  // sandfence's own paths on this host: kept out of the command's reach
  // (missing ones are skipped).
  std::vector<std::string> own_paths;
  // With --rollout: a channel to the daemon's supervision socket, the
  // rollout id already sent (daemon/entry_supervisor.h). The command's
  // socket-family filter's listener goes over it before exec, and the
  // command runs only once the daemon has taken it. Null: no supervision.
  std::function<absl::StatusOr<UniqueFd>(const EnterFlags&)> open_supervision;
};

// `args` excludes the program (and "enter"). A usage error is Malformed and
// names the flag.
absl::StatusOr<EnterFlags> ParseEnterFlags(
    const std::vector<std::string>& args);
// One line per flag, for --help.
std::string EnterFlagsHelp(bool with_rollout);

// Runs the command in place of this process. Returns only on a refusal,
// with the exit status to exit with: 64 usage, 75 unavailable (retry may
// help), 77 not permitted, 78 rejected (never works as asked), 70 an
// internal failure; said on stderr first. A failure after the point of no
// return (the cgroup joined) is said on stderr and exits 127 itself.
int Enter(const std::vector<std::string>& args, const EnterHost& host);

// `user` against an /etc/passwd-format text: by name or UID, the user's
// group when no GID is given (a UID it does not list gets GID = UID). No
// NSS: what the static binary uses, where loading an image's NSS modules
// into a process about to confine itself is not an option.
absl::StatusOr<std::pair<uid_t, gid_t>> LookupUserInPasswd(
    absl::string_view user, absl::string_view passwd);

}  // namespace sandfence::enter

#endif  // SANDFENCE_ENTER_ENTER_H_
