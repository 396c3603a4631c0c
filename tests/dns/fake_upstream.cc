#include "dns/fake_upstream.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "dns/message.h"
#include "dns/sockaddr.h"
#include "dns/wire.h"

namespace sandfence::dns::testing {
namespace {

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in sin = {};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(0x7f000001);
  sin.sin_port = htons(port);
  return sin;
}

bool ReadFull(int fd, char* buf, size_t n, absl::Time deadline) {
  size_t got = 0;
  while (got < n) {
    pollfd p = {fd, POLLIN, 0};
    const int ms = static_cast<int>(std::max<int64_t>(
        0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    if (::poll(&p, 1, ms) != 1) return false;
    const ssize_t r = ::recv(fd, buf + got, n - got, 0);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FakeUpstream>> FakeUpstream::Start(
    std::map<std::string, FakeName> names) {
  auto f = absl::WrapUnique(new FakeUpstream());
  f->names_ = std::move(names);
  for (int attempt = 0; attempt < 20; ++attempt) {
    UniqueFd udp(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in sin = Loopback(0);
    if (!udp || ::bind(udp.get(), reinterpret_cast<sockaddr*>(&sin),
                       sizeof(sin)) != 0) {
      return ErrnoError(errno, "fake upstream udp");
    }
    socklen_t len = sizeof(sin);
    ::getsockname(udp.get(), reinterpret_cast<sockaddr*>(&sin), &len);
    const uint16_t port = ntohs(sin.sin_port);
    UniqueFd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in tin = Loopback(port);
    if (!tcp ||
        ::bind(tcp.get(), reinterpret_cast<sockaddr*>(&tin), sizeof(tin)) !=
            0 ||
        ::listen(tcp.get(), 64) != 0) {
      continue;
    }
    f->udp_ = std::move(udp);
    f->tcp_ = std::move(tcp);
    f->port_ = port;
    break;
  }
  if (!f->udp_) return Unavailable("no port for the fake upstream");
  f->stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC));
  f->thread_ = std::thread([p = f.get()] { p->Serve(); });
  return f;
}

FakeUpstream::~FakeUpstream() {
  const uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

std::vector<SeenQuery> FakeUpstream::seen() const {
  absl::MutexLock lock(&mu_);
  return seen_;
}

std::string FakeUpstream::AnswerFor(const std::string& wire, bool tcp,
                                    bool* reply) {
  *reply = false;
  absl::StatusOr<Message> q = ParseMessage(wire);
  if (!q.ok() || q->questions.size() != 1) return "";
  const Question& question = q->questions[0];
  {
    absl::MutexLock lock(&mu_);
    seen_.push_back({question.name, question.type, tcp, q->header.flags,
                     q->edns.has_value(),
                     q->edns.has_value() && q->edns->dnssec_ok});
  }
  auto it = names_.find(question.name);
  uint16_t flags = 0x8180;
  std::vector<std::string> records;
  uint16_t count = 0;
  Wire body;
  if (it == names_.end()) {
    flags |= 3;  // NXDOMAIN
  } else {
    const FakeName& n = it->second;
    if (n.silent) return "";
    if (n.tc_over_udp && !tcp) {
      flags |= kFlagTc;
    } else {
      std::string owner = question.name;
      if (!n.cname.empty()) {
        body.Rr(owner, kTypeCname, n.ttl, NameBytes(n.cname));
        ++count;
        owner = n.cname;
      }
      for (const std::string& a : n.addrs) {
        std::optional<IpAddress> ip = IpAddress::Parse(a);
        if (!ip) continue;
        const uint16_t type = ip->is_v4() ? kTypeA : kTypeAaaa;
        if (type != question.type) continue;
        body.Rr(owner, type, n.ttl,
                std::string(reinterpret_cast<const char*>(ip->bytes()),
                            ip->is_v4() ? 4 : 16));
        ++count;
      }
    }
  }
  Wire w;
  w.Header(q->header.id, flags, 1, count, 0, q->edns ? 1 : 0);
  w.Bytes(question.name_wire).U16(question.type).U16(question.klass);
  w.Bytes(body.str());
  if (q->edns) w.Opt(1232, false);
  *reply = true;
  return w.str();
}

void FakeUpstream::Serve() {
  std::string buf(65536, '\0');
  for (;;) {
    pollfd fds[3] = {{udp_.get(), POLLIN, 0},
                     {tcp_.get(), POLLIN, 0},
                     {stop_.get(), POLLIN, 0}};
    if (::poll(fds, 3, 1000) < 0 && errno != EINTR) return;
    if (fds[2].revents) return;
    if (fds[0].revents & POLLIN) {
      sockaddr_storage from = {};
      socklen_t len = sizeof(from);
      const ssize_t n = ::recvfrom(udp_.get(), buf.data(), buf.size(), 0,
                                   reinterpret_cast<sockaddr*>(&from), &len);
      if (n > 0) {
        bool reply = false;
        std::string out = AnswerFor(buf.substr(0, n), false, &reply);
        if (reply) {
          ::sendto(udp_.get(), out.data(), out.size(), 0,
                   reinterpret_cast<sockaddr*>(&from), len);
        }
      }
    }
    if (fds[1].revents & POLLIN) {
      UniqueFd conn(::accept4(tcp_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn) continue;
      const absl::Time deadline = absl::Now() + absl::Seconds(2);
      char lenbuf[2];
      if (!ReadFull(conn.get(), lenbuf, 2, deadline)) continue;
      const size_t qlen = (static_cast<uint8_t>(lenbuf[0]) << 8) |
                          static_cast<uint8_t>(lenbuf[1]);
      std::string q(qlen, '\0');
      if (!ReadFull(conn.get(), q.data(), qlen, deadline)) continue;
      bool reply = false;
      std::string out = AnswerFor(q, true, &reply);
      if (!reply) continue;
      std::string framed;
      framed.push_back(static_cast<char>(out.size() >> 8));
      framed.push_back(static_cast<char>(out.size() & 0xff));
      framed += out;
      (void)!::send(conn.get(), framed.data(), framed.size(), MSG_NOSIGNAL);
    }
  }
}

absl::StatusOr<UdpAnswer> UdpExchange(const HostPort& server,
                                      const std::string& query,
                                      absl::Duration timeout) {
  sockaddr_storage ss;
  const socklen_t len = ToSockaddr(server, &ss);
  UniqueFd fd(::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError(errno, "socket");
  if (::sendto(fd.get(), query.data(), query.size(), 0,
               reinterpret_cast<sockaddr*>(&ss), len) < 0) {
    return ErrnoError(errno, "sendto");
  }
  pollfd p = {fd.get(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) !=
      1) {
    return absl::DeadlineExceededError(
        absl::StrCat("no answer from ", server.ToString(), " in ",
                     absl::FormatDuration(timeout)));
  }
  std::string buf(65536, '\0');
  sockaddr_storage from = {};
  socklen_t from_len = sizeof(from);
  const ssize_t n = ::recvfrom(fd.get(), buf.data(), buf.size(), 0,
                               reinterpret_cast<sockaddr*>(&from), &from_len);
  if (n < 0) return ErrnoError(errno, "recvfrom");
  buf.resize(static_cast<size_t>(n));
  UdpAnswer out;
  out.wire = std::move(buf);
  if (from.ss_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&from);
    out.from = {IpAddress::FromBytes(
                    AF_INET, reinterpret_cast<const uint8_t*>(&sin->sin_addr)),
                ntohs(sin->sin_port)};
  } else {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&from);
    out.from = {IpAddress::FromBytes(AF_INET6, reinterpret_cast<const uint8_t*>(
                                                   &sin6->sin6_addr)),
                ntohs(sin6->sin6_port)};
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> TcpExchangeMany(
    const HostPort& server, const std::vector<std::string>& queries,
    absl::Duration timeout) {
  sockaddr_storage ss;
  const socklen_t len = ToSockaddr(server, &ss);
  UniqueFd fd(::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError(errno, "socket");
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    return ErrnoError(errno, absl::StrCat("connect ", server.ToString()));
  }
  std::string out;
  for (const std::string& q : queries) {
    out.push_back(static_cast<char>(q.size() >> 8));
    out.push_back(static_cast<char>(q.size() & 0xff));
    out += q;
  }
  if (::send(fd.get(), out.data(), out.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(out.size())) {
    return ErrnoError(errno, "send");
  }
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::string> answers;
  for (size_t i = 0; i < queries.size(); ++i) {
    char lenbuf[2];
    if (!ReadFull(fd.get(), lenbuf, 2, deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("TCP answer ", i, " did not come"));
    }
    const size_t n = (static_cast<uint8_t>(lenbuf[0]) << 8) |
                     static_cast<uint8_t>(lenbuf[1]);
    std::string a(n, '\0');
    if (!ReadFull(fd.get(), a.data(), n, deadline)) {
      return absl::DeadlineExceededError("TCP answer truncated");
    }
    answers.push_back(std::move(a));
  }
  return answers;
}

absl::StatusOr<std::string> TcpExchange(const HostPort& server,
                                        const std::string& query,
                                        absl::Duration timeout) {
  absl::StatusOr<std::vector<std::string>> a =
      TcpExchangeMany(server, {query}, timeout);
  if (!a.ok()) return a.status();
  return (*a)[0];
}

}  // namespace sandfence::dns::testing
