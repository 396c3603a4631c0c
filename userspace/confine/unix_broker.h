// Unix paths reached through sandfence, judged by the socket they reach.
//
// A cgroup connect_unix hook sees only the name a process gives; a path is
// a name an agent can swap (a symbolic or hard link to an outside socket, a
// relative name from another directory). Without BPF LSM, which sees the
// socket reached, the only other kernel view of the outcome was a program
// on every system call's exit on the host. Instead, the socket-family
// filter hands a sandboxed process's connect(2) to the supervisor, which:
//   1. reads the address; anything but an AF_UNIX path goes on to the
//      kernel's hooks (CONTINUE: they judge what the kernel copies);
//   2. resolves the path as the process would (its root, its working
//      directory, its mount namespace) and pins the inode it names;
//   3. finds the socket bound to that inode (sock_diag, in the process's
//      network namespace) and whether a process of the sandbox holds it;
//   4. if so, connects the process's own socket (pidfd_getfd) to the pinned
//      inode ("/proc/self/fd/N": no second lookup of the name), with the
//      process's credentials (so SO_PEERCRED names its user), and answers
//      the call with the connect's outcome; the hook lets exactly that
//      connect through (sf_unix_brokered: this socket, this thread);
//   5. if a socket outside the sandbox holds it (or none it can find, in
//      the caller's network namespace or sandfence's): when the phase
//      lists the name given and the name leads to that same socket in
//      sandfence's own view (the host's: a policy lists the host's
//      sockets), hands it back to the kernel if the caller is in the
//      mount namespace it started in (it can mount nothing there), or
//      connects as in 4 if it made one of its own; otherwise refuses the
//      call itself (EPERM), and the record names the socket the name led
//      to, not only the name. So a listed name over which the agent
//      mounted another socket reaches nothing;
//   6. otherwise hands the call back to the kernel, whose hooks judge the
//      name (listed, or denied: with SF_SB_UNIX_BROKER a path the sandbox
//      bound is never taken for its own by its name).
// Nothing on the host outside the sandbox pays for it. See README "Unix".
#ifndef SANDFENCE_CONFINE_UNIX_BROKER_H_
#define SANDFENCE_CONFINE_UNIX_BROKER_H_

#include <linux/seccomp.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace sandfence::confine {

struct UnixBrokerHooks {
  // The sandbox's cgroup directory: who holds a socket is found among the
  // processes in it and below.
  std::string cgroup_dir;
  // Lets the connect of the socket `cookie` by the thread `pid_tgid`
  // through the hook; forget: it did not reach the hook.
  std::function<absl::Status(uint64_t cookie, uint64_t pid_tgid)> allow;
  std::function<void(uint64_t cookie)> forget;
  // Whether the phase lists this path (the name as given, compared as the
  // hooks compare it); null: it lists none.
  std::function<bool(const std::string& path)> listed;
  // The mount namespace (its inode) the sandbox's processes started in,
  // where they can mount nothing: a listed name found there to lead to the
  // socket at that path in sandfence's view goes back to the kernel (the
  // caller connects as itself). 0: unknown.
  uint64_t home_mount_ns = 0;
};

struct UnixBrokerOutcome {
  // false: handed back to the kernel (its hooks judge and record it).
  bool answered = false;
  // answered: 0 (connected) or the errno the caller got.
  int error = 0;
  // answered: refused, the name leading to a socket outside the sandbox.
  bool outside = false;
  // answered: connected, a listed name's socket (outside the sandbox).
  bool listed = false;
  std::string path;         // the name the caller gave
  uint64_t peer_inode = 0;  // the socket file it reached
  // The socket behind it, as its server bound it: "/path (inode N)".
  std::string reached;
  int sock_type = 0;
};

class UnixBroker {
 public:
  explicit UnixBroker(UnixBrokerHooks hooks) : hooks_(std::move(hooks)) {}

  // Decides one connect(2) (req) taken from `listener`, answering it when
  // it connects on the caller's behalf. Never answers with an allow the
  // hooks would not see: every call not answered here must be CONTINUEd by
  // the caller.
  UnixBrokerOutcome Decide(int listener, const seccomp_notif& req) const;

 private:
  UnixBrokerHooks hooks_;
};

// Test seams, exposed for unit tests.
// The AF_UNIX socket bound to the file (dev, ino), in the calling thread's
// network namespace: its sockfs inode (0 when none) and the name it bound.
struct BoundUnixSocket {
  uint64_t inode = 0;
  std::string name;
};
BoundUnixSocket UnixSocketBoundTo(dev_t dev, ino_t ino);
// Whether a process in cgroup_dir (or below) holds socket:[sock_inode].
bool HeldInCgroup(const std::string& cgroup_dir, uint64_t sock_inode);

}  // namespace sandfence::confine

#endif  // SANDFENCE_CONFINE_UNIX_BROKER_H_
