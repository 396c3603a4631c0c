#include "daemon/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace sandfence {

std::string RenderMetrics(const ManagerMetrics& m) {
  std::string out;
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
  metric("sandfence_events_lost", "gauge",
         "Kernel events lost (ring buffer full) in open rollouts.", "",
         m.events_lost);
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
  return out;
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    uint16_t port, std::function<std::string()> render) {
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->render_ = std::move(render);
  s->listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s->listener_) return ErrnoError(errno, "metrics socket");
  int one = 1;
  ::setsockopt(s->listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // never beyond the host
  addr.sin_port = htons(port);
  if (::bind(s->listener_.get(), reinterpret_cast<sockaddr*>(&addr),
             sizeof(addr)) != 0) {
    return ErrnoError(errno, absl::StrCat("bind 127.0.0.1:", port));
  }
  if (::listen(s->listener_.get(), 16) != 0) {
    return ErrnoError(errno, "listen");
  }
  socklen_t len = sizeof(addr);
  ::getsockname(s->listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  s->port_ = ntohs(addr.sin_port);
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
