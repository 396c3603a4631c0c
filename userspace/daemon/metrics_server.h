// A Prometheus text endpoint on a loopback port: GET anything, get the
// metrics. Deliberately tiny: one thread, one connection at a time.
#ifndef SANDFENCE_DAEMON_METRICS_SERVER_H_
#define SANDFENCE_DAEMON_METRICS_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "daemon/rollout_manager.h"

namespace sandfence {

// The Prometheus text exposition of the manager's metrics.
std::string RenderMetrics(const ManagerMetrics& m);

class MetricsServer {
 public:
  // Listens on 127.0.0.1:port (0: any free port; see port()).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      uint16_t port, std::function<std::string()> render);
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
