// net_probe: makes exactly one network attempt and reports how it went, for
// the egress tests to run inside sandboxes.
//
//   net_probe [--fork] [--join-cgroup DIR] [--repeat N] [--pause-fds R W]
//             OP ADDR PORT
//
// OP: tcp-connect, udp-connect, udp-sendto, udp6-hopopts, udp-sendmmsg,
//     tcp-fastopen,
//     udp-connected-send (connect, send one datagram, write a byte to W,
//     read one from R, send again: the second send's errno; 100 + errno
//     when the setup failed), tcp-connected-send (the same over TCP; a
//     pending socket error first: ECONNABORTED when it was cut),
//     tcp-serve (listen, write the port to W, accept one, write a byte,
//     read one from R: the accepted socket's error, or a send's),
//     uring-connect, raw-socket, packet-socket, mptcp-socket,
//     udp-query, udp-connected-query, tcp-query (a DNS client's view: the
//     answer, and the peer, must be the address it asked; 96 when
//     getpeername shows another, 97 when the answer's source does),
//     udp6only-connect (connect on an IPV6_V6ONLY socket),
//     tcp-upload (connect, then send 8 MiB, each send waiting at most 2 s:
//     0 when all of it went, the errno of the send that stopped, EAGAIN for
//     a stall; 100 + errno when the connect failed),
//     udp-flood (200 datagrams of 1000 bytes by sendto: 0, or the errno of
//     the first that failed)
// Exit status: 0 on success, else the errno of the failing call (EPERM = 1).
// --fork runs the attempt in a grandchild; --join-cgroup moves the process
// into a (nested) cgroup first; --repeat N --want E makes N attempts and
// exits 0 only if every one of them ended with errno E (0 = success), else
// 99 after printing the first mismatch.
//
// A forbidden TCP connect that a fail-open hook lets through either
// connects (0) or, when the backstop drops its SYN, times out after 2 s
// (EINPROGRESS): never a 2-minute wait. A single attempt that hangs anyway
// is killed by SIGALRM after 30 s.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#ifndef AF_PACKET
#define AF_PACKET 17
#endif

namespace {

struct Target {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_INET;
};

bool ParseTarget(const char* host, const char* port, Target* t) {
  int p = std::atoi(port);
  auto* a4 = reinterpret_cast<sockaddr_in*>(&t->addr);
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&t->addr);
  if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(p);
    t->len = sizeof(*a4);
    t->family = AF_INET;
    return true;
  }
  if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(p);
    t->len = sizeof(*a6);
    t->family = AF_INET6;
    return true;
  }
  return false;
}

int Errno() { return errno ? errno : 255; }

// A hook that fails open lets the SYN out; if the backstop then drops it, a
// blocking connect would retry for ~2 minutes. On loopback a handshake
// completes within the connect call, so 2 s is plenty, and the test fails
// at once with EINPROGRESS instead of EPERM.
constexpr int kConnectTimeoutSeconds = 2;

void ShortConnectTimeout(int s) {
  timeval tv{.tv_sec = kConnectTimeoutSeconds, .tv_usec = 0};
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int TcpConnect(const Target& t) {
  int s = socket(t.family, SOCK_STREAM, 0);
  if (s < 0) return Errno();
  ShortConnectTimeout(s);
  int rc = connect(s, reinterpret_cast<const sockaddr*>(&t.addr), t.len);
  int err = rc == 0 ? 0 : Errno();
  close(s);
  return err;
}

// A datagram carrying an IPv6 hop-by-hop options header (one PadN option):
// allowed traffic with extension headers must pass the skb backstop. Setting
// the header needs CAP_NET_RAW.
int Udp6Hopopts(const Target& t) {
  if (t.family != AF_INET6) return EINVAL;
  int s = socket(AF_INET6, SOCK_DGRAM, 0);
  if (s < 0) return Errno();
  // next header (the kernel fills it), length 0 (8 bytes), PadN of 4.
  const unsigned char opts[8] = {0, 0, 1, 4, 0, 0, 0, 0};
  if (setsockopt(s, IPPROTO_IPV6, IPV6_HOPOPTS, opts, sizeof(opts)) != 0) {
    int err = Errno();
    close(s);
    return 100 + err;  // not the verdict: the test's setup failed
  }
  int rc =
      sendto(s, "x", 1, 0, reinterpret_cast<const sockaddr*>(&t.addr), t.len);
  int err = rc >= 0 ? 0 : Errno();
  close(s);
  return err;
}

int UdpConnect(const Target& t) {
  int s = socket(t.family, SOCK_DGRAM, 0);
  if (s < 0) return Errno();
  int rc = connect(s, reinterpret_cast<const sockaddr*>(&t.addr), t.len);
  int err = rc == 0 ? 0 : Errno();
  close(s);
  return err;
}

int UdpSendto(const Target& t) {
  int s = socket(t.family, SOCK_DGRAM, 0);
  if (s < 0) return Errno();
  const char msg[] = "sandfence";
  ssize_t n = sendto(s, msg, sizeof(msg), 0,
                     reinterpret_cast<const sockaddr*>(&t.addr), t.len);
  int err = n >= 0 ? 0 : Errno();
  close(s);
  return err;
}

// The egress budget's tests: an upload the budget must stop (the sender
// stalls: its packets are dropped, so its socket buffer fills).
int TcpUpload(const Target& t) {
  int s = socket(t.family, SOCK_STREAM, 0);
  if (s < 0) return 100 + Errno();
  if (connect(s, reinterpret_cast<const sockaddr*>(&t.addr), t.len) != 0) {
    int err = Errno();
    close(s);
    return 100 + err;
  }
  timeval tv{2, 0};
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  static char chunk[64 * 1024];
  memset(chunk, 'u', sizeof(chunk));
  int err = 0;
  for (size_t sent = 0; sent < (8u << 20);) {
    ssize_t n = send(s, chunk, sizeof(chunk), MSG_NOSIGNAL);
    if (n < 0) {
      err = Errno();
      break;
    }
    sent += static_cast<size_t>(n);
  }
  close(s);
  return err;
}

int UdpFlood(const Target& t) {
  int s = socket(t.family, SOCK_DGRAM, 0);
  if (s < 0) return Errno();
  char msg[1000];
  memset(msg, 'd', sizeof(msg));
  int err = 0;
  for (int i = 0; i < 200 && err == 0; i++) {
    if (sendto(s, msg, sizeof(msg), 0,
               reinterpret_cast<const sockaddr*>(&t.addr), t.len) < 0) {
      err = Errno();
    }
  }
  close(s);
  return err;
}

int UdpSendmmsg(const Target& t) {
  int s = socket(t.family, SOCK_DGRAM, 0);
  if (s < 0) return Errno();
  char payload[] = "sandfence";
  iovec iov{payload, sizeof(payload)};
  mmsghdr msgs[2]{};
  for (auto& m : msgs) {
    m.msg_hdr.msg_name = const_cast<sockaddr_storage*>(&t.addr);
    m.msg_hdr.msg_namelen = t.len;
    m.msg_hdr.msg_iov = &iov;
    m.msg_hdr.msg_iovlen = 1;
  }
  int n = sendmmsg(s, msgs, 2, 0);
  int err = n == 2 ? 0 : (n < 0 ? Errno() : EIO);
  close(s);
  return err;
}

int TcpFastOpen(const Target& t) {
  int s = socket(t.family, SOCK_STREAM, 0);
  if (s < 0) return Errno();
  ShortConnectTimeout(s);
  const char msg[] = "sandfence";
  ssize_t n = sendto(s, msg, sizeof(msg), MSG_FASTOPEN,
                     reinterpret_cast<const sockaddr*>(&t.addr), t.len);
  int err = n >= 0 ? 0 : Errno();
  close(s);
  return err;
}

// IORING_OP_CONNECT through raw syscalls: the connect happens in the
// kernel's io_uring context, which blinds syscall-based monitors.
int UringConnect(const Target& t) {
  int s = socket(t.family, SOCK_STREAM, 0);
  if (s < 0) return Errno();
  io_uring_params p{};
  int ring = static_cast<int>(syscall(__NR_io_uring_setup, 4, &p));
  if (ring < 0) return Errno();
  size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
  size_t ring_len = sq_len > cq_len ? sq_len : cq_len;
  auto* sq = static_cast<char*>(mmap(nullptr, ring_len, PROT_READ | PROT_WRITE,
                                     MAP_SHARED, ring, IORING_OFF_SQ_RING));
  auto* sqes = static_cast<io_uring_sqe*>(
      mmap(nullptr, p.sq_entries * sizeof(io_uring_sqe), PROT_READ | PROT_WRITE,
           MAP_SHARED, ring, IORING_OFF_SQES));
  if (sq == MAP_FAILED || sqes == MAP_FAILED) return Errno();
  // A single mmap serves both rings (IORING_FEAT_SINGLE_MMAP, 5.4+).
  char* cq = sq;
  unsigned* tail = reinterpret_cast<unsigned*>(sq + p.sq_off.tail);
  unsigned* mask = reinterpret_cast<unsigned*>(sq + p.sq_off.ring_mask);
  unsigned* array = reinterpret_cast<unsigned*>(sq + p.sq_off.array);
  // The connect, linked to a timeout (SO_SNDTIMEO does not bound an
  // io_uring connect): a SYN that a fail-open hook let out and the backstop
  // dropped ends the connect with ECANCELED after 2 s, not minutes later.
  __kernel_timespec timeout{.tv_sec = kConnectTimeoutSeconds, .tv_nsec = 0};
  unsigned first = *tail;
  for (unsigned n = 0; n < 2; ++n) {
    unsigned idx = (first + n) & *mask;
    io_uring_sqe* sqe = &sqes[idx];
    std::memset(sqe, 0, sizeof(*sqe));
    if (n == 0) {
      sqe->opcode = IORING_OP_CONNECT;
      sqe->flags = IOSQE_IO_LINK;
      sqe->fd = s;
      sqe->addr = reinterpret_cast<unsigned long>(&t.addr);
      sqe->off = t.len;
      sqe->user_data = 1;
    } else {
      sqe->opcode = IORING_OP_LINK_TIMEOUT;
      sqe->fd = -1;
      sqe->addr = reinterpret_cast<unsigned long>(&timeout);
      sqe->len = 1;
      sqe->user_data = 2;
    }
    array[idx] = idx;
  }
  __atomic_store_n(tail, first + 2, __ATOMIC_RELEASE);
  if (syscall(__NR_io_uring_enter, ring, 2, 2, IORING_ENTER_GETEVENTS, nullptr,
              0) < 0) {
    return Errno();
  }
  unsigned* cq_head = reinterpret_cast<unsigned*>(cq + p.cq_off.head);
  unsigned* cq_tail = reinterpret_cast<unsigned*>(cq + p.cq_off.tail);
  unsigned* cq_mask = reinterpret_cast<unsigned*>(cq + p.cq_off.ring_mask);
  auto* cqes = reinterpret_cast<io_uring_cqe*>(cq + p.cq_off.cqes);
  int res = -EIO;
  unsigned end = __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE);
  for (unsigned h = *cq_head; h != end; ++h) {
    const io_uring_cqe& cqe = cqes[h & *cq_mask];
    if (cqe.user_data == 1) res = cqe.res;
  }
  close(ring);
  close(s);
  if (res == -ECANCELED) return ETIMEDOUT;
  return res == 0 ? 0 : -res;
}

// Reaches only the backstop once the phase changes under it: a connected
// UDP socket's datagrams carry no address, so sendmsg4/6 do not judge them.
int UdpConnectedSend(const Target& t, int resume_fd, int ready_fd) {
  if (resume_fd < 0 || ready_fd < 0) return 254;
  int s = socket(t.family, SOCK_DGRAM, 0);
  if (s < 0) return 100 + Errno();
  if (connect(s, reinterpret_cast<const sockaddr*>(&t.addr), t.len) != 0 ||
      send(s, "first", 5, 0) < 0) {
    int err = Errno();
    close(s);
    return 100 + err;
  }
  char b = 'r';
  if (write(ready_fd, &b, 1) != 1 || read(resume_fd, &b, 1) != 1) {
    close(s);
    return 253;
  }
  int err = send(s, "second", 6, 0) < 0 ? Errno() : 0;
  close(s);
  return err;
}

// tcp-connected-send: connect, send, write a byte to W, read one from R;
// then the socket's pending error if it has one (ECONNABORTED: destroyed
// meanwhile), else the second send's errno (0: the connection lives).
int TcpConnectedSend(const Target& t, int resume_fd, int ready_fd) {
  if (resume_fd < 0 || ready_fd < 0) return 254;
  int s = socket(t.family, SOCK_STREAM, 0);
  if (s < 0) return 100 + Errno();
  if (connect(s, reinterpret_cast<const sockaddr*>(&t.addr), t.len) != 0 ||
      send(s, "first", 5, MSG_NOSIGNAL) < 0) {
    int err = Errno();
    close(s);
    return 100 + err;
  }
  char b = 'r';
  if (write(ready_fd, &b, 1) != 1 || read(resume_fd, &b, 1) != 1) {
    close(s);
    return 253;
  }
  int pending = 0;
  socklen_t len = sizeof(pending);
  if (getsockopt(s, SOL_SOCKET, SO_ERROR, &pending, &len) == 0 &&
      pending != 0) {
    close(s);
    return pending;
  }
  int err = send(s, "second", 6, MSG_NOSIGNAL) < 0 ? Errno() : 0;
  close(s);
  return err;
}

// tcp-serve: listen on ADDR (PORT 0: the kernel's choice), write the port
// (2 bytes, host order) to W, accept one connection, write a byte to W,
// read one from R; then the accepted socket's pending error if it has one,
// else a send's errno (0: the connection lives).
int TcpServe(const Target& t, int resume_fd, int ready_fd) {
  if (resume_fd < 0 || ready_fd < 0) return 254;
  int l = socket(t.family, SOCK_STREAM, 0);
  if (l < 0) return 100 + Errno();
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (bind(l, reinterpret_cast<const sockaddr*>(&t.addr), t.len) != 0 ||
      listen(l, 1) != 0 ||
      getsockname(l, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    int err = Errno();
    close(l);
    return 100 + err;
  }
  uint16_t port = ntohs(t.family == AF_INET
                            ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                            : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  if (write(ready_fd, &port, sizeof(port)) != sizeof(port)) {
    close(l);
    return 253;
  }
  int s = accept(l, nullptr, nullptr);
  close(l);
  if (s < 0) return 100 + Errno();
  char b = 'a';
  if (write(ready_fd, &b, 1) != 1 || read(resume_fd, &b, 1) != 1) {
    close(s);
    return 253;
  }
  int pending = 0;
  len = sizeof(pending);
  if (getsockopt(s, SOL_SOCKET, SO_ERROR, &pending, &len) == 0 &&
      pending != 0) {
    close(s);
    return pending;
  }
  int err = send(s, "served", 6, MSG_NOSIGNAL) < 0 ? Errno() : 0;
  close(s);
  return err;
}

// Whether a peer or source address is the target, as a DNS client checks.
bool SameAddress(const Target& t, const sockaddr_storage& got) {
  if (got.ss_family != t.family) return false;
  if (t.family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&t.addr);
    auto* b = reinterpret_cast<const sockaddr_in*>(&got);
    return a->sin_port == b->sin_port &&
           a->sin_addr.s_addr == b->sin_addr.s_addr;
  }
  auto* a = reinterpret_cast<const sockaddr_in6*>(&t.addr);
  auto* b = reinterpret_cast<const sockaddr_in6*>(&got);
  return a->sin6_port == b->sin6_port &&
         std::memcmp(&a->sin6_addr, &b->sin6_addr, 16) == 0;
}

void PrintAddress(const char* what, const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a.ss_family == AF_INET) {
    auto* a4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &a4->sin_addr, text, sizeof(text));
    port = ntohs(a4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    auto* a6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &a6->sin6_addr, text, sizeof(text));
    port = ntohs(a6->sin6_port);
  }
  std::fprintf(stderr, "net_probe: %s is %s port %d\n", what, text, port);
}

// getpeername must show the target (96 otherwise).
int CheckPeer(int s, const Target& t) {
  sockaddr_storage peer{};
  socklen_t len = sizeof(peer);
  if (getpeername(s, reinterpret_cast<sockaddr*>(&peer), &len) != 0) {
    return Errno();
  }
  if (!SameAddress(t, peer)) {
    PrintAddress("the peer", peer);
    return 96;
  }
  return 0;
}

// A DNS client over UDP: one query, one answer within 5 s, which must come
// from the address asked (97 otherwise). connected: connect + send, as
// glibc's resolver does; else sendto.
int UdpQuery(const Target& t, bool connected) {
  int s = socket(t.family, SOCK_DGRAM, 0);
  if (s < 0) return Errno();
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const char q[] = "query";
  int err = 0;
  if (connected) {
    if (connect(s, reinterpret_cast<const sockaddr*>(&t.addr), t.len) != 0) {
      err = Errno();
    } else if ((err = CheckPeer(s, t)) == 0 && send(s, q, sizeof(q), 0) < 0) {
      err = Errno();
    }
  } else if (sendto(s, q, sizeof(q), 0,
                    reinterpret_cast<const sockaddr*>(&t.addr), t.len) < 0) {
    err = Errno();
  }
  if (err == 0) {
    char buf[64];
    sockaddr_storage from{};
    socklen_t len = sizeof(from);
    if (recvfrom(s, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from),
                 &len) < 0) {
      err = Errno();
    } else if (!SameAddress(t, from)) {
      PrintAddress("the answer's source", from);
      err = 97;
    }
  }
  close(s);
  return err;
}

// A DNS client over TCP: connect (5 s at most), check the peer, one query,
// one answer.
int TcpQuery(const Target& t) {
  int s = socket(t.family, SOCK_STREAM, 0);
  if (s < 0) return Errno();
  ShortConnectTimeout(s);
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  int err = 0;
  char buf[64];
  if (connect(s, reinterpret_cast<const sockaddr*>(&t.addr), t.len) != 0) {
    err = Errno();
  } else if ((err = CheckPeer(s, t)) == 0) {
    if (send(s, "query", 5, 0) < 0) {
      err = Errno();
    } else {
      ssize_t n = recv(s, buf, sizeof(buf), 0);
      err = n > 0 ? 0 : (n == 0 ? EPIPE : Errno());
    }
  }
  close(s);
  return err;
}

int Udp6OnlyConnect(const Target& t) {
  if (t.family != AF_INET6) return EINVAL;
  int s = socket(AF_INET6, SOCK_DGRAM, 0);
  if (s < 0) return Errno();
  int one = 1;
  setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  int rc = connect(s, reinterpret_cast<const sockaddr*>(&t.addr), t.len);
  int err = rc == 0 ? 0 : Errno();
  if (err == 0 && send(s, "query", 5, 0) < 0) err = Errno();
  close(s);
  return err;
}

int RawSocket(const Target& t) {
  int proto = t.family == AF_INET ? static_cast<int>(IPPROTO_ICMP)
                                  : static_cast<int>(IPPROTO_ICMPV6);
  int s = socket(t.family, SOCK_RAW, proto);
  if (s < 0) return Errno();
  close(s);
  return 0;
}

// IPPROTO_MPTCP (262) does not fit the 8 bits a rule's protocol has: it
// must not pass as TCP (6).
int MptcpSocket(const Target& t) {
  int s = socket(t.family, SOCK_STREAM, 262);
  if (s < 0) return Errno();
  close(s);
  return 0;
}

int PacketSocket(const Target&) {
  int s = socket(AF_PACKET, SOCK_RAW, htons(0x0003 /* ETH_P_ALL */));
  if (s < 0) return Errno();
  close(s);
  return 0;
}

int g_resume_fd = -1, g_ready_fd = -1;

int RunOp(const std::string& op, const Target& t) {
  errno = 0;
  if (op == "tcp-connect") return TcpConnect(t);
  if (op == "udp-connect") return UdpConnect(t);
  if (op == "udp-sendto") return UdpSendto(t);
  if (op == "udp6-hopopts") return Udp6Hopopts(t);
  if (op == "udp-sendmmsg") return UdpSendmmsg(t);
  if (op == "tcp-fastopen") return TcpFastOpen(t);
  if (op == "uring-connect") return UringConnect(t);
  if (op == "raw-socket") return RawSocket(t);
  if (op == "packet-socket") return PacketSocket(t);
  if (op == "mptcp-socket") return MptcpSocket(t);
  if (op == "udp-query") return UdpQuery(t, false);
  if (op == "udp-connected-query") return UdpQuery(t, true);
  if (op == "tcp-query") return TcpQuery(t);
  if (op == "udp6only-connect") return Udp6OnlyConnect(t);
  if (op == "tcp-upload") return TcpUpload(t);
  if (op == "udp-flood") return UdpFlood(t);
  if (op == "tcp-serve") return TcpServe(t, g_resume_fd, g_ready_fd);
  if (op == "tcp-connected-send") {
    return TcpConnectedSend(t, g_resume_fd, g_ready_fd);
  }
  if (op == "udp-connected-send") {
    return UdpConnectedSend(t, g_resume_fd, g_ready_fd);
  }
  std::fprintf(stderr, "net_probe: unknown op %s\n", op.c_str());
  return 254;
}

bool JoinCgroup(const char* dir) {
  std::string procs = std::string(dir) + "/cgroup.procs";
  int fd = open(procs.c_str(), O_WRONLY);
  if (fd < 0) return false;
  std::string pid = std::to_string(getpid());
  bool ok =
      write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
  close(fd);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  bool fork_first = false;
  const char* join = nullptr;
  long repeat = 0;
  int want = 0;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    std::string flag = argv[i];
    if (flag == "--fork") {
      fork_first = true;
    } else if (flag == "--join-cgroup" && i + 1 < argc) {
      join = argv[++i];
    } else if (flag == "--repeat" && i + 1 < argc) {
      repeat = std::atol(argv[++i]);
    } else if (flag == "--want" && i + 1 < argc) {
      want = std::atoi(argv[++i]);
    } else if (flag == "--pause-fds" && i + 2 < argc) {
      g_resume_fd = std::atoi(argv[++i]);
      g_ready_fd = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "net_probe: bad flag %s\n", argv[i]);
      return 254;
    }
  }
  if (argc - i != 3) {
    std::fprintf(stderr, "usage: net_probe [flags] OP ADDR PORT\n");
    return 254;
  }
  Target t;
  if (!ParseTarget(argv[i + 1], argv[i + 2], &t)) {
    std::fprintf(stderr, "net_probe: bad address %s\n", argv[i + 1]);
    return 254;
  }
  if (join && !JoinCgroup(join)) {
    std::perror("net_probe: join cgroup");
    return 253;
  }
  if (fork_first) {
    pid_t pid = fork();
    if (pid < 0) return 252;
    if (pid > 0) {
      int status = 0;
      waitpid(pid, &status, 0);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 251;
    }
  }
  if (repeat > 0) {
    for (long n = 0; n < repeat; ++n) {
      int got = RunOp(argv[i], t);
      if (got != want) {
        std::fprintf(stderr,
                     "net_probe: attempt %ld of %ld: errno %d, want %d\n",
                     n + 1, repeat, got, want);
        return 99;
      }
    }
    return 0;
  }
  // One attempt never takes this long; a hang is a failure of its own.
  alarm(30);
  int err = RunOp(argv[i], t);
  if (err != 0)
    std::fprintf(stderr, "net_probe: %s: %s\n", argv[i], strerror(err));
  return err;
}
