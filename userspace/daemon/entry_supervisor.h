// The socket calls of processes that entered a rollout, answered by the
// daemon (`sandfence enter --rollout`).
//
// `run` holds the listener of its command's socket-family filter
// (confine/socket_supervisor.h) itself. A process that enters a daemon's
// rollout execs in place: nothing of sandfence stays beside it. So enter
// hands its listener to the daemon, over a root-only SOCK_SEQPACKET socket
// beside the daemon's (SupervisionSocketPath):
//   1. before anything changes, enter connects and sends the rollout id;
//      the daemon answers "ok" (or why not: a caller that is not root, or
//      is inside a sandbox, is refused) and enter waits for it;
//   2. it joins the sandbox, confines itself, installs the filter, and
//      sends the listener (SCM_RIGHTS);
//   3. the daemon checks that the sender is in the rollout's cgroup now,
//      takes the listener and answers "ok" (or an exit code and why not),
//      and only then does enter exec the command.
// From then on the daemon answers every call the filter hands over by the
// phase in force at that moment: socket families no hook judges refused
// and recorded; Unix paths brokered (confine/unix_broker.h), with no
// program on the host's system calls.
//
// When the daemon stops (or the rollout ends), the listeners close and
// every call the filter hands over fails with ENOSYS: closed, never open.
// A successor daemon cannot take them back: a process entered before a
// restart creates no socket until it is entered again.
#ifndef SANDFENCE_DAEMON_ENTRY_SUPERVISOR_H_
#define SANDFENCE_DAEMON_ENTRY_SUPERVISOR_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "confine/socket_supervisor.h"

namespace sandfence {

// Where the daemon serving `daemon_socket` takes entering processes'
// listeners.
std::string SupervisionSocketPath(absl::string_view daemon_socket);

class EntrySupervisor {
 public:
  struct Hooks {
    // May process `pid` hand over its listener for the rollout? The
    // rollout's cgroup path, or why not (the status's code becomes the
    // caller's exit code). pid 0: asked again when the listener comes (the
    // caller is inside the rollout's cgroup by then).
    std::function<absl::StatusOr<std::string>(const std::string& rollout_id,
                                              pid_t pid)>
        admit;
    // The rollout's processes are supervised from now on.
    std::function<void(const std::string& rollout_id)> admitted;
    // Answers one waiting call of the rollout's processes, which entered
    // from the mount namespace `home_mount_ns` (its inode).
    std::function<absl::Status(const std::string& rollout_id,
                               uint64_t home_mount_ns,
                               confine::SocketSupervisor& supervisor)>
        answer;
  };

  // Listens on `path` (mode 0600, replacing a stale socket) and serves on
  // a thread of its own.
  static absl::StatusOr<std::unique_ptr<EntrySupervisor>> Listen(
      const std::string& path, Hooks hooks);
  // Stops the thread; the listeners close (their calls fail with ENOSYS).
  ~EntrySupervisor();

  // The rollout ended: its listeners close.
  void Forget(const std::string& rollout_id);
  // Listeners held, for the rollout ("" = all).
  size_t ListenerCount(const std::string& rollout_id = "") const;

 private:
  struct Pending;
  struct Supervised {
    std::string rollout_id;
    uint64_t home_mount_ns = 0;
    confine::SocketSupervisor supervisor;
  };

  EntrySupervisor(std::string path, UniqueFd listen_fd, UniqueFd wake,
                  Hooks hooks);
  void Loop();
  void Accept();
  // One message of a pending connection; false: it is done (closed).
  bool ReadPending(Pending& pending);
  void Wake();

  const std::string path_;
  UniqueFd listen_fd_;
  UniqueFd wake_;  // an eventfd: Forget and the destructor
  const Hooks hooks_;
  std::atomic<bool> stop_{false};
  // Only the loop touches the pending connections (at most
  // kMaxPending, each for at most kPendingSeconds).
  std::vector<std::unique_ptr<Pending>> pending_;
  int64_t accept_paused_until_ns_ = 0;  // out of descriptors: a pause
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<Supervised>> supervised_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_ENTRY_SUPERVISOR_H_
