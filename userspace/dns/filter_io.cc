// FilterServer's sockets: UDP and TCP listeners (bound here or adopted),
// reading queries (recvmmsg batches with the destination address from
// IP_PKTINFO), TCP connections with 2-byte framing, and sending replies
// from the address each query was sent to.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "dns/filter_server.h"
#include "dns/filter_server_internal.h"
#include "dns/sockaddr.h"

namespace sandfence::dns {
namespace {

// A client that does not read its TCP answers loses the connection here.
constexpr size_t kMaxTcpOutput = 1 << 20;

}  // namespace

absl::StatusOr<ListenerId> FilterServer::ListenUdp(const HostPort& addr) {
  const int family = addr.addr.is_v4() ? AF_INET : AF_INET6;
  UniqueFd fd(::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError(errno, "socket for the DNS filter");
  const int one = 1;
  if (family == AF_INET6) {
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  }
  sockaddr_storage ss;
  const socklen_t len = ToSockaddr(addr, &ss);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    return ErrnoError(
        errno, absl::StrCat("bind the DNS filter to udp ", addr.ToString()));
  }
  return AdoptUdp(std::move(fd));
}

absl::StatusOr<ListenerId> FilterServer::ListenTcp(const HostPort& addr) {
  const int family = addr.addr.is_v4() ? AF_INET : AF_INET6;
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError(errno, "socket for the DNS filter");
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (family == AF_INET6) {
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  }
  sockaddr_storage ss;
  const socklen_t len = ToSockaddr(addr, &ss);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    return ErrnoError(
        errno, absl::StrCat("bind the DNS filter to tcp ", addr.ToString()));
  }
  if (::listen(fd.get(), 256) != 0) return ErrnoError(errno, "listen");
  return AdoptTcp(std::move(fd));
}

absl::StatusOr<ListenerId> FilterServer::AdoptUdp(UniqueFd fd) {
  const int one = 1;
  // Both options: a v6 socket may see v4-mapped traffic too.
  const bool v4 =
      ::setsockopt(fd.get(), IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) == 0;
  const bool v6 = ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_RECVPKTINFO, &one,
                               sizeof(one)) == 0;
  if (!v4 && !v6) {
    return ErrnoError(errno, "IP_PKTINFO on the DNS filter's UDP socket");
  }
  // A deep queue absorbs bursts; the kernel caps it at rmem_max.
  const int rcvbuf = 4 << 20;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  return AddListener(std::move(fd), Transport::kUdp);
}

absl::StatusOr<ListenerId> FilterServer::AdoptTcp(UniqueFd fd) {
  return AddListener(std::move(fd), Transport::kTcp);
}

void FilterServer::CloseListener(ListenerId id) {
  auto it = listeners_.find(id);
  if (it == listeners_.end()) return;
  loop_->Remove(it->second->fd.get());
  listeners_.erase(it);
  // Its TCP connections go too: their sandbox is gone.
  std::vector<uint64_t> doomed;
  for (const auto& [cid, conn] : conns_) {
    if (conn->origin.listener == id) doomed.push_back(cid);
  }
  for (uint64_t cid : doomed) CloseConn(cid);
}

absl::StatusOr<ListenerId> FilterServer::AddListener(UniqueFd fd,
                                                     Transport transport) {
  if (absl::Status s = SetNonBlocking(fd.get()); !s.ok()) return s;
  absl::StatusOr<HostPort> bound = SockName(fd.get());
  if (!bound.ok()) return bound.status();
  const ListenerId id = next_listener_++;
  auto l = std::make_unique<Listener>();
  l->fd = std::move(fd);
  l->transport = transport;
  l->bound = *bound;
  const int raw = l->fd.get();
  listeners_[id] = std::move(l);
  absl::Status s = loop_->Add(raw, EPOLLIN, [this, id, transport](uint32_t) {
    if (transport == Transport::kUdp) {
      OnUdpReadable(id);
    } else {
      OnAccept(id);
    }
  });
  if (!s.ok()) {
    listeners_.erase(id);
    return s;
  }
  return id;
}

absl::StatusOr<HostPort> FilterServer::local_address(ListenerId id) const {
  auto it = listeners_.find(id);
  if (it == listeners_.end()) {
    return absl::NotFoundError(absl::StrCat("no listener ", id));
  }
  return it->second->bound;
}

void FilterServer::OnUdpReadable(ListenerId id) {
  auto it = listeners_.find(id);
  if (it == listeners_.end()) return;
  const int fd = it->second->fd.get();
  const HostPort bound = it->second->bound;
  // One recvmmsg reads a batch: system calls are most of a query's cost.
  constexpr int kBatch = 16;
  constexpr size_t kDatagram = 4096;  // larger queries are truncated: FORMERR
  static thread_local std::vector<char> buffers(kBatch * kDatagram);
  static thread_local std::vector<sockaddr_storage> from(kBatch);
  struct Control {
    alignas(cmsghdr) char data[128];
  };
  static thread_local std::vector<Control> control(kBatch);
  int budget = options_.udp_batch;
  while (budget > 0) {
    mmsghdr msgs[kBatch];
    iovec iov[kBatch];
    const int want = std::min(kBatch, budget);
    for (int i = 0; i < want; ++i) {
      iov[i] = {&buffers[i * kDatagram], kDatagram};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = control[i].data;
      msgs[i].msg_hdr.msg_controllen = sizeof(control[i].data);
    }
    const int n = ::recvmmsg(fd, msgs, want, MSG_DONTWAIT, nullptr);
    if (n <= 0) return;  // EAGAIN; errors of ICMP origin are not ours
    budget -= n;
    const absl::Time now = absl::Now();
    for (int i = 0; i < n; ++i) {
      auto reply = std::make_shared<Reply>();
      reply->start = now;
      reply->transport = Transport::kUdp;
      reply->udp_fd = fd;
      reply->client = from[i];
      reply->client_len = msgs[i].msg_hdr.msg_namelen;
      reply->local = bound;
      msghdr& msg = msgs[i].msg_hdr;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
           c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
          in_pktinfo pi;
          std::memcpy(&pi, CMSG_DATA(c), sizeof(pi));
          reply->local.addr = IpAddress::FromBytes(
              AF_INET, reinterpret_cast<const uint8_t*>(&pi.ipi_addr));
        } else if (c->cmsg_level == IPPROTO_IPV6 &&
                   c->cmsg_type == IPV6_PKTINFO) {
          in6_pktinfo pi;
          std::memcpy(&pi, CMSG_DATA(c), sizeof(pi));
          reply->local.addr = IpAddress::FromBytes(
              AF_INET6, reinterpret_cast<const uint8_t*>(&pi.ipi6_addr));
        }
      }
      QueryOrigin origin;
      origin.listener = id;
      origin.transport = Transport::kUdp;
      origin.local = reply->local;
      origin.client = FromSockaddr(reply->client);
      size_t len = msgs[i].msg_len;
      // Longer than any query needs: its header alone, so that it gets
      // FORMERR (a prefix of it must never be served).
      if (msg.msg_flags & MSG_TRUNC) len = std::min<size_t>(len, kHeaderSize);
      HandleQuery(origin, absl::string_view(&buffers[i * kDatagram], len),
                  std::move(reply));
    }
    if (n < want) return;  // drained
  }
}

void FilterServer::OnAccept(ListenerId id) {
  auto it = listeners_.find(id);
  if (it == listeners_.end()) return;
  for (;;) {
    sockaddr_storage ss = {};
    socklen_t len = sizeof(ss);
    UniqueFd fd(::accept4(it->second->fd.get(),
                          reinterpret_cast<sockaddr*>(&ss), &len,
                          SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) return;
    if (conns_.size() >= options_.max_tcp_connections) continue;  // closed
    absl::StatusOr<HostPort> local = SockName(fd.get());
    if (!local.ok()) continue;
    const uint64_t key = next_conn_++;
    auto conn = std::make_unique<TcpConn>();
    conn->origin.listener = id;
    conn->origin.transport = Transport::kTcp;
    conn->origin.local = *local;
    conn->origin.client = FromSockaddr(ss);
    const int raw = fd.get();
    conn->fd = std::move(fd);
    conns_[key] = std::move(conn);
    if (!loop_
             ->Add(raw, EPOLLIN,
                   [this, key](uint32_t ev) { OnTcpEvent(key, ev); })
             .ok()) {
      conns_.erase(key);
      continue;
    }
    TouchConn(key);
  }
}

void FilterServer::TouchConn(uint64_t key) {
  TcpConn* c = conns_.at(key).get();
  loop_->CancelTimer(c->idle_timer);
  c->idle_timer =
      loop_->AddTimer(loop_->now() + options_.tcp_idle_timeout, [this, key] {
        auto it = conns_.find(key);
        if (it == conns_.end()) return;
        it->second->idle_timer = 0;
        CloseConn(key);
      });
}

void FilterServer::CloseConn(uint64_t key) {
  auto it = conns_.find(key);
  if (it == conns_.end()) return;
  loop_->CancelTimer(it->second->idle_timer);
  loop_->Remove(it->second->fd.get());
  conns_.erase(it);
}

void FilterServer::OnTcpEvent(uint64_t key, uint32_t events) {
  auto it = conns_.find(key);
  if (it == conns_.end()) return;
  TcpConn* c = it->second.get();
  // Both directions gone (or an error): nothing can be answered any more,
  // and a level-triggered HUP would fire on every round.
  if (events & (EPOLLHUP | EPOLLERR)) {
    CloseConn(key);
    return;
  }
  if (events & EPOLLOUT) {
    const ssize_t n =
        ::send(c->fd.get(), c->out.data(), c->out.size(), MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN) {
      CloseConn(key);
      return;
    }
    if (n > 0) c->out.erase(0, static_cast<size_t>(n));
    if (c->eof && c->in_flight == 0 && c->out.empty()) {
      CloseConn(key);
      return;
    }
  }
  if (c->reading && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
    char buf[16384];
    const ssize_t n = ::recv(c->fd.get(), buf, sizeof(buf), 0);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      CloseConn(key);
      return;
    }
    if (n == 0) {
      // A client may send its queries and shut its side down (RFC 7766):
      // the frames it sent are still answered.
      c->eof = true;
    }
    if (n > 0) {
      c->in.append(buf, static_cast<size_t>(n));
      TouchConn(key);
    }
  }
  // Serve the complete frames, up to the connection's in-flight limit.
  while (c->in.size() >= 2 &&
         c->in_flight < options_.max_tcp_queries_per_connection) {
    const size_t len =
        (static_cast<uint8_t>(c->in[0]) << 8) | static_cast<uint8_t>(c->in[1]);
    if (c->in.size() < 2 + len) break;
    std::string frame = c->in.substr(2, len);
    c->in.erase(0, 2 + len);
    auto reply = std::make_shared<Reply>();
    reply->start = absl::Now();
    reply->transport = Transport::kTcp;
    reply->conn = key;
    reply->local = c->origin.local;
    ++c->in_flight;
    const QueryOrigin origin = c->origin;
    HandleQuery(origin, frame, std::move(reply));
    it = conns_.find(key);  // a reply may have closed it
    if (it == conns_.end()) return;
    c = it->second.get();
  }
  if (c->eof && c->in_flight == 0 && c->out.empty()) {
    CloseConn(key);
    return;
  }
  // Stop reading while the limit is reached or a whole frame is buffered.
  const bool want_read =
      !c->eof && c->in_flight < options_.max_tcp_queries_per_connection &&
      c->in.size() < 2 + 65535;
  uint32_t interest = (want_read ? kIn : 0u) | (c->out.empty() ? 0u : kOut);
  c->reading = want_read;
  (void)loop_->Modify(c->fd.get(), interest);
}

void FilterServer::Send(Reply& reply, std::string wire,
                        std::optional<uint16_t> rcode) {
  reply.sent = true;
  QueryOutcome& out = reply.outcome;
  if (rcode) {
    out.rcode = *rcode;
  } else if (auto h = ParseHeader(wire)) {
    out.rcode = static_cast<uint16_t>(h->header_rcode());
  }
  if (reply.transport == Transport::kUdp) {
    iovec iov = {wire.data(), wire.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
    msghdr msg = {};
    msg.msg_name = &reply.client;
    msg.msg_namelen = reply.client_len;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    cmsghdr* c = reinterpret_cast<cmsghdr*>(control);
    // Reply from the address the query was sent to: clients drop answers
    // from any other (and the sandbox may have many filter addresses).
    if (reply.local.addr.is_v4()) {
      in_pktinfo pi = {};
      std::memcpy(&pi.ipi_spec_dst, reply.local.addr.bytes(), 4);
      c->cmsg_level = IPPROTO_IP;
      c->cmsg_type = IP_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof(pi));
      std::memcpy(CMSG_DATA(c), &pi, sizeof(pi));
      msg.msg_controllen = CMSG_SPACE(sizeof(pi));
    } else {
      in6_pktinfo pi = {};
      std::memcpy(&pi.ipi6_addr, reply.local.addr.bytes(), 16);
      c->cmsg_level = IPPROTO_IPV6;
      c->cmsg_type = IPV6_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof(pi));
      std::memcpy(CMSG_DATA(c), &pi, sizeof(pi));
      msg.msg_controllen = CMSG_SPACE(sizeof(pi));
    }
    // The listener may have closed while upstream answered (its sandbox
    // ended); its fd number may be another socket's by now.
    auto l = listeners_.find(out.origin.listener);
    if (l == listeners_.end() || l->second->fd.get() != reply.udp_fd) {
      out.replied = false;
      out.detail = absl::StrCat(out.detail, out.detail.empty() ? "" : "; ",
                                "the listener closed before the reply");
    } else if (::sendmsg(reply.udp_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) <
               0) {
      out.replied = false;
      out.detail = absl::StrCat(out.detail, out.detail.empty() ? "" : "; ",
                                "reply not sent: ", std::strerror(errno));
    }
  } else {
    auto it = conns_.find(reply.conn);
    if (it == conns_.end()) {
      out.replied = false;
      out.detail = absl::StrCat(out.detail, out.detail.empty() ? "" : "; ",
                                "the TCP connection closed before the reply");
    } else {
      TcpConn* c = it->second.get();
      c->out.push_back(static_cast<char>(wire.size() >> 8));
      c->out.push_back(static_cast<char>(wire.size() & 0xff));
      c->out.append(wire);
      const ssize_t n =
          ::send(c->fd.get(), c->out.data(), c->out.size(), MSG_NOSIGNAL);
      if (n > 0) c->out.erase(0, static_cast<size_t>(n));
      if (c->out.size() > kMaxTcpOutput) {
        CloseConn(reply.conn);  // a client that does not read
      } else {
        ReleaseTcpSlot(reply.conn);
      }
    }
  }
  out.latency = absl::Now() - reply.start;
  if (hooks_.outcome) hooks_.outcome(out);
}

void FilterServer::ReleaseTcpSlot(uint64_t key) {
  auto it = conns_.find(key);
  if (it == conns_.end()) return;
  TcpConn* c = it->second.get();
  if (c->in_flight > 0) --c->in_flight;
  if (c->eof && c->in_flight == 0 && c->out.empty()) {
    CloseConn(key);
    return;
  }
  // Resume reading (the limit may have stopped it) and flush the rest.
  c->reading =
      !c->eof && c->in_flight < options_.max_tcp_queries_per_connection;
  (void)loop_->Modify(c->fd.get(),
                      (c->reading ? kIn : 0u) | (c->out.empty() ? 0u : kOut));
  if (c->in_flight < options_.max_tcp_queries_per_connection &&
      c->in.size() >= 2) {
    // Frames queued behind the limit: serve them on this round's timers.
    loop_->AddTimer(loop_->now(), [this, key] { OnTcpEvent(key, 0); });
  }
}

}  // namespace sandfence::dns
