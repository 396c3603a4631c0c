// sandfence_bench_worker: the process that sits inside the cgroup under
// test, so that every hook and every nftables rule being measured judges
// its sockets. It reports to the bench through the fd given with --out.
//
//   connect --tcp-listen FD --udp-sink FD --dst ADDR --tcp-port P
//           --udp-port Q --batches B --udp-batch N --send-batch N
//           --tcp-batch N
//       Times batches of UDP connect(), UDP sendto() and TCP
//       socket+connect+accept+close to allowed loopback destinations;
//       prints "sample <op> <ns per op>" for each batch after a warm-up.
//   deny    --dst ADDR --port-base P --ports N --rate R --duration-ms D
//           --start-boot-ns T [--stamps]
//       From T (CLOCK_BOOTTIME) for D ms, UDP connect()s at R per second
//       (0: as fast as it can) to ADDR on ports P..P+N-1, which the sandbox
//       denies; each denial is one event. With --stamps, the CLOCK_BOOTTIME
//       taken right before each call follows the counts, as raw u64s.
//   pipe    --notify FD --rate R --count C --start-boot-ns T
//       The latency baseline: writes CLOCK_BOOTTIME into a pipe, C times at
//       R per second; the bench reads them as the ring buffer's events.
//   syscalls --batches B --batch N
//       Times batches of system calls the process guard looks at (or
//       passes by): getppid, fstat, open+close of /dev/null and of
//       /proc/self/stat, kill(self, 0); "sample <op> <ns per op>" lines.
//   dns     --dst ADDR --port P --count N --gap-us G --name NAME
//       N lookups of NAME (type A) the way glibc's stub resolver makes one:
//       a fresh UDP socket connect()ed to ADDR:P, send, wait for the answer
//       (1 s at most), close; G us apart. "sample lookup <ns>" per answered
//       lookup, then "lost <n>".
//   rollout --model ADDR --model-port P --tool ADDR --tool-port Q
//           --udp-port U --denied ADDR --denied-port R [--hold]
//       What an agent of the soak does (issue 36): TCP connects to the
//       model and the tool and a UDP send to the tool's U, all allowed; a
//       UDP connect to the denied address, which must fail with EPERM. Prints "ok"; with
//       --hold it then prints "held" and waits, its sockets open, to be
//       killed.
//
// On failure: an "error <what>" line and exit status 1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

int g_out = 1;

uint64_t Now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}
uint64_t Boot() { return Now(CLOCK_BOOTTIME); }
uint64_t Mono() { return Now(CLOCK_MONOTONIC); }

[[noreturn]] void Fail(const char* what, int err) {
  dprintf(g_out, "error %s: %s\n", what, err ? strerror(err) : "failed");
  _exit(1);
}

// Sleeps most of the way and spins the rest: paced rates up to hundreds of
// thousands per second need sub-microsecond precision.
void WaitUntilBoot(uint64_t t) {
  for (;;) {
    uint64_t now = Boot();
    if (now >= t) return;
    if (t - now > 200000) {
      uint64_t ns = t - now - 100000;
      timespec ts{static_cast<time_t>(ns / 1000000000ull),
                  static_cast<long>(ns % 1000000000ull)};
      nanosleep(&ts, nullptr);
    }
  }
}

struct Args {
  std::map<std::string, std::string> values;
  bool Has(const std::string& k) const { return values.count(k) != 0; }
  uint64_t Num(const std::string& k) const {
    auto it = values.find(k);
    if (it == values.end()) {
      dprintf(g_out, "error missing --%s\n", k.c_str());
      _exit(1);
    }
    return std::strtoull(it->second.c_str(), nullptr, 10);
  }
  std::string Str(const std::string& k) const {
    auto it = values.find(k);
    if (it == values.end()) {
      dprintf(g_out, "error missing --%s\n", k.c_str());
      _exit(1);
    }
    return it->second;
  }
};

sockaddr_in Addr(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) Fail("bad --dst", 0);
  return a;
}

void Sample(const char* op, uint64_t elapsed_ns, uint64_t n) {
  dprintf(g_out, "sample %s %.1f\n", op, static_cast<double>(elapsed_ns) / n);
}

int RunConnect(const Args& a) {
  const int listen_fd = static_cast<int>(a.Num("tcp-listen"));
  const int sink_fd = static_cast<int>(a.Num("udp-sink"));
  const sockaddr_in tcp_dst = Addr(a.Str("dst"), a.Num("tcp-port"));
  const sockaddr_in udp_dst = Addr(a.Str("dst"), a.Num("udp-port"));
  const uint64_t batches = a.Num("batches");
  const uint64_t udp_batch = a.Num("udp-batch");
  const uint64_t send_batch = a.Num("send-batch");
  const uint64_t tcp_batch = a.Num("tcp-batch");
  const auto* udp_sa = reinterpret_cast<const sockaddr*>(&udp_dst);
  const auto* tcp_sa = reinterpret_cast<const sockaddr*>(&tcp_dst);

  int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (u < 0 || s < 0) Fail("udp socket", errno);
  char payload[16] = "sandfence-bench";
  char drain[64];

  // Batch 0 warms caches and the kernel's paths and is not reported.
  for (uint64_t b = 0; b <= batches; ++b) {
    uint64_t t = Mono();
    for (uint64_t i = 0; i < udp_batch; ++i) {
      if (connect(u, udp_sa, sizeof(udp_dst)) != 0) Fail("udp connect", errno);
    }
    if (b) Sample("udp_connect", Mono() - t, udp_batch);

    t = Mono();
    for (uint64_t i = 0; i < send_batch; ++i) {
      if (sendto(s, payload, sizeof(payload), 0, udp_sa, sizeof(udp_dst)) < 0) {
        Fail("udp sendto", errno);
      }
    }
    if (b) Sample("udp_sendto", Mono() - t, send_batch);
    while (recv(sink_fd, drain, sizeof(drain), MSG_DONTWAIT) > 0) {
    }

    t = Mono();
    for (uint64_t i = 0; i < tcp_batch; ++i) {
      int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (c < 0) Fail("tcp socket", errno);
      // Close with a reset: no TIME_WAIT, so ephemeral ports never run out.
      linger lg{1, 0};
      setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
      if (connect(c, tcp_sa, sizeof(tcp_dst)) != 0) Fail("tcp connect", errno);
      int acc = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (acc < 0) Fail("tcp accept", errno);
      close(c);
      close(acc);
    }
    if (b) Sample("tcp_connect_accept", Mono() - t, tcp_batch);
  }
  dprintf(g_out, "ok\n");
  return 0;
}

// Writes all of buf or fails.
void WriteAll(const void* buf, size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len) {
    ssize_t n = write(g_out, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) _exit(1);
    p += n;
    len -= n;
  }
}

int RunDeny(const Args& a) {
  const std::string dst = a.Str("dst");
  const uint64_t port_base = a.Num("port-base");
  const uint64_t ports = a.Num("ports") ? a.Num("ports") : 1;
  const uint64_t rate = a.Num("rate");
  const uint64_t duration = a.Num("duration-ms") * 1000000ull;
  const uint64_t start = a.Num("start-boot-ns");
  const bool stamps = a.Has("stamps");
  sockaddr_in addr = Addr(dst, port_base);
  const double period = rate ? 1e9 / rate : 0;

  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) Fail("udp socket", errno);
  std::vector<uint64_t> st;
  if (stamps)
    st.reserve(rate ? rate * (duration / 1000000ull) / 1000 + 16 : 1 << 20);

  WaitUntilBoot(start);
  const uint64_t end = start + duration;
  uint64_t attempts = 0, eperm = 0, other = 0;
  for (uint64_t i = 0;; ++i) {
    uint64_t now = Boot();
    if (period) {
      uint64_t target = start + static_cast<uint64_t>(i * period);
      if (now < target) {
        WaitUntilBoot(target);
        now = Boot();
      }
    }
    if (now >= end) break;
    if (stamps) st.push_back(now);
    addr.sin_port = htons(static_cast<uint16_t>(port_base + i % ports));
    if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      ++other;
    } else if (errno == EPERM) {
      ++eperm;
    } else {
      ++other;
    }
    ++attempts;
  }
  const uint64_t elapsed = Boot() - start;
  dprintf(g_out, "attempts %llu\neperm %llu\nother %llu\nelapsed_ns %llu\n",
          static_cast<unsigned long long>(attempts),
          static_cast<unsigned long long>(eperm),
          static_cast<unsigned long long>(other),
          static_cast<unsigned long long>(elapsed));
  dprintf(g_out, "stamps %zu\n", st.size());
  WriteAll(st.data(), st.size() * sizeof(uint64_t));
  return 0;
}

int RunPipe(const Args& a) {
  const int notify = static_cast<int>(a.Num("notify"));
  const uint64_t rate = a.Num("rate");
  const uint64_t count = a.Num("count");
  const uint64_t start = a.Num("start-boot-ns");
  const double period = rate ? 1e9 / rate : 0;
  WaitUntilBoot(start);
  for (uint64_t i = 0; i < count; ++i) {
    if (period) WaitUntilBoot(start + static_cast<uint64_t>(i * period));
    uint64_t t0 = Boot();
    if (write(notify, &t0, sizeof(t0)) != sizeof(t0)) Fail("write", errno);
  }
  dprintf(g_out, "attempts %llu\neperm 0\nother 0\nelapsed_ns %llu\nstamps 0\n",
          static_cast<unsigned long long>(count),
          static_cast<unsigned long long>(Boot() - start));
  return 0;
}

int RunSyscalls(const Args& a) {
  const uint64_t batches = a.Num("batches");
  const uint64_t n = a.Num("batch");
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) Fail("open /dev/null", errno);
  const pid_t self = getpid();
  struct stat st;
  // Batch 0 warms caches and the kernel's paths and is not reported.
  for (uint64_t b = 0; b <= batches; ++b) {
    uint64_t t = Mono();
    // Through syscall(): glibc caches nothing for getppid, but say so.
    for (uint64_t i = 0; i < n; ++i) syscall(SYS_getppid);
    if (b) Sample("getppid", Mono() - t, n);

    t = Mono();
    for (uint64_t i = 0; i < n; ++i) {
      if (fstat(null_fd, &st) != 0) Fail("fstat", errno);
    }
    if (b) Sample("fstat", Mono() - t, n);

    t = Mono();
    for (uint64_t i = 0; i < n; ++i) {
      int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) Fail("open /dev/null", errno);
      close(fd);
    }
    if (b) Sample("open_close", Mono() - t, n);

    t = Mono();
    for (uint64_t i = 0; i < n; ++i) {
      int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
      if (fd < 0) Fail("open /proc/self/stat", errno);
      close(fd);
    }
    if (b) Sample("open_close_proc", Mono() - t, n);

    t = Mono();
    for (uint64_t i = 0; i < n; ++i) {
      if (kill(self, 0) != 0) Fail("kill 0", errno);
    }
    if (b) Sample("kill_0", Mono() - t, n);
  }
  dprintf(g_out, "ok\n");
  return 0;
}

int RunDns(const Args& a) {
  const sockaddr_in dst =
      Addr(a.Str("dst"), static_cast<uint16_t>(a.Num("port")));
  const uint64_t count = a.Num("count");
  const uint64_t gap_us = a.Num("gap-us");
  // The question: NAME, type A, class IN, after a 12-byte header.
  std::string question;
  const std::string name = a.Str("name");
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    if (dot > start) {
      question.push_back(static_cast<char>(dot - start));
      question.append(name, start, dot - start);
    }
    start = dot + 1;
  }
  question.append({0, 0, 1, 0, 1});
  uint64_t lost = 0;
  char buf[1500];
  for (uint64_t i = 0; i < count; ++i) {
    const uint16_t id = static_cast<uint16_t>(i);
    std::string q = {static_cast<char>(id >> 8),
                     static_cast<char>(id & 0xff),
                     1,
                     0,
                     0,
                     1,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0};
    q += question;
    const uint64_t t = Mono();
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) Fail("socket", errno);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&dst), sizeof(dst)) !=
        0) {
      Fail("connect to the DNS server", errno);
    }
    if (send(fd, q.data(), q.size(), 0) < 0) Fail("send the query", errno);
    bool answered = false;
    for (;;) {
      pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, 1000) <= 0) break;
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n >= 12 && static_cast<uint8_t>(buf[0]) == (id >> 8) &&
          static_cast<uint8_t>(buf[1]) == (id & 0xff)) {
        answered = true;
        break;
      }
    }
    close(fd);
    if (answered) {
      Sample("lookup", Mono() - t, 1);
    } else {
      ++lost;
    }
    timespec gap{0, static_cast<long>(gap_us * 1000)};
    nanosleep(&gap, nullptr);
  }
  dprintf(g_out, "lost %llu\nok\n", static_cast<unsigned long long>(lost));
  return 0;
}

int RunRollout(const Args& a) {
  const sockaddr_in model = Addr(a.Str("model"), a.Num("model-port"));
  const sockaddr_in tool = Addr(a.Str("tool"), a.Num("tool-port"));
  const sockaddr_in udp = Addr(a.Str("tool"), a.Num("udp-port"));
  const sockaddr_in denied = Addr(a.Str("denied"), a.Num("denied-port"));
  const int m = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const int d = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (m < 0 || t < 0 || u < 0 || d < 0) Fail("socket", errno);
  if (connect(m, reinterpret_cast<const sockaddr*>(&model), sizeof(model)) !=
      0) {
    Fail("connect to the model (allowed)", errno);
  }
  if (connect(t, reinterpret_cast<const sockaddr*>(&tool), sizeof(tool)) !=
      0) {
    Fail("connect to the tool (allowed)", errno);
  }
  const char payload[] = "soak";
  if (sendto(u, payload, sizeof(payload), 0,
             reinterpret_cast<const sockaddr*>(&udp), sizeof(udp)) < 0) {
    Fail("send to the tool's UDP port (allowed)", errno);
  }
  if (connect(d, reinterpret_cast<const sockaddr*>(&denied),
              sizeof(denied)) == 0) {
    Fail("connect to the denied address: it was allowed", 0);
  }
  if (errno != EPERM) Fail("connect to the denied address", errno);
  dprintf(g_out, "ok\n");
  if (a.Has("hold")) {
    dprintf(g_out, "held\n");
    for (;;) pause();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s connect|deny|pipe|syscalls|dns|rollout --out FD ...\n", argv[0]);
    return 2;
  }
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0) continue;
    k = k.substr(2);
    if (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0) {
      a.values[k] = argv[++i];
    } else {
      a.values[k] = "";
    }
  }
  if (a.Has("out")) g_out = static_cast<int>(a.Num("out"));
  const std::string mode = argv[1];
  if (mode == "connect") return RunConnect(a);
  if (mode == "deny") return RunDeny(a);
  if (mode == "pipe") return RunPipe(a);
  if (mode == "syscalls") return RunSyscalls(a);
  if (mode == "dns") return RunDns(a);
  if (mode == "rollout") return RunRollout(a);
  dprintf(g_out, "error unknown mode %s\n", mode.c_str());
  return 2;
}
