// A Prometheus text endpoint (127.0.0.1 unless told otherwise): GET
// anything, get the metrics. Deliberately tiny: one thread, one connection
// at a time.
#ifndef SANDFENCE_DAEMON_METRICS_SERVER_H_
#define SANDFENCE_DAEMON_METRICS_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/ip.h"
#include "common/unique_fd.h"
#include "daemon/rollout_manager.h"

namespace sandfence {

struct MetricsOptions {
  // Label the per-rollout series (DNS) with rollout="ID". Off, they are
  // summed over the rollouts: 23 series for each rollout that filters DNS
  // grow a Prometheus without bound on a host that runs many (issue 38).
  bool per_rollout = false;
};

// The unary calls' pool (daemon/call_pool.h): a saturated daemon refuses
// calls, and an operator must see it before the callers' retries do.
struct CallMetrics {
  uint64_t in_flight = 0;  // running or waiting now
  uint64_t refused = 0;    // refused as busy since the daemon started
  uint64_t capacity = 0;   // workers + queue
};

// The Prometheus text exposition of the manager's metrics and the calls'.
std::string RenderMetrics(const ManagerMetrics& m,
                          const MetricsOptions& options = {},
                          const CallMetrics& calls = {});

// "http://127.0.0.1:PORT/metrics", "http://[::1]:PORT/metrics": what the
// daemon logs (tests read the port from it).
std::string MetricsUrl(const IpAddress& address, uint16_t port);

class MetricsServer {
 public:
  // Listens on address:port (0: any free port; see port()).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const IpAddress& address, uint16_t port,
      std::function<std::string()> render);
  ~MetricsServer();

  uint16_t port() const { return port_; }

 private:
  MetricsServer() = default;
  void Loop();

  UniqueFd listener_;
  uint16_t port_ = 0;
  std::function<std::string()> render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_METRICS_SERVER_H_
