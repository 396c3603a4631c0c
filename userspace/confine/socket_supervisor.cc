#include "confine/socket_supervisor.h"

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "confine/seccomp_filter.h"

namespace sandfence::confine {

std::string SocketFamilyName(int family) {
  switch (family) {
    case AF_UNIX: return "unix";
    case AF_INET: return "inet";
    case AF_AX25: return "ax25";
    case AF_IPX: return "ipx";
    case AF_APPLETALK: return "appletalk";
    case AF_NETROM: return "netrom";
    case AF_BRIDGE: return "bridge";
    case AF_ATMPVC: return "atmpvc";
    case AF_X25: return "x25";
    case AF_INET6: return "inet6";
    case AF_ROSE: return "rose";
    case AF_DECnet: return "decnet";
    case AF_NETBEUI: return "netbeui";
    case AF_SECURITY: return "security";
    case AF_KEY: return "key";
    case AF_NETLINK: return "netlink";
    case AF_PACKET: return "packet";
    case AF_ASH: return "ash";
    case AF_ECONET: return "econet";
    case AF_ATMSVC: return "atmsvc";
    case AF_RDS: return "rds";
    case AF_SNA: return "sna";
    case AF_IRDA: return "irda";
    case AF_PPPOX: return "pppox";
    case AF_WANPIPE: return "wanpipe";
    case AF_LLC: return "llc";
    case AF_IB: return "ib";
    case AF_MPLS: return "mpls";
    case AF_CAN: return "can";
    case AF_TIPC: return "tipc";
    case AF_BLUETOOTH: return "bluetooth";
    case AF_IUCV: return "iucv";
    case AF_RXRPC: return "rxrpc";
    case AF_ISDN: return "isdn";
    case AF_PHONET: return "phonet";
    case AF_IEEE802154: return "ieee802154";
    case AF_CAIF: return "caif";
    case AF_ALG: return "alg";
    case AF_NFC: return "nfc";
    case AF_VSOCK: return "vsock";
    case AF_KCM: return "kcm";
    case AF_QIPCRTR: return "qipcrtr";
    case AF_SMC: return "smc";
    case 44: return "xdp";   // AF_XDP: newer than some libc headers
    case 45: return "mctp";  // AF_MCTP
  }
  return absl::StrCat("family ", family);
}

const char* SocketCallName(SocketAttempt::Call call) {
  switch (call) {
    case SocketAttempt::Call::kSocket: return "socket";
    case SocketAttempt::Call::kSocketpair: return "socketpair";
    case SocketAttempt::Call::kSocketcall: return "socketcall";
    case SocketAttempt::Call::kIoUringSetup: return "io_uring_setup";
    case SocketAttempt::Call::kConnect: return "connect";
  }
  return "unknown";
}

int InstallSocketFamilyFilter(const std::vector<sock_filter>& program) noexcept {
  struct sock_fprog prog = {
      .len = static_cast<unsigned short>(program.size()),
      .filter = const_cast<sock_filter*>(program.data()),
  };
  // Once the supervisor has taken a call, only a fatal signal ends the
  // wait (5.19+): a connect it makes on the caller's behalf is never
  // restarted behind its back by a handler's signal.
  long fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                      SECCOMP_FILTER_FLAG_NEW_LISTENER |
                          SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
                      &prog);
  if (fd < 0 && errno == EINVAL) {
    fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                   SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  }
  return fd < 0 ? -errno : static_cast<int>(fd);
}

int SendFd(int channel, int fd) noexcept {
  char byte = 0;
  struct iovec iov = {&byte, 1};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t n;
  do {
    n = ::sendmsg(channel, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == 1 ? 0 : -errno;
}

absl::StatusOr<UniqueFd> ReceiveFd(int channel) {
  char byte = 0;
  struct iovec iov = {&byte, 1};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(channel, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoError(errno, "receive the seccomp listener");
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (n != 1 || c == nullptr || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(sizeof(int))) {
    return absl::InternalError(
        "the command sent no seccomp listener before exec");
  }
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return UniqueFd(fd);
}

absl::StatusOr<std::optional<SocketAttempt>> SocketSupervisor::AnswerOne(
    bool restricted, const UnixBroker* broker, bool allow_io_uring) {
  struct seccomp_notif req;
  std::memset(&req, 0, sizeof(req));  // NOTIF_RECV wants it zeroed
  if (::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
    // ENOENT: the caller died (or was interrupted) after it was queued.
    if (errno == ENOENT || errno == EINTR) return std::nullopt;
    return ErrnoError(errno, "SECCOMP_IOCTL_NOTIF_RECV");
  }
  SocketAttempt a;
  a.tid = static_cast<pid_t>(req.pid);
  const int nr = req.data.nr & ~0x40000000;  // x32's bit
  const bool i386 = req.data.arch == AUDIT_ARCH_I386;
  const uint32_t arg0 = static_cast<uint32_t>(req.data.args[0]);
  const uint32_t arg1 = static_cast<uint32_t>(req.data.args[1]);
  const bool granted_uring = allow_io_uring && nr == __NR_io_uring_setup;
  if ((i386 ? nr == kI386Connect : nr == __NR_connect) || granted_uring) {
    if (broker != nullptr && !granted_uring) {
      UnixBrokerOutcome o = broker->Decide(listener_.get(), req);
      if (o.answered) {
        a.call = SocketAttempt::Call::kConnect;
        a.family = AF_UNIX;
        a.type = o.sock_type;
        a.unix_path = std::move(o.path);
        a.peer_inode = o.peer_inode;
        a.unix_reached = std::move(o.reached);
        a.denied = o.outside;
        a.unix_listed = o.listed;
        a.error = o.error;
        return a;
      }
    }
    // The kernel's hooks judge it (and record it).
    struct seccomp_notif_resp resp;
    std::memset(&resp, 0, sizeof(resp));
    resp.id = req.id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    if (::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 &&
        errno != ENOENT) {
      return ErrnoError(errno, "SECCOMP_IOCTL_NOTIF_SEND");
    }
    return std::nullopt;
  }
  if (nr == __NR_io_uring_setup) {
    a.call = SocketAttempt::Call::kIoUringSetup;
  } else if (i386 && nr == kI386Socketcall) {
    a.call = SocketAttempt::Call::kSocketcall;
  } else {
    a.call = (i386 ? nr == kI386Socketpair : nr == __NR_socketpair)
                 ? SocketAttempt::Call::kSocketpair
                 : SocketAttempt::Call::kSocket;
    a.family = static_cast<int>(arg0);
    a.type = static_cast<int>(arg1 & ~(SOCK_NONBLOCK | SOCK_CLOEXEC));
  }
  // The filter hands over only what a restricted phase refuses; a judged
  // family here would be a filter bug, carried on so the hooks judge it.
  a.denied = restricted && !(a.family != 0 && IsJudgedSocketFamily(a.family));

  struct seccomp_notif_resp resp;
  std::memset(&resp, 0, sizeof(resp));
  resp.id = req.id;
  if (a.denied) {
    resp.error = -EPERM;
  } else {
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  }
  if (::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 &&
      errno != ENOENT) {
    return ErrnoError(errno, "SECCOMP_IOCTL_NOTIF_SEND");
  }
  // Decided and answered; the caller records it even if it went away.
  return a;
}

}  // namespace sandfence::confine
