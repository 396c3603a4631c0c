#include "daemon/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "dns/filter_server.h"
#include "sandfence/version.h"

namespace sandfence {
namespace {

// A Prometheus label value: backslash, quote and newline escaped.
std::string LabelValue(absl::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string RolloutLabel(absl::string_view rollout_id) {
  return absl::StrCat("rollout=\"", LabelValue(rollout_id), "\"");
}

// "{a,b}" of the labels given ("" ones left out), or "" if none is.
std::string Labels(absl::string_view a, absl::string_view b = "") {
  if (a.empty() && b.empty()) return "";
  if (a.empty() || b.empty()) return absl::StrCat("{", a, b, "}");
  return absl::StrCat("{", a, ",", b, "}");
}

// The series of one DNS filter's counts (`rollout`: its rollout="ID"
// label), or of every filter's summed (`rollout` "").
void AppendDnsQueries(absl::string_view rollout, const DnsQueryStats& q,
                      std::string& out) {
  std::map<std::string, uint64_t> counts = q.by_verdict;
  // Every verdict the filter gives, zeros too, so that rates exist from the
  // start.
  for (dns::Verdict v :
       {dns::Verdict::kAllowed, dns::Verdict::kBlocked, dns::Verdict::kRefused,
        dns::Verdict::kMalformed, dns::Verdict::kNotServed,
        dns::Verdict::kUpstreamFailed, dns::Verdict::kLearnFailed,
        dns::Verdict::kRateLimited, dns::Verdict::kWouldBlock,
        dns::Verdict::kOverBudget, dns::Verdict::kRebinding}) {
    counts.try_emplace(dns::VerdictName(v), 0);
  }
  for (const auto& [verdict, n] : counts) {
    absl::StrAppend(
        &out, "sandfence_dns_queries_total",
        Labels(rollout, absl::StrCat("verdict=\"", LabelValue(verdict), "\"")),
        " ", n, "\n");
  }
}

void AppendDnsLatency(absl::string_view rollout, const DnsQueryStats& q,
                      std::string& out) {
  uint64_t cumulative = 0;
  for (size_t b = 0; b < q.latency_buckets.size(); ++b) {
    cumulative += q.latency_buckets[b];
    const std::string le =
        b < DnsQueryStats::kLatencyBounds.size()
            ? absl::StrFormat("%g", DnsQueryStats::kLatencyBounds[b])
            : "+Inf";
    absl::StrAppend(&out, "sandfence_dns_filter_latency_seconds_bucket",
                    Labels(rollout, absl::StrCat("le=\"", le, "\"")), " ",
                    cumulative, "\n");
  }
  absl::StrAppend(&out, "sandfence_dns_filter_latency_seconds_sum",
                  Labels(rollout), " ",
                  absl::StrFormat("%.9g", q.latency_sum_seconds), "\n",
                  "sandfence_dns_filter_latency_seconds_count", Labels(rollout),
                  " ", q.latency_count, "\n");
}

// The DNS filters' queries by verdict, the learned addresses held, and the
// filters' latency as a histogram (issue 14). Per open rollout that filters
// DNS when `per_rollout` (the series go when it ends); else summed over
// every rollout, ended ones included, always present.
void RenderDnsMetrics(const ManagerMetrics& m, bool per_rollout,
                      std::string& out) {
  if (per_rollout && m.dns.empty()) return;
  absl::StrAppend(
      &out,
      "# HELP sandfence_dns_queries_total DNS queries the rollouts' filters "
      "decided, by verdict (malformed: answered FORMERR; upstream_failed and "
      "learn_failed: SERVFAIL; rate_limited: dropped; over_budget and "
      "rebinding: REFUSED).\n"
      "# TYPE sandfence_dns_queries_total counter\n");
  if (per_rollout) {
    for (const ManagerMetrics::RolloutDns& d : m.dns) {
      AppendDnsQueries(RolloutLabel(d.rollout_id), d.queries, out);
    }
  } else {
    AppendDnsQueries("", m.dns_total, out);
  }
  absl::StrAppend(
      &out,
      "# HELP sandfence_dns_learned_addresses Addresses the open rollouts' "
      "DNS filters learned from allowed answers that the kernel holds now.\n"
      "# TYPE sandfence_dns_learned_addresses gauge\n");
  if (per_rollout) {
    for (const ManagerMetrics::RolloutDns& d : m.dns) {
      if (!d.learned) continue;
      absl::StrAppend(&out, "sandfence_dns_learned_addresses",
                      Labels(RolloutLabel(d.rollout_id)), " ", *d.learned,
                      "\n");
    }
  } else {
    absl::StrAppend(&out, "sandfence_dns_learned_addresses ",
                    m.dns_learned_total, "\n");
  }
  absl::StrAppend(
      &out,
      "# HELP sandfence_dns_filter_latency_seconds The DNS filters' time per "
      "query, from its first byte read to the reply sent (upstream and "
      "learning included).\n"
      "# TYPE sandfence_dns_filter_latency_seconds histogram\n");
  if (per_rollout) {
    for (const ManagerMetrics::RolloutDns& d : m.dns) {
      AppendDnsLatency(RolloutLabel(d.rollout_id), d.queries, out);
    }
  } else {
    AppendDnsLatency("", m.dns_total, out);
  }
}

}  // namespace

std::string RenderMetrics(const ManagerMetrics& m,
                          const MetricsOptions& options,
                          const CallMetrics& calls) {
  std::string out;
  // Which build answers: a dashboard can tell hosts apart during a rollout
  // of a new version.
  absl::StrAppend(
      &out,
      "# HELP sandfence_build_info The sandfence build serving: "
      "its version (as `sandfence version` prints it) and git "
      "commit (\"unknown\" if built outside a checkout).\n"
      "# TYPE sandfence_build_info gauge\n"
      "sandfence_build_info{version=\"",
      LabelValue(SANDFENCE_VERSION), "\",commit=\"",
      LabelValue(*SANDFENCE_GIT_COMMIT ? SANDFENCE_GIT_COMMIT : "unknown"),
      "\"} 1\n");
  auto metric = [&out](absl::string_view name, absl::string_view type,
                       absl::string_view help, absl::string_view labels,
                       uint64_t value, bool head = true) {
    if (head) {
      absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ",
                      type, "\n");
    }
    absl::StrAppend(&out, name, labels, " ", value, "\n");
  };
  metric("sandfence_rollouts_open", "gauge", "Rollouts open now.", "",
         m.rollouts_open);
  metric("sandfence_rollouts_started_total", "counter",
         "Rollouts started by this daemon.", "", m.rollouts_started);
  metric("sandfence_rollouts_ended_total", "counter",
         "Rollouts ended by this daemon.", "", m.rollouts_ended);
  metric("sandfence_rollouts_adopted_total", "counter",
         "Rollouts taken over from an earlier daemon.", "", m.rollouts_adopted);
  metric("sandfence_refusals_total", "counter",
         "StartRollout requests refused.", "", m.refusals);
  metric("sandfence_decisions_total", "counter",
         "Network decisions read from the kernel, by verdict.",
         "{verdict=\"allow\"}", m.decisions_allowed);
  metric("sandfence_decisions_total", "counter", "", "{verdict=\"deny\"}",
         m.decisions_denied, /*head=*/false);
  metric("sandfence_events_lost_total", "counter",
         "Kernel events lost (ring buffer full) in the rollouts this daemon "
         "served, ended ones included.",
         "", m.events_lost);
  metric("sandfence_event_decode_errors_total", "counter",
         "Kernel events that could not be decoded.", "", m.decode_errors);
  metric("sandfence_phase_switches_total", "counter", "Phase switches done.",
         "", m.phase_switches);
  metric("sandfence_watch_events_missed_total", "counter",
         "Events WatchEvents readers did not get because they read too "
         "slowly (each reader is told in its stream).",
         "", m.watch_events_missed);
  metric("sandfence_calls_refused_from_sandboxes_total", "counter",
         "Connections to the daemon from inside a sandbox, refused.", "",
         m.calls_refused_from_sandboxes);
  metric("sandfence_runs_reaped_total", "counter",
         "Sandboxes of dead `sandfence run`s ended by this daemon.", "",
         m.runs_reaped);
  metric("sandfence_calls_in_flight", "gauge",
         "Unary calls running or waiting in the daemon's pool now.", "",
         calls.in_flight);
  metric("sandfence_calls_capacity", "gauge",
         "Unary calls the pool takes at once (workers and queue); past it, "
         "calls are refused as UNAVAILABLE.",
         "", calls.capacity);
  metric("sandfence_calls_refused_busy_total", "counter",
         "Unary calls refused because the pool was full (UNAVAILABLE, "
         "retryable).",
         "", calls.refused);
  metric("sandfence_sandboxes_gone_total", "counter",
         "Open rollouts whose sandbox cgroup was removed without EndRollout, "
         "ended by the daemon (their records say so).",
         "", m.sandboxes_gone);
  metric("sandfence_audit_only_sandboxes", "gauge",
         "Open rollouts whose sandbox is in an audit-only phase now "
         "(enforce: AUDIT): nothing is denied there, what would be is "
         "recorded.",
         "", m.audit_only_sandboxes);
  RenderDnsMetrics(m, options.per_rollout, out);
  return out;
}

std::string MetricsUrl(const IpAddress& address, uint16_t port) {
  return absl::StrCat("http://", HostPort{address, port}.ToString(),
                      "/metrics");
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const IpAddress& address, uint16_t port,
    std::function<std::string()> render) {
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->render_ = std::move(render);
  s->listener_.reset(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s->listener_) return ErrnoError(errno, "metrics socket");
  int one = 1;
  ::setsockopt(s->listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (address.is_v4()) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    std::memcpy(&a->sin_addr, address.bytes(), 4);
    a->sin_port = htons(port);
    len = sizeof(sockaddr_in);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    std::memcpy(&a->sin6_addr, address.bytes(), 16);
    a->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
  }
  if (::bind(s->listener_.get(), reinterpret_cast<sockaddr*>(&addr), len) !=
      0) {
    return ErrnoError(errno, absl::StrCat("metrics: bind ",
                                          HostPort{address, port}.ToString()));
  }
  if (::listen(s->listener_.get(), 16) != 0) {
    return ErrnoError(errno, "listen");
  }
  ::getsockname(s->listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  s->port_ = ntohs(address.is_v4()
                       ? reinterpret_cast<sockaddr_in*>(&addr)->sin_port
                       : reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  MetricsServer* self = s.get();
  s->thread_ = std::thread([self] { self->Loop(); });
  return s;
}

MetricsServer::~MetricsServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void MetricsServer::Loop() {
  while (!stop_) {
    pollfd p{listener_.get(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) continue;
    // Read the request head (whatever it asks, the answer is the metrics).
    char buf[2048];
    pollfd c{conn.get(), POLLIN, 0};
    if (::poll(&c, 1, 1000) > 0) (void)!::read(conn.get(), buf, sizeof(buf));
    std::string body = render_();
    std::string reply = absl::StrFormat(
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
        "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
        body.size(), body);
    size_t done = 0;
    while (done < reply.size()) {
      ssize_t n = ::send(conn.get(), reply.data() + done, reply.size() - done,
                         MSG_NOSIGNAL);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
}

}  // namespace sandfence
