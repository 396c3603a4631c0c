#include "support/dns_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/memory/memory.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sandfence {
namespace {

constexpr uint32_t kLoopback = 0x7f000001;  // 127.0.0.1
// Start-up is polled this many times, kProbeWaitMs each: dnsmasq answers in
// a few milliseconds; the bound only keeps a broken start from hanging.
constexpr int kProbeAttempts = 250;
constexpr int kProbeWaitMs = 20;
// Another process can take the port between our pick and dnsmasq's bind.
constexpr int kStartAttempts = 5;
constexpr uint16_t kProbeId = 0x5f0e;

sockaddr_in LoopbackAddr(uint16_t port) {
  sockaddr_in sin = {};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(kLoopback);
  sin.sin_port = htons(port);
  return sin;
}

absl::StatusOr<UniqueFd> BoundSocket(int type, uint16_t port) {
  UniqueFd fd(::socket(AF_INET, type | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError(errno, "socket");
  sockaddr_in sin = LoopbackAddr(port);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sin), sizeof(sin)) !=
      0) {
    return ErrnoError(errno, absl::StrCat("bind 127.0.0.1:", port));
  }
  return fd;
}

absl::StatusOr<uint16_t> LocalPort(int fd) {
  sockaddr_in sin = {};
  socklen_t len = sizeof(sin);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) != 0) {
    return ErrnoError(errno, "getsockname");
  }
  return ntohs(sin.sin_port);
}

// A UDP and a TCP socket bound to the same free 127.0.0.1 port.
struct PortPair {
  UniqueFd udp;
  UniqueFd tcp;
  uint16_t port;
};

absl::StatusOr<PortPair> BindPortPair() {
  absl::Status last;
  for (int attempt = 0; attempt < 20; ++attempt) {
    absl::StatusOr<UniqueFd> udp = BoundSocket(SOCK_DGRAM, 0);
    if (!udp.ok()) return udp.status();
    absl::StatusOr<uint16_t> port = LocalPort(udp->get());
    if (!port.ok()) return port.status();
    absl::StatusOr<UniqueFd> tcp = BoundSocket(SOCK_STREAM, *port);
    if (tcp.ok()) return PortPair{*std::move(udp), *std::move(tcp), *port};
    last = tcp.status();
  }
  return Unavailable(absl::StrCat(
      "no 127.0.0.1 port free for both UDP and TCP: ", last.message()));
}

// A DNS query for `name`, type A, with id kProbeId.
std::string ProbeQuery(absl::string_view name) {
  std::string q = {static_cast<char>(kProbeId >> 8),
                   static_cast<char>(kProbeId & 0xff),
                   0x01,
                   0x00,  // recursion desired
                   0x00,
                   0x01,  // one question
                   0x00,
                   0x00,
                   0x00,
                   0x00,
                   0x00,
                   0x00};
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == absl::string_view::npos) dot = name.size();
    q.push_back(static_cast<char>(dot - start));
    q.append(name.data() + start, dot - start);
    start = dot + 1;
  }
  q.append({0x00, 0x00, 0x01, 0x00, 0x01});  // root, type A, class IN
  return q;
}

// True once the server at `port` answers a query within kProbeWaitMs.
bool Answers(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return false;
  sockaddr_in to = LoopbackAddr(port);
  const std::string query = ProbeQuery("ready.sandfence.invalid");
  if (::sendto(fd.get(), query.data(), query.size(), 0,
               reinterpret_cast<const sockaddr*>(&to), sizeof(to)) < 0) {
    return false;
  }
  pollfd p = {fd.get(), POLLIN, 0};
  if (::poll(&p, 1, kProbeWaitMs) != 1) return false;
  unsigned char reply[512];
  const ssize_t n = ::recv(fd.get(), reply, sizeof(reply), 0);
  return n >= 2 && ((reply[0] << 8) | reply[1]) == kProbeId;
}

bool ValidRecordName(absl::string_view name) {
  if (name.empty() || name.front() == '.' || name.back() == '.') return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '-' && c != '_') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::vector<std::string>> RecordArgs(
    const TestDnsServer::Records& records) {
  std::vector<std::string> args;
  for (const auto& [name, addrs] : records) {
    if (!ValidRecordName(name)) {
      return Malformed(absl::StrCat("test DNS record name \"", name,
                                    "\" is not a plain DNS name"));
    }
    if (addrs.empty()) {
      // A TXT record makes the name exist without an address record.
      args.push_back(absl::StrCat("--txt-record=", name, ",sandfence-test"));
    }
    for (const std::string& addr : addrs) {
      std::optional<IpAddress> ip = IpAddress::Parse(addr);
      if (!ip) {
        return Malformed(absl::StrCat("test DNS record for \"", name, "\": \"",
                                      addr, "\" is not an IP address"));
      }
      args.push_back(absl::StrCat("--host-record=", name, ",", ip->ToString()));
    }
  }
  return args;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  return out;
}

// Starts dnsmasq with `args`, its output going to `log`. Only
// async-signal-safe calls between fork and exec.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& args, int log) {
  std::vector<char*> argv;
  for (const std::string& arg : args) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoError(errno, "fork");
  if (pid == 0) {
    // Dies with the test, even one killed by a signal.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) {
      ::_exit(127);
    }
    const int null = ::open("/dev/null", O_RDONLY);
    if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(log, 1) < 0 ||
        ::dup2(log, 2) < 0) {
      ::_exit(127);
    }
    // Keeps the test's other descriptors (sockets of other fixtures) out of
    // the server.
    ::close_range(3, ~0U, 0);
    ::execv(TestDnsServer::kDnsmasq, argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

bool TestDnsServer::Available() { return ::access(kDnsmasq, X_OK) == 0; }

absl::StatusOr<std::unique_ptr<TestDnsServer>> TestDnsServer::Start(
    const Records& records, uint16_t fixed_port) {
  if (!Available()) {
    return Unavailable(absl::StrCat(kDnsmasq,
                                    " is not installed (Debian "
                                    "package dnsmasq-base)"));
  }
  absl::StatusOr<std::vector<std::string>> record_args = RecordArgs(records);
  if (!record_args.ok()) return record_args.status();

  std::string last_log;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    absl::StatusOr<uint16_t> port =
        fixed_port != 0 ? fixed_port : PickFreeLoopbackPort();
    if (!port.ok()) return port.status();
    std::vector<std::string> args = {
        kDnsmasq,
        "--keep-in-foreground",
        "--no-daemon",  // also: log to stderr
        "--conf-file=/dev/null",
        "--no-resolv",
        "--no-hosts",
        "--pid-file=",
        "--listen-address=127.0.0.1",
        "--bind-interfaces",
        absl::StrCat("--port=", *port),
        // With no upstream, dnsmasq would answer REFUSED for names it does
        // not know; "local" everywhere makes them NXDOMAIN instead.
        "--local=/#/",
        "--log-queries",
    };
    args.insert(args.end(), record_args->begin(), record_args->end());

    UniqueFd log(::memfd_create("dnsmasq-log", MFD_CLOEXEC));
    if (!log) return ErrnoError(errno, "memfd_create");
    absl::StatusOr<pid_t> pid = Spawn(args, log.get());
    if (!pid.ok()) return pid.status();
    std::unique_ptr<TestDnsServer> server =
        absl::WrapUnique(new TestDnsServer(*pid, *port, std::move(log)));

    for (int probe = 0; probe < kProbeAttempts; ++probe) {
      int wstatus = 0;
      if (::waitpid(server->pid_, &wstatus, WNOHANG) == server->pid_) {
        server->pid_ = -1;  // reaped: the destructor must not kill it again
        break;
      }
      if (Answers(server->port_)) return server;
    }
    last_log = server->log();
    // Only a lost race for the port is worth another try.
    if (!absl::StrContains(last_log, "Address already in use")) break;
  }
  return Unavailable(
      absl::StrCat("dnsmasq did not come up; its log:\n", last_log));
}

TestDnsServer::~TestDnsServer() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

HostPort TestDnsServer::address() const {
  return HostPort{IpAddress::V4(kLoopback), port_};
}

std::string TestDnsServer::log() const { return ReadAll(log_.get()); }

absl::StatusOr<std::unique_ptr<TestSilentDnsServer>>
TestSilentDnsServer::Start() {
  absl::StatusOr<PortPair> pair = BindPortPair();
  if (!pair.ok()) return pair.status();
  if (::listen(pair->tcp.get(), 16) != 0) return ErrnoError(errno, "listen");
  return absl::WrapUnique(new TestSilentDnsServer(
      std::move(pair->udp), std::move(pair->tcp), pair->port));
}

HostPort TestSilentDnsServer::address() const {
  return HostPort{IpAddress::V4(kLoopback), port_};
}

absl::StatusOr<uint16_t> PickFreeLoopbackPort() {
  absl::StatusOr<PortPair> pair = BindPortPair();
  if (!pair.ok()) return pair.status();
  return pair->port;  // both sockets close here, leaving the port free
}

}  // namespace sandfence
