// `sandfence daemon`: the RolloutManager served over gRPC on a root-only
// Unix socket, until SIGTERM or SIGINT.
#ifndef SANDFENCE_DAEMON_DAEMON_SERVER_H_
#define SANDFENCE_DAEMON_DAEMON_SERVER_H_

#include <netinet/in.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/ip.h"
#include "daemon/metrics_server.h"
#include "daemon/rollout_manager.h"
#include "events/event_stream.h"

namespace sandfence {

inline constexpr char kDefaultSocketPath[] = "/run/sandfence/sandfence.sock";

struct DaemonOptions {
  ManagerOptions manager;
  std::string socket_path = kDefaultSocketPath;
  // `--socket-group`: the socket is root:GROUP 0660 (and a root-private
  // directory of it root:GROUP 0710), so that a non-root framework in that
  // group can call the daemon. Calls from inside sandboxes stay refused,
  // whoever makes them. Unset: root only (0600).
  std::optional<gid_t> socket_group;
  // Prometheus endpoint on metrics_address; none = off, 0 = a free port
  // the kernel picks (the log names it).
  std::optional<uint16_t> metrics_port;
  // Loopback by default: the metrics name rollouts (with per_rollout) and
  // count denials, for the host's scraper, not for the network.
  IpAddress metrics_address = IpAddress::V4(INADDR_LOOPBACK);
  MetricsOptions metrics;
  // Events held per WatchEvents caller before a slow one misses some.
  size_t watch_queue = 65536;
  // `--events-out` (path "" = no file; the stream still feeds the
  // watchers of `watch --json`).
  events::StreamOptions events;
};

// Blocks until SIGTERM or SIGINT; open rollouts then stay enforced (pinned)
// for the next daemon. Errors: the daemon could not start.
absl::Status RunDaemon(const DaemonOptions& options);

}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_DAEMON_SERVER_H_
