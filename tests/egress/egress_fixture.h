// Shared scaffolding for the egress tests that run real sandboxes: a
// per-test cgroup, loopback listeners, and the net_probe child.
#ifndef SANDFENCE_TESTS_EGRESS_EGRESS_FIXTURE_H_
#define SANDFENCE_TESTS_EGRESS_EGRESS_FIXTURE_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cgroup.h"
#include "common/ip.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "compile/compiled_policy.h"
#include "egress/egress_controller.h"
#include "egress/spawn.h"
#include "gtest/gtest.h"
#include "support/private_host.h"

namespace sandfence::testing {

inline Rule TcpRule(const char* addr, uint16_t first, uint16_t last = 0) {
  Rule r;
  r.protocol = L4::kTcp;
  r.dest = *IpPrefix::Parse(addr);
  r.port_first = first;
  r.port_last = last ? last : first;
  r.origin = addr;
  return r;
}

inline Rule UdpRule(const char* addr, uint16_t first, uint16_t last = 0) {
  Rule r = TcpRule(addr, first, last);
  r.protocol = L4::kUdp;
  return r;
}

inline CompiledPhase Phase(v1::NetworkAccess access, std::vector<Rule> rules,
                           v1::Loopback loopback = v1::LOOPBACK_DEFAULT) {
  CompiledPhase p;
  p.name = "test";
  p.access = access;
  p.rules = std::move(rules);
  p.loopback = loopback;
  p.audit_allowed = v1::Audit::ALL;
  return p;
}

// A listening TCP socket and a bound UDP socket on one loopback address,
// both on the same port (chosen by the kernel for TCP).
struct Listener {
  UniqueFd tcp, udp;
  uint16_t port = 0;
};

inline Listener Listen(const char* addr, uint16_t port = 0) {
  Listener l;
  sockaddr_storage ss{};
  socklen_t len;
  int family;
  if (std::string(addr).find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
    a6->sin6_family = family = AF_INET6;
    inet_pton(AF_INET6, addr, &a6->sin6_addr);
    a6->sin6_port = htons(port);
    len = sizeof(*a6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
    a4->sin_family = family = AF_INET;
    inet_pton(AF_INET, addr, &a4->sin_addr);
    a4->sin_port = htons(port);
    len = sizeof(*a4);
  }
  l.tcp.reset(socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  setsockopt(l.tcp.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int qlen = 16;
  setsockopt(l.tcp.get(), IPPROTO_TCP, TCP_FASTOPEN, &qlen, sizeof(qlen));
  EXPECT_EQ(bind(l.tcp.get(), reinterpret_cast<sockaddr*>(&ss), len), 0)
      << "bind tcp " << addr << ": " << strerror(errno);
  EXPECT_EQ(listen(l.tcp.get(), 4096), 0);
  getsockname(l.tcp.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  l.port = ntohs(family == AF_INET
                     ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                     : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  l.udp.reset(socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(bind(l.udp.get(), reinterpret_cast<sockaddr*>(&ss), len), 0)
      << "bind udp " << addr << ":" << l.port << ": " << strerror(errno);
  return l;
}

// A parent cgroup for one test binary's sandboxes, removed at the end: by
// the suites that tear it down, and at exit for every other (ctest runs
// each test in a process of its own, and suites without a teardown left
// one empty sandfence-test-<pid> per process behind).
inline std::string TestCgroupRoot() {
  static std::string root = [] {
    absl::StatusOr<std::string> mount = FindCgroup2Mount();
    if (!mount.ok()) return std::string();
    std::string dir = absl::StrCat(*mount, "/sandfence-test-", getpid());
    mkdir(dir.c_str(), 0755);
    // Leaked: the exit handler runs after `root` is destroyed. Only the
    // process that made it removes it (a forked child that exits must not
    // take its parent's root away).
    static const std::string* const at_exit = new std::string(dir);
    static const pid_t owner = getpid();
    std::atexit([] {
      if (getpid() == owner) rmdir(at_exit->c_str());
    });
    return dir;
  }();
  return root;
}

// Whether a datagram reached l's UDP socket within two seconds (consumed).
inline bool DatagramArrived(const Listener& l) {
  pollfd p{.fd = l.udp.get(), .events = POLLIN, .revents = 0};
  if (poll(&p, 1, 2000) != 1) return false;
  char buf[64];
  return recv(l.udp.get(), buf, sizeof(buf), MSG_DONTWAIT) >= 0;
}

// Throws away whatever earlier attempts left queued on l's UDP socket.
inline void DrainDatagrams(const Listener& l) {
  char buf[64];
  while (recv(l.udp.get(), buf, sizeof(buf), MSG_DONTWAIT) >= 0) {
  }
}

// What a net_probe exit status means, for failure messages: a hook that
// fails open shows as "connected" or "timed out", said as such.
inline std::string ProbeOutcome(int status) {
  switch (status) {
    case 0:
      return "went through (connected or sent)";
    case EINPROGRESS:
    case ETIMEDOUT:
    case EAGAIN:
      return "timed out (the SYN went out and was dropped)";
    case 128 + SIGALRM:
      return "hung (net_probe killed after 30 s)";
    case -1:
      return "the probe could not be run";
  }
  if (status > 100 && status < 200) {
    return absl::StrCat("setup failed before the attempt: ",
                        strerror(status - 100));
  }
  return absl::StrCat("errno ", status, " (", strerror(status), ")");
}

// EXPECT_TRUE(IsEperm(Probe(...))): passes on EPERM, else says what the
// attempt did instead ("connected/timed out instead of EPERM").
inline ::testing::AssertionResult IsEperm(int status) {
  if (status == EPERM) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << ProbeOutcome(status) << " instead of EPERM";
}

// SANDFENCE_NET_PROBE overrides the build-time path (the VM suite copies
// binaries elsewhere).
inline std::string NetProbePath() {
  const char* env = getenv("SANDFENCE_NET_PROBE");
  return env ? env : SANDFENCE_NET_PROBE_PATH;
}

// A net_probe held between its two steps (--pause-fds): it connects (or
// listens), says so on a pipe, and waits for a word before it goes on. A
// connection held open across a phase switch.
class HeldProbe {
 public:
  // Starts `net_probe --pause-fds R W args...` in cgroup_fd and waits (10 s
  // at most) for its first word: `ready` bytes of it (a port, say) go to
  // *ready_out if given.
  static absl::StatusOr<HeldProbe> Start(int cgroup_fd,
                                         std::vector<std::string> args,
                                         void* ready_out = nullptr,
                                         size_t ready = 1) {
    int resume[2], ready_pipe[2];
    if (pipe2(resume, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2");
    UniqueFd resume_r(resume[0]), resume_w(resume[1]);
    if (pipe2(ready_pipe, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2");
    UniqueFd ready_r(ready_pipe[0]), ready_w(ready_pipe[1]);
    SpawnOptions o;
    o.cgroup_fd = cgroup_fd;
    o.argv = {NetProbePath(), "--pause-fds", std::to_string(resume_r.get()),
              std::to_string(ready_w.get())};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.keep_fds = {resume_r.get(), ready_w.get()};
    absl::StatusOr<pid_t> pid = SpawnInCgroup(o);
    if (!pid.ok()) return pid.status();
    HeldProbe h(*pid, std::move(resume_w), std::move(ready_r));
    ready_w.reset();
    char byte;
    if (!h.Await(ready_out != nullptr ? ready_out : &byte,
                 ready_out != nullptr ? ready : 1)) {
      // Exited (its status says why), or hung (killed here).
      kill(h.pid_, SIGKILL);
      absl::StatusOr<int> status = WaitForExit(std::exchange(h.pid_, -1));
      return absl::DeadlineExceededError(absl::StrCat(
          "net_probe ", absl::StrJoin(args, " "), " did not get ready: ",
          status.ok() ? ProbeOutcome(*status) : status.status().ToString()));
    }
    return h;
  }

  HeldProbe(HeldProbe&& o) noexcept
      : pid_(std::exchange(o.pid_, -1)),
        resume_w_(std::move(o.resume_w_)),
        ready_r_(std::move(o.ready_r_)) {}
  HeldProbe& operator=(HeldProbe&&) = delete;
  ~HeldProbe() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      WaitForExit(pid_).IgnoreError();
    }
  }

  // Waits (10 s at most) for its next word of n bytes.
  bool Await(void* out, size_t n) {
    pollfd p{.fd = ready_r_.get(), .events = POLLIN, .revents = 0};
    return poll(&p, 1, 10000) == 1 &&
           read(ready_r_.get(), out, n) == static_cast<ssize_t>(n);
  }

  // Lets it go on; its exit status.
  absl::StatusOr<int> Resume() {
    if (write(resume_w_.get(), "g", 1) != 1) return ErrnoError(errno, "write");
    absl::StatusOr<int> status = WaitForExit(pid_);
    pid_ = -1;
    return status;
  }

 private:
  HeldProbe(pid_t pid, UniqueFd resume_w, UniqueFd ready_r)
      : pid_(pid), resume_w_(std::move(resume_w)), ready_r_(std::move(ready_r)) {}

  pid_t pid_ = -1;
  UniqueFd resume_w_, ready_r_;
};

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_EGRESS_EGRESS_FIXTURE_H_
