// The DNS filter's added latency (issue 14): the same queries, at the same
// paced rate from the same 100 client sockets, sent once straight to an
// upstream server ("direct", the baseline) and once through the filter
// ("filter"), in alternating rounds of one run.
//
// Each of the 100 sockets stands for one sandbox: through the filter it
// sends to its own 127.0.0.<i> (the per-sandbox address design.md
// proposes), and the filter tells the sandboxes apart by that destination
// (IP_PKTINFO) on one listening socket. Every query is for a name its
// sandbox's policy allows (half exact names, half under a wildcard), so
// every query goes upstream; the learn hook writes each answer's address
// into a BPF hash map, as the egress controller's will. The upstream is a
// minimal responder in this process (one A record per name): it answers both
// variants, so its own cost cancels out of the difference.
//
// Latency is from the moment a query is sent to the moment its answer is
// read, by one client thread that sleeps precisely (epoll_pwait2) between
// sends. Rows: the latency distribution of each variant (p50, p99), and the
// per-round p50 and p99 differences (filter minus direct), and the filter
// thread's CPU time per query.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/suites.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "dns/filter_server.h"
#include "dns/message.h"

namespace sandfence::bench {
namespace {

constexpr int kIdentities = 100;

int64_t NowNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

sockaddr_in Addr(uint32_t host_order, uint16_t port) {
  sockaddr_in sin = {};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(host_order);
  sin.sin_port = htons(port);
  return sin;
}

// The machine is shared (bench/README.md): with other work runnable, every
// wakeup of a thread waits its turn on the CPU, and the filter's path has
// two more wakeups than the direct one. With `realtime`, the three threads
// that take part (client, upstream, filter) run SCHED_FIFO, ahead of the
// other load, so that what is measured is the filter's own cost; both
// variants run so. False (and a note) where the kernel refuses.
bool MakeRealtime(pthread_t thread) {
  sched_param param = {};
  param.sched_priority = 10;
  return pthread_setschedparam(thread, SCHED_FIFO, &param) == 0;
}

// The upstream: answers every A query with one record, on its own thread.
class Responder {
 public:
  static absl::StatusOr<std::unique_ptr<Responder>> Start() {
    auto r = std::make_unique<Responder>();
    r->fd_ = UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in sin = Addr(0x7f000001, 0);
    if (!r->fd_ || ::bind(r->fd_.get(), reinterpret_cast<sockaddr*>(&sin),
                          sizeof(sin)) != 0) {
      return ErrnoError(errno, "bind the bench's DNS responder");
    }
    socklen_t len = sizeof(sin);
    ::getsockname(r->fd_.get(), reinterpret_cast<sockaddr*>(&sin), &len);
    r->port_ = ntohs(sin.sin_port);
    timeval tv = {0, 100000};
    ::setsockopt(r->fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int buf = 4 << 20;
    ::setsockopt(r->fd_.get(), SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    r->thread_ = std::thread([p = r.get()] { p->Serve(); });
    return r;
  }
  ~Responder() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  HostPort address() const { return {IpAddress::V4(0x7f000001), port_}; }
  bool MakeRealtime() {
    return ::sandfence::bench::MakeRealtime(thread_.native_handle());
  }
  // The responder thread's CPU time so far.
  int64_t cpu_ns() {
    clockid_t clock;
    timespec ts = {};
    if (pthread_getcpuclockid(thread_.native_handle(), &clock) == 0) {
      ::clock_gettime(clock, &ts);
    }
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  }

 private:
  void Serve() {
    char buf[2048];
    while (!stop_) {
      sockaddr_storage from;
      socklen_t len = sizeof(from);
      const ssize_t n = ::recvfrom(fd_.get(), buf, sizeof(buf), 0,
                                   reinterpret_cast<sockaddr*>(&from), &len);
      if (n <= 0) continue;
      absl::StatusOr<dns::Message> q =
          dns::ParseMessage(absl::string_view(buf, static_cast<size_t>(n)));
      if (!q.ok() || q->questions.size() != 1) continue;
      std::string out = dns::BuildResponse(*q, dns::Rcode::kNoError);
      // One A record owned by the question's name (a pointer to it).
      if (q->questions[0].type == dns::kTypeA && !q->edns) {
        out[7] = 1;  // ancount
        const char rr[] = {'\xc0', 12, 0, 1, 0,  1, 0, 0,
                           0,      60, 0, 4, 10, 0, 0, 1};
        out.append(rr, sizeof(rr));
      }
      ::sendto(fd_.get(), out.data(), out.size(), 0,
               reinterpret_cast<sockaddr*>(&from), len);
    }
  }

  UniqueFd fd_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct PhaseResult {
  std::vector<double> latency_us;
  int64_t lost = 0;
};

std::string NameFor(int64_t k, int sandbox) {
  return k % 2 == 0
             ? absl::StrCat("api.s", sandbox, ".bench.test")
             : absl::StrCat("x", k % 50, ".cdn.s", sandbox, ".bench.test");
}

// Sends `count` queries at `rate` per second round-robin over the 100
// sockets (socket i connected to dest(i)) and times each answer.
absl::StatusOr<PhaseResult> RunPhase(const std::vector<sockaddr_in>& dests,
                                     int rate, int64_t count) {
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  std::vector<UniqueFd> socks;
  for (int i = 0; i < kIdentities; ++i) {
    UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s || ::connect(s.get(), reinterpret_cast<const sockaddr*>(&dests[i]),
                        sizeof(dests[i])) != 0) {
      return ErrnoError(errno, "bench DNS client socket");
    }
    epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    ::epoll_ctl(ep.get(), EPOLL_CTL_ADD, s.get(), &ev);
    socks.push_back(std::move(s));
  }
  std::vector<std::string> queries;
  for (int64_t k = 0; k < count; ++k) {
    const int sandbox = static_cast<int>(k % kIdentities) + 1;
    std::string q;
    dns::Header h;
    h.id = static_cast<uint16_t>(k);
    h.flags = dns::kFlagRd;
    h.qdcount = 1;
    q.resize(dns::kHeaderSize);
    q[0] = static_cast<char>(h.id >> 8);
    q[1] = static_cast<char>(h.id & 0xff);
    q[2] = 0x01;
    q[5] = 1;
    absl::StatusOr<std::string> name = dns::NameWire(NameFor(k, sandbox));
    if (!name.ok()) return name.status();
    q += *name;
    q.append({0, 1, 0, 1});
    queries.push_back(std::move(q));
  }
  std::vector<int64_t> sent(count, 0);
  PhaseResult result;
  result.latency_us.reserve(count);
  const int64_t interval = 1000000000LL / rate;
  const int64_t start = NowNs() + 1000000;
  int64_t next = 0, done = 0;
  char buf[2048];
  int64_t drain_deadline = 0;
  while (done < count && !g_interrupted) {
    int64_t now = NowNs();
    while (next < count && start + next * interval <= now) {
      const int s = static_cast<int>(next % kIdentities);
      sent[next] = NowNs();
      (void)!::send(socks[s].get(), queries[next].data(), queries[next].size(),
                    0);
      ++next;
    }
    if (next == count && drain_deadline == 0) {
      drain_deadline = NowNs() + 1000000000LL;  // stragglers: 1 s
    }
    if (drain_deadline && NowNs() > drain_deadline) break;
    const int64_t wait =
        next < count ? std::max<int64_t>(0, start + next * interval - NowNs())
                     : 10000000;
    timespec ts = {wait / 1000000000, wait % 1000000000};
    epoll_event events[64];
    const int n = ::epoll_pwait2(ep.get(), events, 64, &ts, nullptr);
    for (int e = 0; e < n; ++e) {
      const int s = static_cast<int>(events[e].data.u32);
      for (;;) {
        const ssize_t r = ::recv(socks[s].get(), buf, sizeof(buf), 0);
        if (r < 12) break;
        const int64_t t = NowNs();
        const uint16_t id = static_cast<uint16_t>(
            (static_cast<uint8_t>(buf[0]) << 8) | static_cast<uint8_t>(buf[1]));
        // Ids are unique within a phase (count < 65536), k = id.
        if (id < count && sent[id] != 0) {
          result.latency_us.push_back(static_cast<double>(t - sent[id]) / 1e3);
          sent[id] = 0;
          ++done;
        }
      }
    }
  }
  result.lost = count - done;
  return result;
}

// A BPF hash map as the learn hook's target: what the egress controller
// will write for each learned address (the key's layout is illustrative).
struct LearnKey {
  uint64_t sandbox;
  uint8_t addr[16];
  uint16_t port;
  uint8_t proto;
  uint8_t pad[5];
};

Row DnsRow(std::string name, std::string variant, int rate, std::string unit,
           std::vector<double> samples) {
  Row r;
  r.suite = "dns";
  r.name = std::move(name);
  r.params = {{"rate", rate}, {"sandboxes", kIdentities}};
  r.variant = std::move(variant);
  r.unit = std::move(unit);
  r.stats = Summarize(std::move(samples));
  return r;
}

}  // namespace

absl::Status RunDnsSuite(const BenchOptions& o, Report* report) {
  absl::StatusOr<std::unique_ptr<Responder>> upstream = Responder::Start();
  if (!upstream.ok()) return upstream.status();

  const int map_fd =
      ::bpf_map_create(BPF_MAP_TYPE_HASH, "sf_bench_learn", sizeof(LearnKey),
                       sizeof(uint64_t), 1 << 16, nullptr);
  if (map_fd < 0) return ErrnoError(errno, "bpf_map_create for the learn hook");
  UniqueFd map(map_fd);
  std::atomic<int64_t> learn_errors{0};

  dns::FilterServerOptions options;
  options.forwarder.servers = {(*upstream)->address()};
  dns::FilterHooks hooks;
  hooks.identify =
      [](const dns::QueryOrigin& origin) -> std::optional<dns::SandboxId> {
    const uint8_t* b = origin.local.addr.bytes();
    if (!origin.local.addr.is_v4() || b[0] != 127 || b[1] != 0 || b[2] != 0 ||
        b[3] == 0 || b[3] > kIdentities) {
      return std::nullopt;
    }
    return b[3];
  };
  hooks.learn = [&](const dns::LearnRequest& r) {
    for (const dns::LearnedAddress& a : r.addresses) {
      for (const dns::NameGrant& g : r.grants) {
        LearnKey key = {};
        key.sandbox = r.sandbox;
        std::memcpy(key.addr, a.addr.bytes(), a.addr.is_v4() ? 4 : 16);
        key.port = g.port_first;
        key.proto = static_cast<uint8_t>(g.protocol);
        const uint64_t expires =
            static_cast<uint64_t>(absl::ToUnixNanos(a.expires));
        if (::bpf_map_update_elem(map.get(), &key, &expires, BPF_ANY) != 0) {
          ++learn_errors;
        }
      }
    }
    return absl::OkStatus();
  };
  absl::StatusOr<std::unique_ptr<dns::FilterServer>> server =
      dns::FilterServer::Create(options, hooks);
  if (!server.ok()) return server.status();
  absl::StatusOr<dns::ListenerId> listener =
      (*server)->ListenUdp({IpAddress::V4(0), 0});  // the bench's own netns
  if (!listener.ok()) return listener.status();
  const uint16_t filter_port = (*server)->local_address(*listener)->port;
  for (int i = 1; i <= kIdentities; ++i) {
    absl::StatusOr<dns::PhaseNameRules> rules =
        dns::PhaseNameRules::Build({{absl::StrCat("api.s", i, ".bench.test"),
                                     {{L4::kTcp, 443, 443}},
                                     "model"},
                                    {absl::StrCat("*.cdn.s", i, ".bench.test"),
                                     {{L4::kTcp, 443, 443}},
                                     "allow"}});
    if (!rules.ok()) return rules.status();
    auto policy = std::make_shared<dns::SandboxDnsPolicy>();
    policy->rules = *std::move(rules);
    policy->phase = "agent";
    (*server)->SetPolicy(static_cast<dns::SandboxId>(i), policy);
  }
  std::thread loop([&] { (void)(*server)->Run(); });
  pthread_setname_np(loop.native_handle(), "sf-dns-filter");
  // The client is this thread; restored on the way out.
  int old_policy = 0;
  sched_param old_param = {};
  pthread_getschedparam(pthread_self(), &old_policy, &old_param);
  bool realtime = false;
  if (o.dns_realtime) {
    realtime = MakeRealtime(pthread_self()) &&
               MakeRealtime(loop.native_handle()) &&
               (*upstream)->MakeRealtime();
    if (!realtime) {
      report->Note(
          absl::StrCat("dns: SCHED_FIFO refused (", std::strerror(errno),
                       "); measured under the machine's normal scheduling"));
    }
  }
  const std::string scheduling =
      realtime ? "; client, upstream and filter threads at SCHED_FIFO"
               : "; normal scheduling";
  clockid_t filter_clock;
  pthread_getcpuclockid(loop.native_handle(), &filter_clock);
  auto filter_cpu_ns = [&] {
    timespec ts;
    ::clock_gettime(filter_clock, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  };

  std::vector<sockaddr_in> direct(
      kIdentities, Addr(0x7f000001, (*upstream)->address().port));
  std::vector<sockaddr_in> filtered;
  for (int i = 1; i <= kIdentities; ++i) {
    filtered.push_back(
        Addr(0x7f000000 | static_cast<uint32_t>(i), filter_port));
  }

  // One rate: rounds of (direct, filter), then the rows.
  auto measure = [&](int rate) -> absl::Status {
    // Query ids identify the query within a phase: at most 65,536.
    const int64_t count = std::min<int64_t>(
        60000, static_cast<int64_t>(rate) * o.dns_phase_ms / 1000);
    std::vector<double> all_direct, all_filter, d50, d99, cpu, upstream_cpu;
    int64_t lost_direct = 0, lost_filter = 0;
    absl::Status status;
    for (int round = 0; round < o.dns_rounds && !g_interrupted; ++round) {
      // Per-round percentiles: [0] direct, [1] filter.
      double p50[2] = {0, 0}, p99[2] = {0, 0};
      // Alternate which variant goes first, so that drift favors neither.
      for (int v = 0; v < 2; ++v) {
        const bool through_filter = (round + v) % 2 == 1;
        const int64_t cpu0 = filter_cpu_ns();
        const int64_t up0 = (*upstream)->cpu_ns();
        absl::StatusOr<PhaseResult> r =
            RunPhase(through_filter ? filtered : direct, rate, count);
        if (!r.ok()) {
          status = r.status();
          break;
        }
        std::vector<double> lat = r->latency_us;
        if (through_filter) {
          cpu.push_back(static_cast<double>(filter_cpu_ns() - cpu0) / 1e3 /
                        static_cast<double>(std::max<size_t>(1, lat.size())));
          lost_filter += r->lost;
          all_filter.insert(all_filter.end(), lat.begin(), lat.end());
        } else {
          upstream_cpu.push_back(
              static_cast<double>((*upstream)->cpu_ns() - up0) / 1e3 /
              static_cast<double>(std::max<size_t>(1, lat.size())));
          lost_direct += r->lost;
          all_direct.insert(all_direct.end(), lat.begin(), lat.end());
        }
        Summary s = Summarize(lat);
        p50[through_filter] = s.median;
        p99[through_filter] = s.p99;
        if (v == 1) {
          d50.push_back(p50[1] - p50[0]);
          d99.push_back(p99[1] - p99[0]);
        }
      }
      if (!status.ok()) break;
    }
    if (!status.ok()) return status;
    if (all_direct.empty() || all_filter.empty()) {
      return absl::InternalError("the DNS benchmark measured no answer");
    }

    Row base = DnsRow("query_latency", "direct", rate, "us", all_direct);
    base.tail = true;
    base.note = absl::StrFormat(
        "baseline: the same queries straight to the upstream; %d rounds x %d "
        "queries; %d unanswered%s",
        o.dns_rounds, count, lost_direct, scheduling);
    const double base_median = base.stats.median;
    report->Add(std::move(base));
    Row filt = DnsRow("query_latency", "filter", rate, "us", all_filter);
    filt.tail = true;
    filt.baseline = "direct";
    filt.baseline_median = base_median;
    filt.note = absl::StrFormat(
        "through the filter: 100 sandboxes by destination address, every name "
        "allowed and forwarded, each answer learned into a BPF hash map "
        "first; %d unanswered, %d map write errors",
        lost_filter, learn_errors.load());
    report->Add(std::move(filt));
    Row a50 = DnsRow("added_latency_p50", "filter - direct", rate, "us", d50);
    a50.note = "per round: the filter's p50 minus the direct p50";
    report->Add(std::move(a50));
    Row a99 = DnsRow("added_latency_p99", "filter - direct", rate, "us", d99);
    a99.note = "per round: the filter's p99 minus the direct p99";
    report->Add(std::move(a99));
    Row uc = DnsRow("cpu_per_query", "upstream", rate, "us", upstream_cpu);
    uc.note =
        "for scale: the upstream responder's CPU time per answer (two system "
        "calls and a parse), in the direct rounds";
    const double uc_median = uc.stats.median;
    report->Add(std::move(uc));
    Row c = DnsRow("cpu_per_query", "filter", rate, "us", cpu);
    c.baseline = "upstream";
    c.baseline_median = uc_median;
    c.note =
        "per round: the filter thread's CPU time over the answers it gave "
        "(receive, judge, a fresh upstream socket, learn, reply)";
    report->Add(std::move(c));
    return absl::OkStatus();
  };
  absl::Status status;
  for (int rate : o.dns_rates) {
    if (g_interrupted) break;
    status = measure(rate);
    if (!status.ok()) break;
  }
  pthread_setschedparam(pthread_self(), old_policy, &old_param);
  (*server)->Stop();
  loop.join();
  return status;
}

}  // namespace sandfence::bench
