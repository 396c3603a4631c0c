// A real `sandfence daemon` child process on a temporary socket, with its
// own records, state, pin and cgroup directories, and a gRPC client to it.
#ifndef SANDFENCE_TESTS_DAEMON_DAEMON_FIXTURE_H_
#define SANDFENCE_TESTS_DAEMON_DAEMON_FIXTURE_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cgroup.h"
#include "common/unique_fd.h"
#include "egress/spawn.h"
#include "gtest/gtest.h"
#include "host/build_id.h"
#include "host/pin_layout.h"
#include "sandfence/v1/daemon.grpc.pb.h"

namespace sandfence::testing {

// Whether cond() holds within two minutes, asked every 5 ms: for what
// the daemon does after its reply (a switched phase's old generation is
// deleted by the controller's reaper once SetPhase has returned).
inline bool Eventually(const std::function<bool()>& cond) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The daemon's /metrics page from `address` (an IPv4 or IPv6 literal),
// or "connect: <error>".
inline std::string HttpGetMetrics(uint16_t port,
                                  const std::string& address = "127.0.0.1") {
  sockaddr_storage a{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(*v6);
  } else {
    return absl::StrCat("connect: not an address: ", address);
  }
  UniqueFd fd(socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&a), len) != 0) {
    return absl::StrCat("connect: ", strerror(errno));
  }
  const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
  (void)!write(fd.get(), req, sizeof(req) - 1);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd.get(), buf, sizeof(buf))) > 0) out.append(buf, n);
  return out;
}

// Where this build's set is pinned under a daemon's --pin-dir.
inline PinLayout PinsOf(const std::string& pin_dir) {
  return PinLayout(PinLayout::SetDir(pin_dir, BpfBuildId()));
}

inline std::string SandfenceBinary() {
  const char* env = getenv("SANDFENCE_BIN");
  return env ? env : SANDFENCE_BIN_PATH;
}

inline std::string NetProbe() {
  const char* env = getenv("SANDFENCE_NET_PROBE");
  return env ? env : SANDFENCE_NET_PROBE_PATH;
}

// Everything one daemon instance keeps, in directories of its own.
struct DaemonDirs {
  std::string root;     // temp dir: socket, records, state, log
  std::string pin_dir;  // on bpffs
  std::string cgroups;  // created sandboxes go here
  std::string socket() const { return root + "/sandfence.sock"; }
  std::string records() const { return root + "/records"; }
  std::string state() const { return root + "/state"; }
  std::string log() const { return root + "/daemon.log"; }
};

inline DaemonDirs MakeDaemonDirs(absl::string_view name) {
  static int counter = 0;
  DaemonDirs d;
  char tmpl[] = "/tmp/sandfence-daemon-test-XXXXXX";
  d.root = mkdtemp(tmpl);
  const std::string tag = absl::StrCat(name, "-", getpid(), "-", ++counter);
  d.pin_dir = absl::StrCat("/sys/fs/bpf/sandfence-test-", tag);
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  d.cgroups = absl::StrCat(mount.ok() ? *mount : "/sys/fs/cgroup",
                           "/sandfence-daemon-test-", tag);
  mkdir(d.cgroups.c_str(), 0755);
  return d;
}

// A loopback UDP port where nothing answers: a query gets ICMP port
// unreachable (ECONNREFUSED) at once. Held for the test process's life by a
// socket bound to it and connected elsewhere (127.0.0.1:9), so the kernel
// delivers it nothing from anyone else and no other process can take the
// port (a bound-then-closed port could be reused by then).
inline uint16_t ClosedUdpPort() {
  static uint16_t port = [] {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);  // kept open
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0)
        << strerror(errno);
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    const uint16_t bound = ntohs(a.sin_port);
    a.sin_port = htons(9);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0)
        << strerror(errno);
    return bound;
  }();
  return port;
}

class DaemonProcess {
 public:
  DaemonProcess(DaemonDirs dirs, std::vector<std::string> extra = {})
      : dirs_(std::move(dirs)), extra_(std::move(extra)) {}
  ~DaemonProcess() {
    Stop(SIGTERM);
    // Leave nothing behind: detach what is pinned, kill created sandboxes.
    std::string cmd = absl::StrCat(
        SandfenceBinary(), " daemon --cleanup --pin-dir ", dirs_.pin_dir,
        " --state-dir ", dirs_.state(), " >/dev/null 2>&1");
    (void)!system(cmd.c_str());
    rmdir(dirs_.cgroups.c_str());
    std::error_code ignored;
    std::filesystem::remove_all(dirs_.root, ignored);
  }

  const DaemonDirs& dirs() const { return dirs_; }
  pid_t pid() const { return pid_; }

  // Starts the daemon and waits until it answers Health.
  void Start() {
    std::vector<std::string> argv_strings = {
        SandfenceBinary(), "daemon", "--socket", dirs_.socket(),
        "--records-dir", dirs_.records(), "--state-dir", dirs_.state(),
        "--pin-dir", dirs_.pin_dir, "--cgroup-parent", dirs_.cgroups,
        // Names resolve only on loopback: a port where nothing listens, so
        // a name in a policy fails fast and retryably (never the host's
        // resolv.conf servers).
        "--resolver", absl::StrCat("127.0.0.1:", ClosedUdpPort())};
    argv_strings.insert(argv_strings.end(), extra_.begin(), extra_.end());
    // A socket left by a killed daemon would look like a ready one.
    unlink(dirs_.socket().c_str());
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(dirs_.log().c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& a : argv_strings) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // The socket appears once the programs are loaded and the server
    // listens; connecting earlier only earns reconnect backoff.
    for (int i = 0; i < 600; ++i) {
      struct stat st {};
      if (stat(dirs_.socket().c_str(), &st) == 0) break;
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL() << "the daemon exited at start; its log:\n" << Log();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // A daemon that is not up yet must not push the channel into long
    // reconnect backoffs.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 20);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
    channel_ =
        grpc::CreateCustomChannel(absl::StrCat("unix:", dirs_.socket()),
                                  grpc::InsecureChannelCredentials(), args);
    stub_ = v1::Sandfence::NewStub(channel_);
    // Ready when it answers (loading the programs takes a moment).
    for (int i = 0; i < 300; ++i) {
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL() << "the daemon exited at start; its log:\n" << Log();
      }
      grpc::ClientContext ctx;
      v1::HealthResponse h;
      if (stub_->Health(&ctx, {}, &h).ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "the daemon did not answer; its log:\n" << Log();
  }

  // Stops it with `sig` and reaps it.
  void Stop(int sig) {
    if (pid_ <= 0) return;
    // Close our connection first: the daemon's graceful shutdown waits for
    // open connections up to its deadline.
    stub_.reset();
    channel_.reset();
    kill(pid_, sig);
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  v1::Sandfence::Stub* stub() { return stub_.get(); }

  // The calls the tests make, one context each.
  grpc::Status Start(const v1::StartRolloutRequest& req,
                     v1::StartRolloutResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->StartRollout(&ctx, req, resp);
  }
  grpc::Status Check(const v1::StartRolloutRequest& req,
                     v1::CheckRolloutResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->CheckRollout(&ctx, req, resp);
  }
  grpc::Status SetPhase(const std::string& id, const std::string& phase,
                        v1::SetPhaseResponse* resp = nullptr) {
    grpc::ClientContext ctx;
    v1::SetPhaseRequest req;
    req.set_rollout_id(id);
    req.set_phase(phase);
    v1::SetPhaseResponse ignored;
    return stub_->SetPhase(&ctx, req, resp ? resp : &ignored);
  }
  grpc::Status End(const std::string& id, v1::EndRolloutResponse* resp) {
    grpc::ClientContext ctx;
    v1::EndRolloutRequest req;
    req.set_rollout_id(id);
    return stub_->EndRollout(&ctx, req, resp);
  }
  v1::ListRolloutsResponse List() {
    grpc::ClientContext ctx;
    v1::ListRolloutsResponse resp;
    EXPECT_TRUE(stub_->ListRollouts(&ctx, {}, &resp).ok());
    return resp;
  }

  // The port of `--metrics-port 0`, as the daemon logs it (it starts
  // serving metrics just after gRPC: waits for the line, bounded); 0 if
  // it never says. `line` is the log's text up to the port: the default
  // --metrics-address's, or "metrics on http://[::1]:" for ::1.
  uint16_t MetricsPort(
      const std::string& line = "metrics on http://127.0.0.1:") const {
    for (int i = 0; i < 500; ++i) {
      const std::string log = Log();
      if (size_t at = log.find(line); at != std::string::npos) {
        return static_cast<uint16_t>(
            std::strtoul(log.c_str() + at + line.size(), nullptr, 10));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "the daemon never said its metrics port:\n" << Log();
    return 0;
  }

  std::string Log() const {
    std::string out;
    if (FILE* f = fopen(dirs_.log().c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
      fclose(f);
    }
    return out;
  }

 private:
  DaemonDirs dirs_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Sandfence::Stub> stub_;
};

// Whether the record has a warning of `kind` whose text holds every part.
inline bool HasWarning(const v1::RolloutRecord& rec, v1::WarningKind kind,
                       const std::vector<std::string>& parts) {
  for (const v1::RecordWarning& w : rec.warning()) {
    if (w.kind() != kind) continue;
    bool all = true;
    for (const std::string& p : parts) all &= absl::StrContains(w.text(), p);
    if (all) return true;
  }
  return false;
}

// The base of a suite whose tests drive one daemon (daemon_, started by
// the suite's SetUp), with the daemon's calls by name.
class DaemonTestBase : public ::testing::Test {
 protected:
  grpc::Status Start(const v1::StartRolloutRequest& req,
                     v1::StartRolloutResponse* resp) {
    return daemon_->Start(req, resp);
  }
  grpc::Status SetPhase(const std::string& id, const std::string& phase,
                        v1::SetPhaseResponse* resp = nullptr) {
    return daemon_->SetPhase(id, phase, resp);
  }
  grpc::Status End(const std::string& id, v1::EndRolloutResponse* resp) {
    return daemon_->End(id, resp);
  }
  v1::ListRolloutsResponse List() { return daemon_->List(); }

  std::unique_ptr<DaemonProcess> daemon_;
};

// Runs net_probe OP ADDR PORT inside the cgroup at `path`; returns its exit
// status: 0 connected, 1 EPERM (denied), else another errno.
inline int ProbeIn(const std::string& cgroup_path, const std::string& op,
                   const std::string& addr, uint16_t port) {
  absl::StatusOr<Cgroup> cg = Cgroup::Open(cgroup_path);
  if (!cg.ok()) {
    ADD_FAILURE() << cg.status();
    return -1;
  }
  SpawnOptions spawn;
  spawn.cgroup_fd = cg->fd();
  spawn.argv = {NetProbe(), op, addr, absl::StrCat(port)};
  absl::StatusOr<pid_t> child = SpawnInCgroup(spawn);
  if (!child.ok()) {
    ADD_FAILURE() << child.status();
    return -1;
  }
  absl::StatusOr<int> status = WaitForExit(*child);
  return status.ok() ? *status : -1;
}

// A root process outside any sandbox, with no capabilities. The kernel
// itself lets a sandboxed root read its /proc entries (same UID, a subset
// of its capabilities), so what stops the read is the process guard.
class CaplessRootProcess {
 public:
  CaplessRootProcess() {
    pid_ = fork();
    if (pid_ == 0) {
      execl("/usr/bin/setpriv", "setpriv", "--bounding-set", "-all",
            "--inh-caps", "-all", "sleep", "30", nullptr);
      _exit(127);
    }
    // Ready once setpriv has become sleep (no capabilities left).
    for (int i = 0; i < 1000 && pid_ > 0; ++i) {
      std::ifstream comm(absl::StrCat("/proc/", pid_, "/comm"));
      std::string name;
      std::getline(comm, name);
      if (name == "sleep") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ~CaplessRootProcess() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

// Runs `cat /proc/<pid>/environ` in the sandbox; its shell-style status:
// 128+SIGKILL when the signal guard killed it, 1 when the open failed.
inline int ReadEnvironIn(const std::string& cgroup_path, pid_t pid) {
  absl::StatusOr<Cgroup> cg = Cgroup::Open(cgroup_path);
  if (!cg.ok()) {
    ADD_FAILURE() << cg.status();
    return -1;
  }
  SpawnOptions spawn;
  spawn.cgroup_fd = cg->fd();
  spawn.argv = {"sh", "-c",
                absl::StrCat("exec cat /proc/", pid, "/environ >/dev/null")};
  absl::StatusOr<pid_t> reader = SpawnInCgroup(spawn);
  if (!reader.ok()) {
    ADD_FAILURE() << reader.status();
    return -1;
  }
  absl::StatusOr<int> status = WaitForExit(*reader);
  return status.ok() ? *status : -1;
}

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_DAEMON_DAEMON_FIXTURE_H_
