#include "dns/forwarder.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "dns/sockaddr.h"

namespace sandfence::dns {
namespace {

bool SameQuestion(const Question& a, const Question& b) {
  return a.type == b.type && a.klass == b.klass &&
         absl::EqualsIgnoreCase(a.name_wire, b.name_wire);
}

bool WorthAnotherServer(uint16_t rcode) {
  return rcode == static_cast<uint16_t>(Rcode::kServFail) ||
         rcode == static_cast<uint16_t>(Rcode::kRefused) ||
         rcode == static_cast<uint16_t>(Rcode::kNotImp);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Forwarder>> Forwarder::Create(
    EventLoop* loop, ForwarderOptions options) {
  if (options.servers.empty()) {
    return Malformed("the DNS filter needs at least one upstream server");
  }
  auto f = absl::WrapUnique(new Forwarder(loop, std::move(options)));
  f->buffer_.resize(65536);
  return f;
}

Forwarder::~Forwarder() {
  for (auto& [key, p] : pending_) {
    loop_->CancelTimer(p->attempt_timer);
    loop_->CancelTimer(p->deadline_timer);
    if (p->fd) loop_->Remove(p->fd.get());
  }
}

size_t Forwarder::in_flight(uint64_t client) const {
  auto it = per_client_.find(client);
  return it == per_client_.end() ? 0 : it->second;
}

absl::Status Forwarder::Forward(uint64_t client, const Message& query,
                                Done done) {
  if (pending_.size() >= options_.max_in_flight) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the DNS filter has ", pending_.size(), " queries in flight (limit ",
        options_.max_in_flight, ")"));
  }
  size_t& mine = per_client_[client];
  if (mine >= options_.max_in_flight_per_client) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this sandbox has ", mine, " DNS queries in flight (limit ",
        options_.max_in_flight_per_client, ")"));
  }
  ++mine;
  const uint64_t key = next_key_++;
  auto p = std::make_unique<Pending>();
  p->client = client;
  p->query = query;
  p->done = std::move(done);
  // Spread the load: each query starts at a server of its own.
  p->server = key % options_.servers.size();
  p->deadline_timer =
      loop_->AddTimer(loop_->now() + options_.query_timeout, [this, key] {
        auto it = pending_.find(key);
        if (it == pending_.end()) return;
        it->second->deadline_timer = 0;
        absl::Status why =
            it->second->last_error.ok()
                ? absl::DeadlineExceededError(absl::StrCat(
                      "no upstream DNS server answered in ",
                      absl::FormatDuration(options_.query_timeout)))
                : it->second->last_error;
        Finish(key, why);
      });
  pending_[key] = std::move(p);
  // Failures inside StartAttempt finish the query through a timer, so that
  // `done` never runs inside Forward.
  StartAttempt(key);
  return absl::OkStatus();
}

void Forwarder::CloseAttempt(Pending* p) {
  if (p->attempt_timer) loop_->CancelTimer(p->attempt_timer);
  p->attempt_timer = 0;
  if (p->fd) {
    loop_->Forget(p->fd.get());  // the close below takes it out of epoll
    p->fd.reset();
  }
  p->tcp_in.clear();
  p->tcp_out.clear();
}

void Forwarder::StartAttempt(uint64_t key) {
  Pending* p = pending_.at(key).get();
  CloseAttempt(p);
  p->tcp = false;
  ++p->attempts;
  const HostPort& server = options_.servers[p->server];
  p->id = absl::Uniform<uint16_t>(random_);
  p->sent = BuildUpstreamQuery(p->query, p->id);
  const int family = server.addr.is_v4() ? AF_INET : AF_INET6;
  UniqueFd fd(::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_storage ss;
  const socklen_t len = ToSockaddr(server, &ss);
  absl::Status error;
  if (!fd) {
    error = ErrnoError(errno, "socket for an upstream DNS query");
  } else if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    error = ErrnoError(errno, absl::StrCat("connect to ", server.ToString()));
  } else if (::send(fd.get(), p->sent.data(), p->sent.size(), 0) < 0) {
    error = ErrnoError(errno, absl::StrCat("send to ", server.ToString()));
  } else {
    error =
        loop_->Add(fd.get(), EPOLLIN, [this, key](uint32_t) { OnUdp(key); });
  }
  if (!error.ok()) {
    // Not inside Forward's caller: the next round handles it.
    loop_->AddTimer(loop_->now(), [this, key, error] {
      if (pending_.contains(key)) NextServer(key, error);
    });
    return;
  }
  p->fd = std::move(fd);
  p->attempt_timer = loop_->AddTimer(
      loop_->now() + options_.attempt_timeout, [this, key, server] {
        auto it = pending_.find(key);
        if (it == pending_.end()) return;
        it->second->attempt_timer = 0;
        NextServer(key, absl::DeadlineExceededError(absl::StrCat(
                            server.ToString(), " did not answer in ",
                            absl::FormatDuration(options_.attempt_timeout))));
      });
}

void Forwarder::StartTcp(uint64_t key) {
  Pending* p = pending_.at(key).get();
  CloseAttempt(p);
  p->tcp = true;
  const HostPort& server = options_.servers[p->server];
  p->id = absl::Uniform<uint16_t>(random_);
  p->sent = BuildUpstreamQuery(p->query, p->id);
  p->tcp_out.clear();
  p->tcp_out.push_back(static_cast<char>(p->sent.size() >> 8));
  p->tcp_out.push_back(static_cast<char>(p->sent.size() & 0xff));
  p->tcp_out.append(p->sent);
  const int family = server.addr.is_v4() ? AF_INET : AF_INET6;
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_storage ss;
  const socklen_t len = ToSockaddr(server, &ss);
  absl::Status error;
  if (!fd) {
    error = ErrnoError(errno, "socket for an upstream DNS query over TCP");
  } else if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0 &&
             errno != EINPROGRESS) {
    error = ErrnoError(
        errno, absl::StrCat("connect to ", server.ToString(), " over TCP"));
  } else {
    error = loop_->Add(fd.get(), EPOLLOUT | EPOLLIN,
                       [this, key](uint32_t ev) { OnTcp(key, ev); });
  }
  if (!error.ok()) {
    loop_->AddTimer(loop_->now(), [this, key, error] {
      if (pending_.contains(key)) NextServer(key, error);
    });
    return;
  }
  p->fd = std::move(fd);
  p->attempt_timer = loop_->AddTimer(
      loop_->now() + options_.attempt_timeout, [this, key, server] {
        auto it = pending_.find(key);
        if (it == pending_.end()) return;
        it->second->attempt_timer = 0;
        NextServer(key, absl::DeadlineExceededError(absl::StrCat(
                            server.ToString(), " did not answer over TCP in ",
                            absl::FormatDuration(options_.attempt_timeout))));
      });
}

void Forwarder::OnUdp(uint64_t key) {
  for (;;) {
    auto it = pending_.find(key);
    if (it == pending_.end() || it->second->tcp || !it->second->fd) return;
    Pending* p = it->second.get();
    const ssize_t n = ::recv(p->fd.get(), buffer_.data(), buffer_.size(), 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      // ECONNREFUSED: nothing listens there (an ICMP error came back).
      NextServer(
          key, ErrnoError(errno, absl::StrCat(
                                     "receive from ",
                                     options_.servers[p->server].ToString())));
      return;
    }
    // One answer ends the attempt (answered, or moved on to TCP or another
    // server); a datagram that was no answer leaves it open: read on.
    const size_t attempts = p->attempts;
    OnAnswer(key, std::string(buffer_.data(), static_cast<size_t>(n)), false);
    auto again = pending_.find(key);
    if (again == pending_.end() || again->second->tcp ||
        again->second->attempts != attempts) {
      return;
    }
  }
}

void Forwarder::OnTcp(uint64_t key, uint32_t events) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  Pending* p = it->second.get();
  const std::string where =
      absl::StrCat(options_.servers[p->server].ToString(), " over TCP");
  if (!p->tcp_out.empty() && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(p->fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      NextServer(key, ErrnoError(err, absl::StrCat("connect to ", where)));
      return;
    }
    const ssize_t n =
        ::send(p->fd.get(), p->tcp_out.data(), p->tcp_out.size(), MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN) {
      NextServer(key, ErrnoError(errno, absl::StrCat("send to ", where)));
      return;
    }
    if (n > 0) p->tcp_out.erase(0, static_cast<size_t>(n));
    if (p->tcp_out.empty()) (void)loop_->Modify(p->fd.get(), EPOLLIN);
    return;
  }
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
  for (;;) {
    const ssize_t n = ::recv(p->fd.get(), buffer_.data(), buffer_.size(), 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      NextServer(key, ErrnoError(errno, absl::StrCat("receive from ", where)));
      return;
    }
    if (n == 0) {
      NextServer(key, absl::UnavailableError(
                          absl::StrCat(where,
                                       " closed the connection before "
                                       "answering")));
      return;
    }
    p->tcp_in.append(buffer_.data(), static_cast<size_t>(n));
    if (p->tcp_in.size() >= 2) {
      const size_t want = (static_cast<uint8_t>(p->tcp_in[0]) << 8) |
                          static_cast<uint8_t>(p->tcp_in[1]);
      if (p->tcp_in.size() >= 2 + want) {
        OnAnswer(key, p->tcp_in.substr(2, want), true);
        return;
      }
    }
  }
}

void Forwarder::OnAnswer(uint64_t key, std::string wire, bool tcp) {
  Pending* p = pending_.at(key).get();
  absl::StatusOr<Message> m = ParseMessage(wire);
  if (!m.ok()) {
    // Over UDP it may be a stray datagram: wait on for the real answer
    // until the attempt times out. Over TCP the stream is the server's.
    if (tcp) {
      NextServer(key, absl::UnavailableError(
                          absl::StrCat("unreadable answer from ",
                                       options_.servers[p->server].ToString(),
                                       ": ", m.status().message())));
    }
    return;
  }
  if (!m->header.qr() || m->header.id != p->id || m->questions.size() != 1 ||
      !SameQuestion(m->questions[0], p->query.questions[0])) {
    if (tcp) {
      NextServer(key, absl::UnavailableError(
                          absl::StrCat(options_.servers[p->server].ToString(),
                                       " answered another question over TCP")));
    }
    return;
  }
  const HostPort server = options_.servers[p->server];
  if (m->header.tc() && !tcp) {
    StartTcp(key);
    return;
  }
  UpstreamAnswer answer{std::move(wire), *std::move(m), server, tcp};
  if (WorthAnotherServer(answer.message.rcode()) &&
      p->attempts < options_.servers.size()) {
    p->fallback = std::move(answer);
    p->server = (p->server + 1) % options_.servers.size();
    StartAttempt(key);
    return;
  }
  Finish(key, std::move(answer));
}

void Forwarder::NextServer(uint64_t key, absl::Status why) {
  Pending* p = pending_.at(key).get();
  CloseAttempt(p);
  p->last_error = std::move(why);
  // Every server twice at most (a lost datagram deserves a second try);
  // the query's deadline bounds it all anyway.
  if (p->attempts >= 2 * options_.servers.size()) {
    if (p->fallback) {
      Finish(key, *std::move(p->fallback));
    } else {
      Finish(key, p->last_error);
    }
    return;
  }
  p->server = (p->server + 1) % options_.servers.size();
  StartAttempt(key);
}

void Forwarder::Finish(uint64_t key, absl::StatusOr<UpstreamAnswer> result) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  std::unique_ptr<Pending> p = std::move(it->second);
  pending_.erase(it);
  CloseAttempt(p.get());
  if (p->deadline_timer) loop_->CancelTimer(p->deadline_timer);
  if (auto c = per_client_.find(p->client); c != per_client_.end()) {
    if (--c->second == 0) per_client_.erase(c);
  }
  if (!result.ok() && p->fallback) result = *std::move(p->fallback);
  p->done(std::move(result));
}

}  // namespace sandfence::dns
