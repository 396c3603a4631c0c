#include "daemon/daemon_server.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "daemon/grpc_service.h"
#include "daemon/log.h"
#include "daemon/metrics_server.h"

namespace sandfence {
absl::Status RunDaemon(const DaemonOptions& options) {
  if (::geteuid() != 0) {
    return absl::PermissionDeniedError(
        "sandfence daemon needs root: it loads BPF programs and manages "
        "cgroups");
  }
  // The signals are handled by sigwait below, so every thread (gRPC's
  // included, created later) must have them blocked.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // Root only: the socket's directory is 0700 when we make it, and the
  // socket itself 0600 (umask at bind, chmod after).
  const std::string& path = options.socket_path;
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("create ", dir));
    }
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, absl::StrCat("remove stale socket ", path));
  }

  absl::StatusOr<std::unique_ptr<RolloutManager>> manager =
      RolloutManager::Create(options.manager);
  if (!manager.ok()) return manager.status();
  std::vector<std::string> adopted = (*manager)->AdoptAndStart();
  if (!adopted.empty()) {
    LogInfo("adopted %d rollouts from an earlier daemon: %s", adopted.size(),
            absl::StrJoin(adopted, ", "));
  }

  SandfenceService service(manager->get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", path),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(4 << 20);
  mode_t old_mask = ::umask(0177);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ::umask(old_mask);
  if (!server) {
    return Unavailable(absl::StrCat("cannot listen on unix:", path));
  }
  if (::chmod(path.c_str(), 0600) != 0) {
    return ErrnoError(errno, absl::StrCat("chmod ", path));
  }

  std::unique_ptr<MetricsServer> metrics;
  if (options.metrics_port != 0) {
    RolloutManager* m = manager->get();
    absl::StatusOr<std::unique_ptr<MetricsServer>> started =
        MetricsServer::Start(options.metrics_port,
                             [m] { return RenderMetrics(m->Metrics()); });
    if (!started.ok()) return started.status();
    metrics = *std::move(started);
    LogInfo("metrics on http://127.0.0.1:%d/metrics", metrics->port());
  }
  LogInfo("serving on unix:%s (records in %s, pins in %s)", path,
          options.manager.records_dir,
          options.manager.pin_dir.empty() ? "(none)" : options.manager.pin_dir);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  LogInfo(
      "signal %d: stopping; open rollouts stay enforced for the next "
      "daemon",
      sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  metrics.reset();
  manager->reset();
  ::unlink(path.c_str());
  LogInfo("stopped");
  return absl::OkStatus();
}

}  // namespace sandfence
