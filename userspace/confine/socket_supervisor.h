// Socket families nobody else judges, refused by phase and recorded.
//
// The cgroup hooks see AF_INET, AF_INET6 and AF_UNIX; nothing in the kernel
// lets a cgroup program see the creation of a vsock, packet, XDP, SMC, ...
// socket, and a seccomp filter alone can refuse one but not say so (ERRNO
// is neither counted nor logged). So the command gets a second seccomp
// filter whose listener sandfence holds (SECCOMP_RET_USER_NOTIF): the few
// calls it hands over (seccomp_filter.h: BuildSocketFamilyFilter) wait
// until the supervisor answers, by the phase the sandbox is in at that
// moment: EPERM and an entry in the record in a restricted phase, the
// call carried on (SECCOMP_USER_NOTIF_FLAG_CONTINUE) in an inherit one.
//
// CONTINUE is safe here because the verdict rests only on what the kernel
// copied before the supervisor looked (the family is a register), never on
// the caller's memory, which another thread could change in between. The
// one call with its arguments in memory, the 32-bit socketcall, is refused
// whole in a restricted phase.
//
// When the listener closes (sandfence died), every call the filter hands
// over fails with ENOSYS: closed, never open.
#ifndef SANDFENCE_CONFINE_SOCKET_SUPERVISOR_H_
#define SANDFENCE_CONFINE_SOCKET_SUPERVISOR_H_

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "confine/unix_broker.h"

namespace sandfence::confine {

// "vsock", "packet", "bluetooth", ...; "family N" for a number without a
// name here.
std::string SocketFamilyName(int family);

// Installs `program` (BuildSocketFamilyFilter(), built in the parent) on
// the calling thread with a listener (SECCOMP_FILTER_FLAG_NEW_LISTENER)
// and returns the listener's fd, or -errno. Async-signal-safe: for the
// child between clone and exec, after no_new_privs.
int InstallSocketFamilyFilter(const std::vector<sock_filter>& program) noexcept;

// Sends fd over the Unix socket `channel` (SCM_RIGHTS); 0 or -errno.
// Async-signal-safe.
int SendFd(int channel, int fd) noexcept;
// Receives one fd sent by SendFd, without waiting.
absl::StatusOr<UniqueFd> ReceiveFd(int channel);

// What the command tried.
struct SocketAttempt {
  enum class Call { kSocket, kSocketpair, kSocketcall, kIoUringSetup, kConnect };
  Call call = Call::kSocket;
  int family = 0;  // socket, socketpair: the family asked for; else 0
  int type = 0;    // socket, socketpair: without SOCK_NONBLOCK/CLOEXEC
  pid_t tid = 0;   // the calling thread, in the supervisor's PID namespace
  bool denied = false;
  // kConnect: a Unix path the supervisor connected on the caller's behalf,
  // or refused as leading outside the sandbox (denied) (UnixBroker): the
  // name given, the socket file and the socket reached, the outcome.
  std::string unix_path = "";
  uint64_t peer_inode = 0;
  std::string unix_reached = "";
  bool unix_listed = false;  // connected: a listed name's socket
  int error = 0;
};
const char* SocketCallName(SocketAttempt::Call call);

class SocketSupervisor {
 public:
  explicit SocketSupervisor(UniqueFd listener) : listener_(std::move(listener)) {}

  // Readable (POLLIN) when a call waits for an answer.
  int fd() const { return listener_.get(); }

  // Takes one waiting call and answers it: refused with EPERM when
  // `restricted`, carried on otherwise. A connect goes to `broker` when
  // there is one (the phase checks Unix sockets), else on to the kernel;
  // io_uring_setup goes on when the phase grants io_uring
  // (guard.allow_io_uring: its operations pass no system-call check, and
  // the policy says so). nullopt when there is nothing to record: the
  // caller went away before it could be read, or the call was left to the
  // kernel.
  absl::StatusOr<std::optional<SocketAttempt>> AnswerOne(
      bool restricted, const UnixBroker* broker = nullptr,
      bool allow_io_uring = false);

 private:
  UniqueFd listener_;
};

}  // namespace sandfence::confine

#endif  // SANDFENCE_CONFINE_SOCKET_SUPERVISOR_H_
