// The DNS filter's added latency (issue 14): the same queries, at the same
// paced rate from the same 100 client sockets, sent once straight to an
// upstream server ("direct", the baseline) and once through the filter
// ("filter"), in alternating rounds of one run.
//
// The filter is the one sandboxes get (DnsFilterHost, as
// KernelEnforcement starts it): 100 real sandboxes, each a cgroup with the
// egress hooks attached, a DNS-filtered phase and its own filter target in
// 127.83.0.0/16 (EgressController::SetDnsTarget), and every allowed
// answer's addresses written into the sandbox's learned entries with
// EgressController::Learn before the answer is released. Each of the 100
// client sockets stands for one sandbox and sends to that sandbox's target
// (the address the kernel's connect/sendmsg hooks redirect its port-53
// queries to; the clients themselves run outside the sandboxes, so the
// redirect's own cost is not in these rows: the program costs below are).
// Every query is for a name its sandbox's policy allows (half exact names,
// half under a wildcard), so every query goes upstream. The upstream is a
// minimal responder in this process (one A record per name, an address of
// its own for each name): it answers both variants, so its own cost cancels
// out of the difference.
//
// Latency is from the moment a query is sent to the moment its answer is
// read, by one client thread that sleeps precisely (epoll_pwait2) between
// sends. Rows: the latency distribution of each variant (p50, p99), the
// per-round p50 and p99 differences (filter minus direct), the filter
// thread's CPU time per query, and the time of each Learn call (the insert
// the answer waits for).
//
// Then the connect cost of DNS filtering for a sandbox that has learned
// nothing: the kernel's run time per program (bpf_stats) for a worker's
// UDP connects and sends to an allowed address, in a sandbox whose phase
// filters DNS and in one with the same rules that does not.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/allowlist.h"
#include "bench/fillers.h"
#include "bench/host.h"
#include "bench/suites.h"
#include "bench/worker.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "dns/filter_server.h"
#include "dns/message.h"
#include "egress/egress_controller.h"
#include "sandbox/dns_filter_host.h"

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
bool MakeRealtime(pid_t tid) {
  sched_param param = {};
  param.sched_priority = 10;
  return ::sched_setscheduler(tid, SCHED_FIFO, &param) == 0;
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
      // One A record owned by the question's name (a pointer to it), an
      // address in 10.0.0.0/8 of the name's own (FNV-1a of its text), so
      // that each name learns an entry of its own.
      if (q->questions[0].type == dns::kTypeA && !q->edns) {
        uint32_t h = 2166136261u;
        for (char c : q->questions[0].name) {
          h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
        }
        out[7] = 1;  // ancount
        const char rr[] = {'\xc0',
                           12,
                           0,
                           1,
                           0,
                           1,
                           0,
                           0,
                           0,
                           60,
                           0,
                           4,
                           10,
                           static_cast<char>(h >> 16),
                           static_cast<char>(h >> 8),
                           static_cast<char>(h | 1)};
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
  double sent_per_s = 0;  // the rate actually sent (first to last send)
};

// Query k goes to sandbox k % 100 + 1; that sandbox's j-th query (j = k /
// 100) alternates between its exact name and 25 names under its wildcard.
std::string NameFor(int64_t k, int sandbox) {
  const int64_t j = k / kIdentities;
  return j % 2 == 0
             ? absl::StrCat("api.s", sandbox, ".bench.test")
             : absl::StrCat("x", j % 50, ".cdn.s", sandbox, ".bench.test");
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
  int64_t first_send = 0, last_send = 0;
  while (done < count && !g_interrupted) {
    int64_t now = NowNs();
    while (next < count && start + next * interval <= now) {
      const int s = static_cast<int>(next % kIdentities);
      sent[next] = NowNs();
      if (next == 0) first_send = sent[next];
      last_send = sent[next];
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
  if (next > 1 && last_send > first_send) {
    result.sent_per_s = static_cast<double>(next - 1) * 1e9 /
                        static_cast<double>(last_send - first_send);
  }
  return result;
}

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

// What the learn hook saw, written on the filter's thread and read by
// the suite between phases.
struct LearnLog {
  std::mutex mu;
  std::vector<double> call_us;  // one per Learn call
  int64_t entries = 0;
  int64_t errors = 0;
  std::string last_error;
};

// The verdicts the filter reported (its outcome callback).
struct OutcomeLog {
  std::mutex mu;
  std::map<std::string, int64_t> verdicts;
};

// The sandboxes' policy: the two names of sandbox i, TCP 443 each; no
// address rules (everything else is denied); answers may point into 10/8.
CompiledPhase DnsPhase(int i, const HostPort& upstream) {
  CompiledPhase p;
  p.name = "agent";
  p.access = v1::MODEL_ONLY;
  p.dns_filtered = true;
  p.name_rules = {{absl::StrCat("api.s", i, ".bench.test"),
                   {{L4::kTcp, 443, 443}},
                   "model"},
                  {absl::StrCat("*.cdn.s", i, ".bench.test"),
                   {{L4::kTcp, 443, 443}},
                   "allow"}};
  p.dns_upstreams = {upstream};
  // The scripted upstream answers in 10/8: private, which a name only a
  // wildcard allows may point at only where the phase grants it (rebinding).
  p.dns_answers_may_point_at = {*IpPrefix::Parse("10.0.0.0/8")};
  return p;
}

// The connect cost of DNS filtering, for a sandbox without learned
// entries: the same 10-rule allowlist with DNS filtering off and on, the
// worker's UDP connect()s and sendto()s to the allowed address (port
// other than 53) timed, and the kernel's run time per program, in
// alternating runs with run-time accounting on.
absl::Status MeasureConnectCost(const BenchOptions& o, EgressController& egress,
                                DnsFilterHost& filter, const HostPort& upstream,
                                Report* report) {
  absl::StatusOr<Listeners> l = ListenLoopback();
  if (!l.ok()) return l.status();
  constexpr const char* kProgs[] = {"sock_create", "connect4", "sendmsg4",
                                    "skb_egress"};
  constexpr const char* kVariants[] = {"dns off", "dns filtered"};
  std::optional<Cgroup> cg[2];
  for (int v = 0; v < 2; ++v) {
    absl::StatusOr<Cgroup> c = Cgroup::Create(
        absl::StrCat(o.cgroup_root, "/dns-connect-", v == 0 ? "off" : "on"));
    if (!c.ok()) return c.status();
    cg[v].emplace(*std::move(c));
    CompiledPhase phase = AllowlistPhase(10, l->tcp_port, l->udp_port);
    if (v == 1) {
      CompiledPhase names = DnsPhase(0, upstream);
      phase.dns_filtered = true;
      phase.name_rules = names.name_rules;
      phase.dns_upstreams = names.dns_upstreams;
    }
    absl::StatusOr<uint32_t> gen =
        egress.AddSandbox(cg[v]->fd(), cg[v]->ref(), phase);
    if (!gen.ok()) return gen.status();
    if (v == 1) {
      absl::StatusOr<HostPort> target =
          filter.AddSandbox(cg[v]->id(), {upstream}, nullptr);
      if (!target.ok()) return target.status();
      if (absl::Status s = egress.SetDnsTarget(cg[v]->id(), *target); !s.ok())
        return s;
      if (absl::Status s = filter.SetPhase(cg[v]->id(), phase, *gen); !s.ok())
        return s;
    }
  }
  absl::StatusOr<BpfStatsEnabled> stats = BpfStatsEnabled::Enable();
  if (!stats.ok()) {
    report->Note(absl::StrCat("dns: connect cost not measured: ",
                              stats.status().message()));
    return absl::OkStatus();
  }
  std::map<std::string, std::vector<double>> per_run[2], ops[2];
  std::map<std::string, std::vector<double>> diff;  // per round: on - off
  const int rounds = std::max(2, o.bpf_stats_runs * 2);
  for (int round = 0; round < rounds && !g_interrupted; ++round) {
    std::map<std::string, double> this_round[2];
    for (int i = 0; i < 2; ++i) {
      const int v = (i + round) % 2;
      std::map<std::string, ProgRunStats> before;
      for (const char* prog : kProgs) {
        absl::StatusOr<ProgRunStats> s = ReadProgRunStats(egress.prog_fd(prog));
        if (!s.ok()) return s.status();
        before[prog] = *s;
      }
      absl::StatusOr<Worker> w = Worker::Start(
          o.worker, cg[v]->fd(),
          {"connect", "--tcp-listen", absl::StrCat(l->tcp.get()), "--udp-sink",
           absl::StrCat(l->udp.get()), "--dst", kAllowedDst, "--tcp-port",
           absl::StrCat(l->tcp_port), "--udp-port", absl::StrCat(l->udp_port),
           "--batches", absl::StrCat(std::max(1, o.connect_batches / 3)),
           "--udp-batch", absl::StrCat(o.udp_connect_batch), "--send-batch",
           absl::StrCat(o.udp_send_batch), "--tcp-batch",
           absl::StrCat(o.tcp_batch)},
          {l->tcp.get(), l->udp.get()});
      if (!w.ok()) return w.status();
      absl::StatusOr<std::string> out = w->Finish();
      if (!out.ok()) {
        return absl::Status(
            out.status().code(),
            absl::StrCat(kVariants[v], " worker: ", out.status().message()));
      }
      absl::StatusOr<std::map<std::string, std::vector<double>>> samples =
          ParseSamples(*out);
      if (!samples.ok()) return samples.status();
      for (auto& [op, values] : *samples) {
        ops[v][op].insert(ops[v][op].end(), values.begin(), values.end());
      }
      for (const char* prog : kProgs) {
        absl::StatusOr<ProgRunStats> s = ReadProgRunStats(egress.prog_fd(prog));
        if (!s.ok()) return s.status();
        const uint64_t runs = s->run_cnt - before[prog].run_cnt;
        if (runs == 0) continue;
        const double ns =
            static_cast<double>(s->run_time_ns - before[prog].run_time_ns) /
            static_cast<double>(runs);
        per_run[v][prog].push_back(ns);
        this_round[v][prog] = ns;
      }
    }
    for (const char* prog : kProgs) {
      if (this_round[0].contains(prog) && this_round[1].contains(prog)) {
        diff[prog].push_back(this_round[1][prog] - this_round[0][prog]);
      }
    }
  }
  const std::vector<std::pair<std::string, int64_t>> params = {{"rules", 10},
                                                               {"learned", 0}};
  for (const char* prog : kProgs) {
    double off_median = 0;
    for (int v = 0; v < 2; ++v) {
      Row r;
      r.suite = "dns";
      r.name = absl::StrCat("bpf_run/", prog);
      r.params = params;
      r.variant = kVariants[v];
      r.unit = "ns/run";
      r.stats = Summarize(per_run[v][prog]);
      if (v == 0) {
        off_median = r.stats.median;
        r.note =
            "baseline: the same 10-rule allowlist, DNS not filtered; the "
            "worker's UDP connect()s, sendto()s and TCP connects to an "
            "allowed address (not port 53)";
      } else {
        r.baseline = "dns off";
        r.baseline_median = off_median;
        r.note =
            "DNS filtered (target set, reply hooks attached), nothing "
            "learned";
      }
      if (per_run[v][prog].empty()) r.note = "the program did not run";
      report->Add(std::move(r));
    }
    Row d;
    d.suite = "dns";
    d.name = absl::StrCat("bpf_run/", prog);
    d.params = params;
    d.variant = "filtered - off";
    d.unit = "ns/run";
    d.stats = Summarize(diff[prog]);
    d.note = "per round: DNS filtered minus DNS off, from runs back to back";
    report->Add(std::move(d));
  }
  for (const char* op : {"udp_connect", "udp_sendto"}) {
    double off_median = 0;
    for (int v = 0; v < 2; ++v) {
      Row r;
      r.suite = "dns";
      r.name = op;
      r.params = params;
      r.variant = kVariants[v];
      r.unit = "ns/op";
      r.stats = Summarize(ops[v][op]);
      if (v == 0) {
        off_median = r.stats.median;
      } else {
        r.baseline = "dns off";
        r.baseline_median = off_median;
      }
      report->Add(std::move(r));
    }
  }
  filter.RemoveSandbox(cg[1]->id());
  for (int v = 0; v < 2; ++v) egress.RemoveSandbox(cg[v]->id()).IgnoreError();
  return absl::OkStatus();
}

// End to end from inside a sandbox: a worker in a DNS-filtered sandbox
// looks a name up as glibc does (a fresh connected UDP socket per lookup)
// at 127.0.0.1:53, which the kernel redirects to the sandbox's filter
// target (connect4; the reply side shows 127.0.0.1:53 again, recvmsg4);
// the baseline is the same worker in a cgroup of no sandbox asking the
// upstream directly. Sequential lookups, alternating rounds; the worker runs
// under normal scheduling in both.
absl::Status MeasureFromSandbox(const BenchOptions& o, EgressController& egress,
                                DnsFilterHost& filter, const HostPort& upstream,
                                Report* report) {
  std::optional<Cgroup> plain, sb;
  for (auto [slot, name] : {std::pair{&plain, "dns-e2e-plain"},
                            std::pair{&sb, "dns-e2e-sandbox"}}) {
    absl::StatusOr<Cgroup> c =
        Cgroup::Create(absl::StrCat(o.cgroup_root, "/", name));
    if (!c.ok()) return c.status();
    slot->emplace(*std::move(c));
  }
  CompiledPhase phase = DnsPhase(0, upstream);
  absl::StatusOr<uint32_t> gen = egress.AddSandbox(sb->fd(), sb->ref(), phase);
  if (!gen.ok()) return gen.status();
  absl::StatusOr<HostPort> target =
      filter.AddSandbox(sb->id(), {upstream}, nullptr);
  if (!target.ok()) return target.status();
  if (absl::Status s = egress.SetDnsTarget(sb->id(), *target); !s.ok()) {
    return s;
  }
  if (absl::Status s = filter.SetPhase(sb->id(), phase, *gen); !s.ok()) {
    return s;
  }
  constexpr const char* kProgs[] = {"connect4", "recvmsg4", "sendmsg4"};
  std::vector<double> lat[2], d50, d99;
  std::map<std::string, std::vector<double>> per_run;
  int64_t lost[2] = {0, 0};
  const int rounds = std::max(2, o.dns_rounds);
  for (int round = 0; round < rounds && !g_interrupted; ++round) {
    double p50[2] = {0, 0}, p99[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const int v = (i + round) % 2;  // 0 direct, 1 through the filter
      std::optional<BpfStatsEnabled> stats;
      std::map<std::string, ProgRunStats> before;
      if (v == 1) {
        absl::StatusOr<BpfStatsEnabled> st = BpfStatsEnabled::Enable();
        if (st.ok()) {
          stats.emplace(*std::move(st));
          for (const char* prog : kProgs) {
            absl::StatusOr<ProgRunStats> r =
                ReadProgRunStats(egress.prog_fd(prog));
            if (r.ok()) before[prog] = *r;
          }
        }
      }
      absl::StatusOr<Worker> w =
          Worker::Start(o.worker, v == 0 ? plain->fd() : sb->fd(),
                        {"dns", "--dst", "127.0.0.1", "--port",
                         absl::StrCat(v == 0 ? upstream.port : 53), "--count",
                         absl::StrCat(o.dns_sandbox_lookups), "--gap-us", "200",
                         "--name", "api.s0.bench.test"},
                        {});
      if (!w.ok()) return w.status();
      absl::StatusOr<std::string> out = w->Finish();
      if (!out.ok()) {
        return absl::Status(
            out.status().code(),
            absl::StrCat(v == 0 ? "direct" : "sandbox",
                         " DNS worker: ", out.status().message()));
      }
      for (const auto& [prog, b] : before) {
        absl::StatusOr<ProgRunStats> r = ReadProgRunStats(egress.prog_fd(prog));
        if (r.ok() && r->run_cnt > b.run_cnt) {
          per_run[prog].push_back(
              static_cast<double>(r->run_time_ns - b.run_time_ns) /
              static_cast<double>(r->run_cnt - b.run_cnt));
        }
      }
      absl::StatusOr<std::map<std::string, std::vector<double>>> samples =
          ParseSamples(*out);
      if (!samples.ok()) return samples.status();
      std::vector<double> us;
      for (double ns : (*samples)["lookup"]) us.push_back(ns / 1e3);
      lost[v] += o.dns_sandbox_lookups - static_cast<int64_t>(us.size());
      Summary s = Summarize(us);
      p50[v] = s.median;
      p99[v] = s.p99;
      lat[v].insert(lat[v].end(), us.begin(), us.end());
    }
    d50.push_back(p50[1] - p50[0]);
    d99.push_back(p99[1] - p99[0]);
  }
  if (lat[0].empty() || lat[1].empty()) {
    return absl::InternalError("the in-sandbox DNS benchmark got no answer");
  }
  const std::vector<std::pair<std::string, int64_t>> params = {
      {"sandboxes", 1}, {"lookups", o.dns_sandbox_lookups}};
  Row base;
  base.suite = "dns";
  base.name = "sandbox_lookup";
  base.params = params;
  base.variant = "direct, no sandbox";
  base.unit = "us";
  base.tail = true;
  base.stats = Summarize(lat[0]);
  base.note = absl::StrFormat(
      "baseline: a worker in no sandbox, a fresh connected UDP socket per "
      "lookup straight to the upstream; %d rounds; %d unanswered",
      rounds, lost[0]);
  const double base_median = base.stats.median;
  Row filt = base;
  report->Add(std::move(base));
  filt.variant = "sandbox, redirected";
  filt.stats = Summarize(lat[1]);
  filt.baseline = "direct, no sandbox";
  filt.baseline_median = base_median;
  filt.note = absl::StrFormat(
      "the same worker in a DNS-filtered sandbox asking 127.0.0.1:53: the "
      "kernel redirects to the filter, which forwards and learns; %d "
      "unanswered",
      lost[1]);
  report->Add(std::move(filt));
  for (int k = 0; k < 2; ++k) {
    Row d;
    d.suite = "dns";
    d.name = k == 0 ? "sandbox_lookup_added_p50" : "sandbox_lookup_added_p99";
    d.params = params;
    d.variant = "redirected - direct";
    d.unit = "us";
    d.stats = Summarize(k == 0 ? d50 : d99);
    d.note = "per round: the redirected percentile minus the direct one";
    report->Add(std::move(d));
  }
  for (const char* prog : kProgs) {
    if (per_run[prog].empty()) continue;
    Row r;
    r.suite = "dns";
    r.name = absl::StrCat("bpf_run/", prog);
    r.params = params;
    r.variant = "dns lookups, redirected";
    r.unit = "ns/run";
    r.stats = Summarize(per_run[prog]);
    r.note =
        "the kernel's run time per program run while the sandboxed "
        "worker looked names up (the redirect and its reply side)";
    report->Add(std::move(r));
  }
  filter.RemoveSandbox(sb->id());
  egress.RemoveSandbox(sb->id()).IgnoreError();
  return absl::OkStatus();
}

}  // namespace

absl::Status RunDnsSuite(const BenchOptions& o, Report* report) {
  absl::StatusOr<std::unique_ptr<Responder>> upstream = Responder::Start();
  if (!upstream.ok()) return upstream.status();
  const HostPort upstream_at = (*upstream)->address();

  // Destroyed in reverse: the filter (whose learn hook uses the
  // controller) first, then the controller, then the cgroups.
  std::vector<Cgroup> cgroups;
  absl::StatusOr<std::unique_ptr<EgressController>> egress_or =
      EgressController::Create(BenchHost());
  if (!egress_or.ok()) return egress_or.status();
  std::unique_ptr<EgressController> egress = *std::move(egress_or);
  LearnLog learned;
  OutcomeLog outcomes;
  auto filter = std::make_unique<DnsFilterHost>(
      BenchHost()->slot(),
      [&](uint64_t id, uint32_t generation, std::vector<LearnedEntry> e) {
        const int64_t t0 = NowNs();
        absl::Status s = egress->Learn(id, generation, e);
        const int64_t t1 = NowNs();
        std::lock_guard<std::mutex> lock(learned.mu);
        learned.call_us.push_back(static_cast<double>(t1 - t0) / 1e3);
        learned.entries += static_cast<int64_t>(e.size());
        if (!s.ok()) {
          ++learned.errors;
          learned.last_error = std::string(s.message());
        }
        return s;
      });
  auto on_outcome = [&](const dns::QueryOutcome& q) {
    std::lock_guard<std::mutex> lock(outcomes.mu);
    ++outcomes.verdicts[dns::VerdictName(q.verdict)];
  };

  // The 100 sandboxes. The filter's thread starts with the first; it is
  // found as the thread that appeared then.
  std::vector<sockaddr_in> filtered;
  pid_t filter_tid = 0;
  for (int i = 1; i <= kIdentities; ++i) {
    absl::StatusOr<Cgroup> cg =
        Cgroup::Create(absl::StrCat(o.cgroup_root, "/dns-s", i));
    if (!cg.ok()) return cg.status();
    cgroups.push_back(*std::move(cg));
    const Cgroup& c = cgroups.back();
    const CompiledPhase phase = DnsPhase(i, upstream_at);
    absl::StatusOr<uint32_t> gen = egress->AddSandbox(c.fd(), c.ref(), phase);
    if (!gen.ok()) return gen.status();
    const std::vector<pid_t> before = ThreadIds();
    absl::StatusOr<HostPort> target =
        filter->AddSandbox(c.id(), {upstream_at}, on_outcome);
    if (!target.ok()) return target.status();
    if (i == 1) {
      std::vector<pid_t> after = ThreadIds(), added;
      std::set_difference(after.begin(), after.end(), before.begin(),
                          before.end(), std::back_inserter(added));
      if (added.size() == 1) filter_tid = added[0];
    }
    if (absl::Status s = egress->SetDnsTarget(c.id(), *target); !s.ok()) {
      return s;
    }
    if (absl::Status s = filter->SetPhase(c.id(), phase, *gen); !s.ok()) {
      return s;
    }
    sockaddr_in sin = {};
    sin.sin_family = AF_INET;
    std::memcpy(&sin.sin_addr, target->addr.bytes(), 4);
    sin.sin_port = htons(target->port);
    filtered.push_back(sin);
  }
  if (filter_tid == 0) {
    report->Note(
        "dns: the filter's thread was not found: its CPU time is "
        "not measured and it runs under normal scheduling");
  }

  // The client is this thread; restored on the way out.
  int old_policy = 0;
  sched_param old_param = {};
  pthread_getschedparam(pthread_self(), &old_policy, &old_param);
  bool realtime = false;
  if (o.dns_realtime) {
    realtime = MakeRealtime(pthread_self()) && filter_tid != 0 &&
               MakeRealtime(filter_tid) && (*upstream)->MakeRealtime();
    if (!realtime) {
      report->Note(
          absl::StrCat("dns: SCHED_FIFO refused (", std::strerror(errno),
                       "); measured under the machine's normal scheduling"));
    }
  }
  const std::string scheduling =
      realtime ? "; client, upstream and filter threads at SCHED_FIFO"
               : "; normal scheduling";
  auto filter_cpu_ns = [&]() -> int64_t {
    return filter_tid ? static_cast<int64_t>(ThreadCpuNs(filter_tid)) : 0;
  };

  std::vector<sockaddr_in> direct(kIdentities,
                                  Addr(0x7f000001, upstream_at.port));

  // One rate: rounds of (direct, filter), then the rows.
  auto measure = [&](int rate) -> absl::Status {
    // Query ids identify the query within a phase: at most 65,536.
    const int64_t count = std::min<int64_t>(
        60000, static_cast<int64_t>(rate) * o.dns_phase_ms / 1000);
    std::vector<double> all_direct, all_filter, d50, d99, cpu, upstream_cpu;
    std::vector<double> achieved;  // filter rounds' sent rate
    int64_t lost_direct = 0, lost_filter = 0;
    {
      std::lock_guard<std::mutex> lock(learned.mu);
      learned.call_us.clear();
      learned.entries = 0;
    }
    {
      std::lock_guard<std::mutex> lock(outcomes.mu);
      outcomes.verdicts.clear();
    }
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
          if (filter_tid) {
            cpu.push_back(static_cast<double>(filter_cpu_ns() - cpu0) / 1e3 /
                          static_cast<double>(std::max<size_t>(1, lat.size())));
          }
          lost_filter += r->lost;
          achieved.push_back(r->sent_per_s);
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
    std::string verdicts;
    {
      std::lock_guard<std::mutex> lock(outcomes.mu);
      for (const auto& [v, n] : outcomes.verdicts) {
        absl::StrAppend(&verdicts, verdicts.empty() ? "" : ", ", n, " ", v);
      }
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
        "through DnsFilterHost: 100 sandboxes (cgroups with the egress hooks, "
        "DNS filtered), each query to its sandbox's filter target, every "
        "name allowed and forwarded, each answer learned with "
        "EgressController::Learn first; sent at %.0f/s (median of rounds; "
        "offered %d/s); %d unanswered; verdicts: %s",
        Summarize(achieved).median, rate, lost_filter, verdicts);
    report->Add(std::move(filt));
    Row a50 = DnsRow("added_latency_p50", "filter - direct", rate, "us", d50);
    a50.note = "per round: the filter's p50 minus the direct p50";
    const double added50 = a50.stats.median;
    report->Add(std::move(a50));
    Row a99 = DnsRow("added_latency_p99", "filter - direct", rate, "us", d99);
    a99.note = "per round: the filter's p99 minus the direct p99";
    report->Add(std::move(a99));
    {
      std::lock_guard<std::mutex> lock(learned.mu);
      Row li = DnsRow("learn_insert", "EgressController::Learn", rate, "us",
                      learned.call_us);
      li.tail = true;
      if (added50 > 0) {
        li.baseline = "added p50";
        li.baseline_median = added50;
      }
      li.note = absl::StrFormat(
          "per allowed answer, before it is released: %.1f entries per call "
          "(address x protocol), merged into the sandbox's learned map; %d "
          "errors%s%s",
          learned.call_us.empty()
              ? 0.0
              : static_cast<double>(learned.entries) /
                    static_cast<double>(learned.call_us.size()),
          learned.errors, learned.errors ? ", last: " : "", learned.last_error);
      report->Add(std::move(li));
    }
    Row uc = DnsRow("cpu_per_query", "upstream", rate, "us", upstream_cpu);
    uc.note =
        "for scale: the upstream responder's CPU time per answer (two system "
        "calls and a parse), in the direct rounds";
    const double uc_median = uc.stats.median;
    report->Add(std::move(uc));
    if (!cpu.empty()) {
      Row c = DnsRow("cpu_per_query", "filter", rate, "us", cpu);
      c.baseline = "upstream";
      c.baseline_median = uc_median;
      c.note =
          "per round: the filter thread's CPU time over the answers it gave "
          "(receive, judge, a fresh upstream socket, learn, reply)";
      report->Add(std::move(c));
    }
    return absl::OkStatus();
  };
  absl::Status status;
  for (int rate : o.dns_rates) {
    if (g_interrupted) break;
    status = measure(rate);
    if (!status.ok()) break;
  }
  pthread_setschedparam(pthread_self(), old_policy, &old_param);
  if (status.ok()) {
    size_t held = 0;
    for (const Cgroup& c : cgroups) {
      absl::StatusOr<size_t> n = egress->LearnedCount(c.id());
      if (n.ok()) held += *n;
    }
    report->Note(absl::StrCat("dns: ", held,
                              " learned addresses held by the 100 sandboxes "
                              "at the end"));
    if (!g_interrupted) {
      status = MeasureFromSandbox(o, *egress, *filter, upstream_at, report);
    }
    if (status.ok() && !g_interrupted) {
      status = MeasureConnectCost(o, *egress, *filter, upstream_at, report);
    }
  }
  filter.reset();
  for (const Cgroup& c : cgroups) egress->RemoveSandbox(c.id()).IgnoreError();
  return status;
}

}  // namespace sandfence::bench
