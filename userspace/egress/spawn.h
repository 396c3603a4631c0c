// Starting a command inside a sandbox without a window in which it runs
// unenforced: clone3(CLONE_INTO_CGROUP) puts the child in the sandbox
// cgroup atomically, before it executes a single instruction of its own.
#ifndef SANDFENCE_EGRESS_SPAWN_H_
#define SANDFENCE_EGRESS_SPAWN_H_

#include <linux/filter.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace sandfence {

class PreparedConfinement;

struct SpawnOptions {
  int cgroup_fd = -1;                  // the sandbox; required
  std::vector<std::string> argv;       // argv[0] is looked up in PATH
  std::optional<uid_t> uid;            // drop to this user before exec
  std::optional<gid_t> gid;            // and group (default: uid's group)
  bool new_netns = false;              // a private netns with only lo, up
  // Joins this network namespace instead (made beforehand, so that
  // whatever must exist there before the command runs -- its DNS filter's
  // listeners -- does). Not with new_netns.
  int netns_fd = -1;
  // Drops the capabilities that could take enforcement apart or go around
  // it (kDroppedCapabilities: CAP_BPF, CAP_SYS_ADMIN, CAP_NET_ADMIN,
  // CAP_NET_RAW -- no packet sockets --, ...) from every set, bounding set
  // included, and sets no_new_privs so that no setuid binary or file
  // capability gives them back.
  bool drop_privileges = true;
  bool kill_with_parent = true;        // PR_SET_PDEATHSIG(SIGKILL)
  // A new PID namespace and a new mount namespace with a fresh /proc: the
  // command runs under a small init (pid 1 there) that forwards SIGTERM,
  // SIGINT, SIGHUP and SIGQUIT to it, reaps orphans and exits with its
  // status; init and the command are in a session of their own (kill(0)
  // reaches no process outside); the command sees only the processes of
  // its namespace, so it
  // cannot name (signal, ptrace, open /proc/<pid>/ of) the caller or
  // anything else outside. When init exits or is killed (kill_with_parent:
  // with the caller), the kernel kills everything left in the namespace.
  // Fails (the command does not start) where namespaces cannot be made.
  bool pid_namespace = false;
  // Every descriptor past stderr is closed at exec (a socket the caller
  // left open belongs to the caller's cgroup: no hook would judge it),
  // except these, which the command gets as they are.
  std::vector<int> keep_fds;
  // Landlock + seccomp (confine/confine.h), applied by the command to
  // itself as the last step before exec: with pid_namespace, its init is
  // not confined (it is sandfence's), the command is. Must outlive the
  // call.
  const PreparedConfinement* confinement = nullptr;
  // With pid_namespace: mount points the init detaches (MNT_DETACH) in the
  // sandbox's own mount namespace before the command starts (the special
  // file systems mounted outside /proc and /sys: nothing in the sandbox
  // needs them, and Landlock would otherwise have to fence them off).
  std::vector<std::string> detach_mounts;
  // With pid_namespace: directories covered there by an empty read-only
  // tmpfs (sandfence's own: the daemon's socket, state and records).
  std::vector<std::string> hide_paths;
  // The socket-family filter (confine/seccomp_filter.h:
  // BuildSocketFamilyFilter), installed by the command last, after the
  // guard's; its listener is handed back through socket_listener (then a
  // confine::SocketSupervisor's) before the command execs. Both must
  // outlive the call. With ExecInPlace, the listener goes over
  // socket_supervisor_channel instead (daemon/entry_supervisor.h), and the
  // command runs only once the supervisor has answered "ok".
  const std::vector<sock_filter>* socket_filter = nullptr;
  UniqueFd* socket_listener = nullptr;
  int socket_supervisor_channel = -1;
};

// Returns the child's pid. Errors in the child before exec (unknown
// command, setuid failure) are reported here with their errno.
absl::StatusOr<pid_t> SpawnInCgroup(const SpawnOptions& options);

// The capabilities a sandboxed command never has (drop_privileges).
extern const int kDroppedCapabilities[];
extern const int kDroppedCapabilitiesCount;

// Runs the command in place of this process, as SpawnInCgroup's child
// would: joins options.cgroup_fd (writing cgroup.procs) and netns_fd,
// drops privileges, applies options.confinement, execs. For `sandfence
// enter`, which a container entrypoint or a framework execs through.
// Returns only an error from before anything changed (an unknown command,
// the cgroup refusing); a failure after that is written to stderr and the
// process exits 127. No pid_namespace, new_netns or kill_with_parent.
absl::Status ExecInPlace(const SpawnOptions& options);

// Looks a command up in PATH as execvp would.
absl::StatusOr<std::string> FindExecutable(const std::string& name);

// Waits for pid; returns the shell-style status: the exit code, or 128+N
// when killed by signal N.
absl::StatusOr<int> WaitForExit(pid_t pid);

}  // namespace sandfence

#endif  // SANDFENCE_EGRESS_SPAWN_H_
