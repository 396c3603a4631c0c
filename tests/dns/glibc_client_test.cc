// Real clients against the DNS filter: glibc's stub resolver (getaddrinfo)
// in a network namespace of the test's own, served by the filter from the
// host namespace through sockets created inside it (AdoptUdp/AdoptTcp), as
// sandfence serves a sandbox with its own network namespace.
//
// The filter's sockets there are bound to 0.0.0.0:53 and the sandbox's
// resolv.conf names 127.0.0.153: glibc accepts a reply only from the
// address it asked, so a resolved name proves the reply left from the query's
// destination (IP_PKTINFO). A raw client checks the same directly, and that a
// second address in the namespace (127.0.0.154) is judged as another
// (unknown) sandbox.
//
// Needs root (namespaces, port 53, bind mounts); skipped without. Its own
// binary: it forks before any thread exists.
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dns/filter_server.h"
#include "dns/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/dns_server.h"
#include "support/test_files.h"

namespace sandfence::dns {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint32_t kServed = 0x7f000099;    // 127.0.0.153
constexpr uint32_t kUnserved = 0x7f00009a;  // 127.0.0.154
constexpr SandboxId kSandbox = 7;

bool SendFds(int sock, int a, int b) {
  char byte = 'F';
  iovec iov = {&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  int fds[2] = {a, b};
  std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  return ::sendmsg(sock, &msg, 0) == 1;
}

bool RecvFds(int sock, int* a, int* b) {
  char byte;
  iovec iov = {&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1) return false;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr || c->cmsg_type != SCM_RIGHTS) return false;
  int fds[2];
  std::memcpy(fds, CMSG_DATA(c), sizeof(fds));
  *a = fds[0];
  *b = fds[1];
  return true;
}

// One raw UDP query from an unconnected socket: "rcode=N from=IP:PORT".
std::string RawQuery(uint32_t dest, const std::string& name) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(53);
  to.sin_addr.s_addr = htonl(dest);
  const std::string q = testing::Query(name, kTypeA, 0x5151, 1232);
  ::sendto(fd, q.data(), q.size(), 0, reinterpret_cast<sockaddr*>(&to),
           sizeof(to));
  pollfd p = {fd, POLLIN, 0};
  if (::poll(&p, 1, 5000) != 1) return "timeout";
  char buf[2048];
  sockaddr_in from = {};
  socklen_t len = sizeof(from);
  const ssize_t n = ::recvfrom(fd, buf, sizeof(buf), 0,
                               reinterpret_cast<sockaddr*>(&from), &len);
  ::close(fd);
  if (n < 12) return "short";
  char ip[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &from.sin_addr, ip, sizeof(ip));
  return absl::StrCat("rcode=", buf[3] & 0xf, " from=", ip, ":",
                      ntohs(from.sin_port));
}

// getaddrinfo's result: "ok <addresses>" or "error <gai code>".
std::string Resolve(const char* name) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(name, nullptr, &hints, &res);
  if (rc != 0) return absl::StrCat("error ", rc);
  std::string out = "ok";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      ::inet_ntop(AF_INET,
                  &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, ip,
                  sizeof(ip));
    } else {
      ::inet_ntop(AF_INET6,
                  &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, ip,
                  sizeof(ip));
    }
    absl::StrAppend(&out, " ", ip);
  }
  ::freeaddrinfo(res);
  return out;
}

// The sandbox side: a new network and mount namespace, the filter's sockets
// made there and handed to the parent, then the clients. Reports one line
// per check on `sock`. Only plain system calls and libc: no gtest here.
[[noreturn]] void Sandbox(int sock, const std::string& dir) {
  auto fail = [sock](const std::string& what) {
    const std::string line =
        absl::StrCat("setup-failed ", what, ": ", std::strerror(errno), "\n");
    (void)!::write(sock, line.data(), line.size());
    ::_exit(1);
  };
  if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) fail("unshare");
  const int ctl = ::socket(AF_INET, SOCK_DGRAM, 0);
  ifreq ifr = {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(ctl, SIOCGIFFLAGS, &ifr) != 0) fail("SIOCGIFFLAGS");
  ifr.ifr_flags |= IFF_UP;
  if (::ioctl(ctl, SIOCSIFFLAGS, &ifr) != 0) fail("SIOCSIFFLAGS lo up");
  const int udp = ::socket(AF_INET, SOCK_DGRAM, 0);
  const int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in any = {};
  any.sin_family = AF_INET;
  any.sin_port = htons(53);
  if (::bind(udp, reinterpret_cast<sockaddr*>(&any), sizeof(any)) != 0) {
    fail("bind udp 0.0.0.0:53");
  }
  if (::bind(tcp, reinterpret_cast<sockaddr*>(&any), sizeof(any)) != 0 ||
      ::listen(tcp, 16) != 0) {
    fail("bind tcp 0.0.0.0:53");
  }
  if (!SendFds(sock, udp, tcp)) fail("send fds");
  ::close(udp);
  ::close(tcp);
  char go;
  if (::read(sock, &go, 1) != 1) fail("wait for the filter");

  // The sandbox's own resolver configuration.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    fail("make / private");
  }
  const std::string resolv = dir + "/resolv.conf";
  const std::string nss = dir + "/nsswitch.conf";
  if (::mount(resolv.c_str(), "/etc/resolv.conf", nullptr, MS_BIND, nullptr) !=
      0) {
    fail("bind resolv.conf");
  }
  if (::mount(nss.c_str(), "/etc/nsswitch.conf", nullptr, MS_BIND, nullptr) !=
      0) {
    fail("bind nsswitch.conf");
  }
  std::string report;
  absl::StrAppend(&report, "raw-served ", RawQuery(kServed, "model.test"),
                  "\n");
  absl::StrAppend(&report, "raw-unserved ", RawQuery(kUnserved, "model.test"),
                  "\n");
  absl::StrAppend(&report, "gai-allowed ", Resolve("model.test"), "\n");
  absl::StrAppend(&report, "gai-blocked ", Resolve("secret.attacker.test"),
                  "\n");
  (void)!::write(sock, report.data(), report.size());
  ::_exit(0);
}

TEST(GlibcClient, ResolvesThroughTheFilterFromAnotherNetworkNamespace) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root: a network and a mount namespace, port 53 "
                    "and bind mounts over /etc/resolv.conf";
  }
  SANDFENCE_REQUIRE_DNSMASQ();
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  ASSERT_TRUE(dir->WriteFile("resolv.conf",
                             "nameserver 127.0.0.153\n"
                             "options timeout:3 attempts:1\n")
                  .ok());
  ASSERT_TRUE(dir->WriteFile("nsswitch.conf", "hosts: dns\n").ok());

  int sp[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(sp[0]);
    Sandbox(sp[1], dir->path());
  }
  ::close(sp[1]);
  UniqueFd sock(sp[0]);
  int udp_fd = -1, tcp_fd = -1;
  const bool got = RecvFds(sock.get(), &udp_fd, &tcp_fd);
  if (!got) {
    char buf[512] = {};
    (void)!::read(sock.get(), buf, sizeof(buf) - 1);
    ::waitpid(pid, nullptr, 0);
    GTEST_SKIP() << "cannot set up the sandbox namespace: " << buf;
  }
  UniqueFd udp(udp_fd), tcp(tcp_fd);

  absl::StatusOr<std::unique_ptr<TestDnsServer>> dns = TestDnsServer::Start(
      {{"model.test", {"10.1.2.3"}}, {"secret.attacker.test", {"10.6.6.6"}}});
  ASSERT_TRUE(dns.ok()) << dns.status();

  ListenerId udp_id = 0, tcp_id = 0;
  FilterServerOptions options;
  options.forwarder.servers = {(*dns)->address()};
  FilterHooks hooks;
  const IpAddress served = IpAddress::V4(kServed);
  hooks.identify = [&](const QueryOrigin& o) -> std::optional<SandboxId> {
    if ((o.listener == udp_id || o.listener == tcp_id) &&
        o.local.addr == served) {
      return kSandbox;
    }
    return std::nullopt;
  };
  std::atomic<int> learned{0};
  hooks.learn = [&](const LearnRequest& r) {
    if (r.sandbox == kSandbox) ++learned;
    return absl::OkStatus();
  };
  absl::StatusOr<std::unique_ptr<FilterServer>> server =
      FilterServer::Create(options, hooks);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<ListenerId> u = (*server)->AdoptUdp(std::move(udp));
  ASSERT_TRUE(u.ok()) << u.status();
  absl::StatusOr<ListenerId> t = (*server)->AdoptTcp(std::move(tcp));
  ASSERT_TRUE(t.ok()) << t.status();
  udp_id = *u;
  tcp_id = *t;
  auto policy = std::make_shared<SandboxDnsPolicy>();
  policy->rules = *PhaseNameRules::Build(
      {{"model.test", {{L4::kTcp, 8000, 8000}}, "model"}});
  policy->phase = "agent";
  (*server)->SetPolicy(kSandbox, policy);
  std::thread loop([&] { (void)(*server)->Run(); });

  ASSERT_EQ(::write(sock.get(), "g", 1), 1);
  std::string report;
  char buf[1024];
  for (;;) {
    pollfd p = {sock.get(), POLLIN, 0};
    if (::poll(&p, 1, 30000) != 1) break;
    const ssize_t n = ::read(sock.get(), buf, sizeof(buf));
    if (n <= 0) break;
    report.append(buf, static_cast<size_t>(n));
  }
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  (*server)->Stop();
  loop.join();

  std::map<std::string, std::string> lines;
  for (absl::string_view line :
       absl::StrSplit(report, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(line, absl::MaxSplits(' ', 1));
    lines[kv.first] = kv.second;
  }
  ASSERT_FALSE(lines.contains("setup-failed")) << report;
  EXPECT_EQ(lines["raw-served"], "rcode=0 from=127.0.0.153:53") << report;
  EXPECT_EQ(lines["raw-unserved"], "rcode=5 from=127.0.0.154:53") << report;
  EXPECT_EQ(lines["gai-allowed"], "ok 10.1.2.3") << report;
  EXPECT_EQ(lines["gai-blocked"], absl::StrCat("error ", EAI_NONAME)) << report;
  EXPECT_GE(learned.load(), 2);  // the raw query and getaddrinfo's
  EXPECT_THAT((*dns)->log(), Not(HasSubstr("attacker")));
  EXPECT_THAT((*dns)->log(), HasSubstr("query[AAAA] model.test"));
}

}  // namespace
}  // namespace sandfence::dns
