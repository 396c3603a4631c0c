#include "daemon/daemon_server.h"

#include <fcntl.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "daemon/grpc_service.h"
#include "daemon/log.h"
#include "daemon/metrics_server.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

namespace sandfence {
namespace {

constexpr char kRefusal[] =
    "sandfence refuses calls from inside a sandbox: a sandboxed process may "
    "not reconfigure its own enforcement";

// Every method of a connection from inside a sandbox: PERMISSION_DENIED.
class RefuseAll : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext*) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() {
        Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, kRefusal));
      }
      void OnDone() override { delete this; }
    };
    return new Reactor;
  }
};

// The peer of a connected Unix socket, as a pid this process can name: 0
// when it cannot be told (a peer in a pid namespace we do not see).
pid_t PeerPid(int fd, UniqueFd* pidfd) {
  // A pidfd pins the peer's identity: its pid cannot be reused while we
  // look at it (Linux 6.5+).
  int raw = -1;
  socklen_t len = sizeof(raw);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &raw, &len) == 0 && raw >= 0) {
    pidfd->reset(raw);
  }
  ucred cred{};
  len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.pid;
}

// Our accept loop in front of gRPC: every connection is judged by its
// peer's cgroup before a byte of it is read, and one from inside any
// sandbox goes to a server that refuses everything.
class Acceptor {
 public:
  Acceptor(RolloutManager* manager, int listen_fd, grpc::Server* serve,
           grpc::Server* refuse)
      : manager_(manager),
        listen_fd_(listen_fd),
        serve_(serve),
        refuse_(refuse) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) == 0) {
      stop_read_.reset(p[0]);
      stop_write_.reset(p[1]);
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~Acceptor() {
    (void)!::write(stop_write_.get(), "x", 1);
    thread_.join();
  }

 private:
  void Loop() {
    for (;;) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_read_.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        LogError("accept loop: poll: %s", std::strerror(errno));
        return;
      }
      if (fds[1].revents) return;
      // Non-blocking: gRPC reads it from its own threads.
      int fd = ::accept4(listen_fd_, nullptr, nullptr,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) continue;
      UniqueFd pidfd;
      const pid_t pid = PeerPid(fd, &pidfd);
      bool inside = pid <= 0 || manager_->InsideSandbox(pid);
      // The peer must still be the process judged.
      if (pidfd && ::syscall(SYS_pidfd_send_signal, pidfd.get(), 0, nullptr,
                             0) != 0) {
        inside = true;
      }
      if (inside) {
        manager_->CountRefusedCall();
        LogWarning("refused a connection from pid %d: %s", pid,
                   pid <= 0 ? "its process cannot be identified"
                            : "it is inside a sandbox");
        grpc::AddInsecureChannelFromFd(refuse_, fd);
      } else {
        grpc::AddInsecureChannelFromFd(serve_, fd);
      }
    }
  }

  RolloutManager* manager_;
  int listen_fd_;
  grpc::Server* serve_;
  grpc::Server* refuse_;
  UniqueFd stop_read_, stop_write_;
  std::thread thread_;
};

// Opens the socket's directory to the group (search only), when it is a
// directory only root can enter: /run/sandfence, not /tmp or /run, whose
// modes already let the group through and are not the daemon's to change.
absl::Status OpenDirectoryToGroup(const std::string& dir, gid_t group) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    return ErrnoError(errno, absl::StrCat("stat ", dir));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != 0) {
    return Rejected(absl::StrCat("--socket-group: the socket's directory ", dir,
                                 " is not a directory owned by root"));
  }
  if ((st.st_mode & 0077) != 0 && st.st_gid != group) return absl::OkStatus();
  if (::chown(dir.c_str(), 0, group) != 0 || ::chmod(dir.c_str(), 0710) != 0) {
    return ErrnoError(errno, absl::StrCat("open ", dir, " to the group"));
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> Listen(const std::string& path,
                                std::optional<gid_t> group) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return Malformed(absl::StrCat("socket path ", path, " is too long"));
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError(errno, "socket");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  // Root only: the socket is 0600 from the moment it exists.
  const mode_t old_mask = ::umask(0177);
  const int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr),
                        sizeof(addr));
  ::umask(old_mask);
  if (rc != 0) return ErrnoError(errno, absl::StrCat("bind ", path));
  // The group's only after it owns it: no one else can connect in between.
  if (group.has_value() &&
      (::chown(path.c_str(), 0, *group) != 0 || ::chmod(path.c_str(), 0660) != 0)) {
    return ErrnoError(errno, absl::StrCat("give ", path, " to its group"));
  }
  if (::listen(fd.get(), 128) != 0) {
    return ErrnoError(errno, absl::StrCat("listen ", path));
  }
  return fd;
}

// Tells systemd (Type=notify) that the socket serves: a client that connects
// after `systemctl start` returns finds it.
void NotifyReady() {
  const char* socket_path = std::getenv("NOTIFY_SOCKET");
  if (socket_path == nullptr || socket_path[0] == '\0') return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t len = std::strlen(socket_path);
  if (len >= sizeof(addr.sun_path)) return;
  std::memcpy(addr.sun_path, socket_path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return;
  constexpr char kReady[] = "READY=1";
  ::sendto(fd.get(), kReady, sizeof(kReady) - 1, 0,
           reinterpret_cast<sockaddr*>(&addr),
           static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len));
}

}  // namespace

namespace {

void RaiseFdLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      LogWarning("could not raise RLIMIT_NOFILE to %d: %s",
                 static_cast<long long>(limit.rlim_max), std::strerror(errno));
    }
  }
}

// One daemon per socket, whatever its state directory: `<socket>.lock`,
// held (flock) for as long as the daemon serves and holding its pid. A
// second daemon refuses before it touches the socket (it once unlinked and
// rebound a live daemon's socket, and removed it on exit, leaving the
// first running but unreachable).
absl::StatusOr<UniqueFd> LockSocket(const std::string& socket_path) {
  const std::string path = absl::StrCat(socket_path, ".lock");
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                     0600));
  if (!fd) return ErrnoError(errno, absl::StrCat("open ", path));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) {
      return ErrnoError(err, absl::StrCat("lock ", path));
    }
    char buf[32] = {};
    const ssize_t n = ::pread(fd.get(), buf, sizeof(buf) - 1, 0);
    const std::string pid =
        n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
    return Unavailable(absl::StrCat(
        "another sandfence daemon (pid ", absl::StripAsciiWhitespace(pid),
        ") serves ", socket_path, " (", path,
        " is locked); stop it, or give this one another --socket"));
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd.get(), 0) != 0 ||
      ::pwrite(fd.get(), pid.data(), pid.size(), 0) !=
          static_cast<ssize_t>(pid.size())) {
    return ErrnoError(errno, absl::StrCat("write ", path));
  }
  return fd;
}

}  // namespace

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
  // Every sandbox holds a link fd per hook (8): at systemd's default soft
  // limit of 1,024 a daemon would stop near 120 rollouts. The hard limit is
  // what the host allows; nothing here uses select().
  RaiseFdLimit();

  // The socket's lock first, then the state directory's (the manager): a
  // second daemon stops before it touches the running one's socket or
  // state, whichever it shares.
  const std::string& path = options.socket_path;
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("create ", dir));
    }
    if (options.socket_group.has_value()) {
      if (absl::Status s = OpenDirectoryToGroup(dir, *options.socket_group);
          !s.ok()) {
        return s;
      }
    }
  }
  absl::StatusOr<UniqueFd> socket_lock = LockSocket(path);
  if (!socket_lock.ok()) return socket_lock.status();

  // The event stream first: refusals and adoptions are lines too.
  absl::StatusOr<std::shared_ptr<events::EventStream>> stream =
      events::EventStream::Open(options.events);
  if (!stream.ok()) return stream.status();
  ManagerOptions manager_options = options.manager;
  manager_options.events = *stream;
  absl::StatusOr<std::unique_ptr<RolloutManager>> manager =
      RolloutManager::Create(manager_options);
  if (!manager.ok()) return manager.status();
  // A root agent holding the lock would keep every later daemon out.
  if (absl::Status s = (*manager)->Protect(absl::StrCat(path, ".lock"));
      !s.ok()) {
    return s;
  }

  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, absl::StrCat("remove stale socket ", path));
  }
  absl::StatusOr<UniqueFd> listen_fd = Listen(path, options.socket_group);
  if (!listen_fd.ok()) return listen_fd.status();
  if (absl::Status s = (*manager)->Protect(path); !s.ok()) return s;

  std::vector<std::string> adopted = (*manager)->AdoptAndStart();
  if (!adopted.empty()) {
    LogInfo("adopted %d rollouts from an earlier daemon: %s", adopted.size(),
            absl::StrJoin(adopted, ", "));
  }
  // Where `sandfence enter --rollout` hands over its socket calls.
  if (absl::Status s =
          (*manager)->ServeSupervision(SupervisionSocketPath(path));
      !s.ok()) {
    return s;
  }

  SandfenceService service(manager->get(), options.watch_queue);
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(4 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  RefuseAll refuse_all;
  grpc::ServerBuilder refuse_builder;
  refuse_builder.RegisterCallbackGenericService(&refuse_all);
  std::unique_ptr<grpc::Server> refuser = refuse_builder.BuildAndStart();
  if (!server || !refuser) {
    return Unavailable(absl::StrCat("cannot serve on unix:", path));
  }
  auto acceptor = std::make_unique<Acceptor>(
      manager->get(), listen_fd->get(), server.get(), refuser.get());

  std::unique_ptr<MetricsServer> metrics;
  if (options.metrics_port.has_value()) {
    RolloutManager* m = manager->get();
    const MetricsOptions metrics_options = options.metrics;
    absl::StatusOr<std::unique_ptr<MetricsServer>> started =
        MetricsServer::Start(options.metrics_address, *options.metrics_port,
                             [m, metrics_options, &service] {
                               return RenderMetrics(m->Metrics(),
                                                    metrics_options,
                                                    service.call_metrics());
                             });
    if (!started.ok()) return started.status();
    metrics = *std::move(started);
    LogInfo("metrics on %s%s",
            MetricsUrl(options.metrics_address, metrics->port()),
            options.metrics.per_rollout ? " (labelled by rollout)" : "");
  }
  LogInfo("serving on unix:%s (records in %s, pins in %s)", path,
          options.manager.records_dir,
          options.manager.pin_dir.empty() ? "(none)" : options.manager.pin_dir);
  NotifyReady();

  int sig = 0;
  sigwait(&stop_signals, &sig);
  LogInfo(
      "signal %d: stopping; open rollouts stay enforced for the next "
      "daemon",
      sig);
  acceptor.reset();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  refuser->Shutdown(std::chrono::system_clock::now());
  metrics.reset();
  manager->reset();
  ::unlink(path.c_str());
  LogInfo("stopped");
  return absl::OkStatus();
}

}  // namespace sandfence
