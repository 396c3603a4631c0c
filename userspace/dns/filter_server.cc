#include "dns/filter_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sandfence::dns {
namespace {

constexpr size_t kMaxTcpOutput = 1 << 20;
constexpr uint32_t kIn = EPOLLIN;
constexpr uint32_t kOut = EPOLLOUT;

HostPort FromSockaddr(const sockaddr_storage& ss) {
  HostPort hp;
  if (ss.ss_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
    hp.addr = IpAddress::FromBytes(
        AF_INET, reinterpret_cast<const uint8_t*>(&sin->sin_addr));
    hp.port = ntohs(sin->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    hp.addr = IpAddress::FromBytes(
        AF_INET6, reinterpret_cast<const uint8_t*>(&sin6->sin6_addr));
    hp.port = ntohs(sin6->sin6_port);
  }
  return hp;
}

socklen_t ToSockaddr(const HostPort& hp, sockaddr_storage* ss) {
  std::memset(ss, 0, sizeof(*ss));
  if (hp.addr.is_v4()) {
    auto* sin = reinterpret_cast<sockaddr_in*>(ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(hp.port);
    std::memcpy(&sin->sin_addr, hp.addr.bytes(), 4);
    return sizeof(sockaddr_in);
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(ss);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(hp.port);
  std::memcpy(&sin6->sin6_addr, hp.addr.bytes(), 16);
  return sizeof(sockaddr_in6);
}

absl::StatusOr<HostPort> SockName(int fd) {
  sockaddr_storage ss = {};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return ErrnoError(errno, "getsockname");
  }
  return FromSockaddr(ss);
}

absl::Status SetNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return ErrnoError(errno, "fcntl O_NONBLOCK");
  }
  return absl::OkStatus();
}

std::string BlockText(const SandboxDnsPolicy& policy) {
  return absl::StrCat(
      "sandfence: blocked by the sandbox's network policy (phase \"",
      policy.phase, "\"): this name is not allowed");
}

}  // namespace

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kAllowed:
      return "allowed";
    case Verdict::kBlocked:
      return "blocked";
    case Verdict::kRefused:
      return "refused";
    case Verdict::kMalformed:
      return "malformed";
    case Verdict::kNotServed:
      return "not_served";
    case Verdict::kUpstreamFailed:
      return "upstream_failed";
    case Verdict::kLearnFailed:
      return "learn_failed";
    case Verdict::kRateLimited:
      return "rate_limited";
  }
  return "unknown";
}

struct FilterServer::Listener {
  UniqueFd fd;
  Transport transport = Transport::kUdp;
  HostPort bound;
};

struct FilterServer::TcpConn {
  UniqueFd fd;
  QueryOrigin origin;
  std::string in;
  std::string out;
  size_t in_flight = 0;
  bool reading = true;
  bool eof = false;  // the client closed its side: answer, then close
  EventLoop::TimerId idle_timer = 0;
};

// Where and how to send one query's answer, and what to report.
struct FilterServer::Reply {
  Transport transport = Transport::kUdp;
  // UDP: the listener and the addresses; TCP: the connection.
  int udp_fd = -1;
  sockaddr_storage client = {};
  socklen_t client_len = 0;
  HostPort local;
  uint64_t conn = 0;
  size_t max_size = 65535;
  absl::Time start;
  QueryOutcome outcome;
  bool sent = false;
};

FilterServer::FilterServer(FilterServerOptions options, FilterHooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)) {}

absl::StatusOr<std::unique_ptr<FilterServer>> FilterServer::Create(
    FilterServerOptions options, FilterHooks hooks) {
  if (!hooks.identify || !hooks.learn) {
    return Malformed("the DNS filter needs an identify and a learn hook");
  }
  auto server =
      absl::WrapUnique(new FilterServer(std::move(options), std::move(hooks)));
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  if (!loop.ok()) return loop.status();
  server->loop_ = *std::move(loop);
  absl::StatusOr<std::unique_ptr<Forwarder>> fwd =
      Forwarder::Create(server->loop_.get(), server->options_.forwarder);
  if (!fwd.ok()) return fwd.status();
  server->forwarder_ = *std::move(fwd);
  return server;
}

FilterServer::~FilterServer() {
  forwarder_.reset();
  for (auto& [id, conn] : conns_) {
    loop_->CancelTimer(conn->idle_timer);
    loop_->Remove(conn->fd.get());
  }
  for (auto& [id, l] : listeners_) loop_->Remove(l->fd.get());
}

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

void FilterServer::SetPolicy(SandboxId sandbox,
                             std::shared_ptr<const SandboxDnsPolicy> p) {
  absl::MutexLock lock(&mu_);
  policies_[sandbox] = std::move(p);
}

void FilterServer::RemovePolicy(SandboxId sandbox) {
  absl::MutexLock lock(&mu_);
  policies_.erase(sandbox);
}

std::shared_ptr<const SandboxDnsPolicy> FilterServer::PolicyFor(SandboxId id) {
  absl::MutexLock lock(&mu_);
  auto it = policies_.find(id);
  return it == policies_.end() ? nullptr : it->second;
}

absl::Status FilterServer::Run() { return loop_->Run(); }
void FilterServer::Stop() { loop_->Stop(); }

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
    if (::sendmsg(reply.udp_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
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

void FilterServer::Drop(Reply& reply) {
  reply.outcome.replied = false;
  reply.outcome.latency = absl::Now() - reply.start;
  if (reply.transport == Transport::kTcp) ReleaseTcpSlot(reply.conn);
  if (hooks_.outcome) hooks_.outcome(reply.outcome);
}

bool FilterServer::OverRate(std::optional<SandboxId> sandbox) {
  if (options_.max_queries_per_second <= 0) return false;
  const absl::Time now = loop_->now();
  // Buckets idle long enough to be full again are forgotten now and then,
  // so that sandboxes that are gone cost no memory.
  if (++queries_ % 4096 == 0) {
    const absl::Duration refill =
        absl::Seconds(options_.query_burst / options_.max_queries_per_second);
    absl::erase_if(buckets_, [&](const auto& kv) {
      return now - kv.second.last > refill;
    });
  }
  auto [it, inserted] = buckets_.try_emplace(sandbox.value_or(UINT64_MAX),
                                             Bucket{options_.query_burst, now});
  Bucket& b = it->second;
  b.tokens = std::min(options_.query_burst,
                      b.tokens + absl::ToDoubleSeconds(now - b.last) *
                                     options_.max_queries_per_second);
  b.last = now;
  if (b.tokens < 1) return true;
  b.tokens -= 1;
  return false;
}

void FilterServer::HandleQuery(const QueryOrigin& origin,
                               absl::string_view wire,
                               std::shared_ptr<Reply> reply) {
  QueryOutcome& out = reply->outcome;
  out.origin = origin;
  // Who asks comes from where the query arrived, never from its bytes.
  out.sandbox = hooks_.identify(origin);
  if (OverRate(out.sandbox)) {
    out.verdict = Verdict::kRateLimited;
    Drop(*reply);
    return;
  }
  absl::StatusOr<Message> parsed = ParseMessage(wire);
  if (!parsed.ok()) {
    out.verdict = Verdict::kMalformed;
    out.detail = std::string(parsed.status().message());
    if (std::optional<std::string> formerr = BuildFormErr(wire)) {
      Send(*reply, *std::move(formerr));
    } else {
      Drop(*reply);
    }
    return;
  }
  const Message& query = *parsed;
  if (!query.questions.empty()) {
    out.name = query.questions[0].name;
    out.type = query.questions[0].type;
  }
  if (reply->transport == Transport::kUdp) {
    reply->max_size = ClientUdpLimit(query);
  }
  if (std::optional<QueryProblem> problem = CheckQuery(query)) {
    out.verdict = Verdict::kNotServed;
    out.detail = problem->reason;
    if (problem->rcode) {
      Send(*reply, BuildResponse(query, *problem->rcode),
           static_cast<uint16_t>(*problem->rcode));
    } else {
      Drop(*reply);
    }
    return;
  }
  if (!out.sandbox) {
    out.verdict = Verdict::kRefused;
    out.detail = "no sandbox is served at this address";
    Send(*reply, BuildResponse(query, Rcode::kRefused,
                               Ede{EdeCode::kProhibited,
                                   "sandfence: this DNS filter address serves "
                                   "no sandbox"}));
    return;
  }
  std::shared_ptr<const SandboxDnsPolicy> policy = PolicyFor(*out.sandbox);
  if (policy == nullptr) {
    out.verdict = Verdict::kRefused;
    out.detail = "the sandbox has no DNS policy";
    Send(*reply,
         BuildResponse(query, Rcode::kRefused,
                       Ede{EdeCode::kProhibited,
                           "sandfence: the sandbox has no DNS policy"}));
    return;
  }
  out.phase = policy->phase;
  out.generation = policy->generation;
  NameMatch match = policy->rules.Match(query.questions[0].name);
  if (match.grants.empty()) {
    out.verdict = Verdict::kBlocked;
    Send(*reply, BuildResponse(query, Rcode::kNxDomain,
                               Ede{EdeCode::kBlocked, BlockText(*policy)}));
    return;
  }
  auto shared_query = std::make_shared<const Message>(*std::move(parsed));
  absl::Status s = forwarder_->Forward(
      *out.sandbox, *shared_query,
      [this, reply, policy, shared_query, match = std::move(match)](
          absl::StatusOr<UpstreamAnswer> answer) mutable {
        OnUpstream(std::move(reply), std::move(policy), std::move(shared_query),
                   std::move(match), std::move(answer));
      });
  if (!s.ok()) {
    out.verdict = Verdict::kRefused;
    out.detail = std::string(s.message());
    Send(*reply, BuildResponse(*shared_query, Rcode::kRefused,
                               Ede{EdeCode::kOther,
                                   absl::StrCat("sandfence: ", s.message())}));
  }
}

void FilterServer::OnUpstream(std::shared_ptr<Reply> reply,
                              std::shared_ptr<const SandboxDnsPolicy> policy,
                              std::shared_ptr<const Message> query,
                              NameMatch match,
                              absl::StatusOr<UpstreamAnswer> answer) {
  QueryOutcome& out = reply->outcome;
  if (!answer.ok()) {
    out.verdict = Verdict::kUpstreamFailed;
    out.detail = std::string(answer.status().message());
    const EdeCode code = absl::IsDeadlineExceeded(answer.status())
                             ? EdeCode::kNoReachableAuthority
                             : EdeCode::kNetworkError;
    Send(*reply,
         BuildResponse(*query, Rcode::kServFail,
                       Ede{code, absl::StrCat("sandfence: ",
                                              answer.status().message())}));
    return;
  }
  const Question& q = query->questions[0];
  ChainAddresses chain = FollowChain(answer->message, q.name);
  if (!chain.addresses.empty()) {
    LearnRequest req;
    req.sandbox = *out.sandbox;
    req.generation = policy->generation;
    req.phase = policy->phase;
    req.name = q.name;
    req.chain = chain.chain;
    req.grants = match.grants;
    const absl::Time now = absl::Now();
    for (const AnswerAddress& a : chain.addresses) {
      req.addresses.push_back(
          {a.addr, a.ttl, now + LearnedLifetime(a.ttl, policy->ttl)});
      out.addresses.push_back(a.addr);
    }
    if (absl::Status s = hooks_.learn(req); !s.ok()) {
      out.verdict = Verdict::kLearnFailed;
      out.detail = std::string(s.message());
      Send(*reply,
           BuildResponse(*query, Rcode::kServFail,
                         Ede{EdeCode::kOther,
                             "sandfence: the answer's addresses could not be "
                             "opened for this sandbox"}));
      return;
    }
  }
  absl::StatusOr<std::string> wire =
      RewriteAnswer(answer->wire, answer->message, *query,
                    ClientTtlCap(policy->ttl), reply->max_size);
  if (!wire.ok()) {
    out.verdict = Verdict::kUpstreamFailed;
    out.detail = std::string(wire.status().message());
    Send(*reply, BuildResponse(*query, Rcode::kServFail));
    return;
  }
  out.verdict = Verdict::kAllowed;
  Send(*reply, *std::move(wire), answer->message.rcode());
}

}  // namespace sandfence::dns
