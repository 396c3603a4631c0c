// A day of churn against a real daemon (issue 36): `soak_rollouts`
// rollouts, each started, given traffic (an allowed TCP connect and UDP
// send, a denied UDP connect, each checked), switched to its second phase
// and ended, one after another. Every tenth is killed midway (cgroup.kill
// while its worker holds its sockets, then EndRollout, as a framework's
// `finally` does); every tenth loses its cgroup without EndRollout (the
// orchestrator removed the container), which the daemon must notice and
// reclaim on its own.
//
// Before (after a warm-up) and after (once the daemon lists no rollout),
// it counts what the daemon could leave behind: its fds, threads and
// memory; the pins and map entries under its pin directory; BPF programs,
// links and maps host-wide; cgroups under its parent; state files. The
// rows are the differences. Records stay by design (the audit trail).
//
// Traffic goes to loopback in the bench's own network namespace only:
// 127.0.0.2 (the model), 127.0.0.3 (a tool), 127.0.0.9 (denied).
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/leftovers.h"
#include "bench/report.h"
#include "bench/suites.h"
#include "bench/worker.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "sandfence/v1/daemon.grpc.pb.h"

namespace sandfence::bench {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A TCP listener on addr that accepts and closes until it is stopped: the
// model server of every rollout (a backlog left full would stall connects).
class Acceptor {
 public:
  static absl::StatusOr<std::unique_ptr<Acceptor>> Start(const char* addr) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, addr, &a.sin_addr);
    socklen_t len = sizeof(a);
    if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(fd.get(), 1024) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return ErrnoError(errno, absl::StrCat("listen on ", addr));
    }
    auto out = std::unique_ptr<Acceptor>(new Acceptor);
    out->port_ = ntohs(a.sin_port);
    out->fd_ = std::move(fd);
    out->thread_ = std::thread([p = out.get()] { p->Loop(); });
    return out;
  }
  ~Acceptor() {
    stop_ = true;
    ::shutdown(fd_.get(), SHUT_RDWR);  // wakes accept()
    thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  Acceptor() = default;
  void Loop() {
    while (!stop_) {
      const int c = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) ::close(c);
      else if (errno != EINTR && errno != ECONNABORTED) return;
    }
  }
  UniqueFd fd_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The daemon under soak, with directories of its own, and a client.
class SoakDaemon {
 public:
  static absl::StatusOr<std::unique_ptr<SoakDaemon>> Start(
      const BenchOptions& o) {
    auto d = std::unique_ptr<SoakDaemon>(new SoakDaemon);
    d->sandfence_ = o.sandfence;
    d->root_ = o.work_dir + "/soak";
    d->pin_dir_ = absl::StrCat("/sys/fs/bpf/sf-bench-soak-", ::getpid());
    d->cgroups_ = o.cgroup_root + "/soak";
    for (const std::string& dir : {d->root_, d->cgroups_}) {
      if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        return ErrnoError(errno, absl::StrCat("mkdir ", dir));
      }
    }
    const std::string socket = d->root_ + "/sandfence.sock";
    std::vector<std::string> argv = {
        o.sandfence, "daemon", "--socket", socket, "--records-dir",
        d->records(), "--state-dir", d->state(), "--pin-dir", d->pin_dir_,
        "--cgroup-parent", d->cgroups_,
        // No name is ever resolved (the policy has none); a loopback
        // resolver keeps the host's out of it all the same.
        "--resolver", "127.0.0.1:1"};
    // Everything the child needs is made before fork: the acceptors'
    // threads exist, so the child may not allocate.
    std::vector<char*> exec_args;
    for (std::string& a : argv) exec_args.push_back(a.data());
    exec_args.push_back(nullptr);
    const std::string log = d->log();
    d->pid_ = ::fork();
    if (d->pid_ < 0) return ErrnoError(errno, "fork");
    if (d->pid_ == 0) {
      const int fd =
          ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (fd >= 0) ::dup2(fd, 2);
      ::execv(exec_args[0], exec_args.data());
      ::_exit(127);
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
    d->stub_ = v1::Sandfence::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("unix:", socket), grpc::InsecureChannelCredentials(),
        args));
    for (int i = 0; i < 600; ++i) {
      int status = 0;
      if (::waitpid(d->pid_, &status, WNOHANG) == d->pid_) {
        d->pid_ = -1;
        return absl::InternalError(
            absl::StrCat("the daemon exited at start; see ", d->log()));
      }
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(500));
      v1::HealthResponse h;
      if (d->stub_->Health(&ctx, {}, &h).ok()) return d;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("the daemon never answered; see ", d->log()));
  }

  // Stops the daemon and takes down whatever it left (pins, sandboxes).
  ~SoakDaemon() {
    stub_.reset();
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    const std::string cleanup = absl::StrCat(
        sandfence_, " daemon --cleanup --pin-dir ", pin_dir_, " --state-dir ",
        state(), " >/dev/null 2>&1");
    (void)!std::system(cleanup.c_str());
    ::rmdir(pin_dir_.c_str());
    if (absl::StatusOr<Cgroup> cg = Cgroup::Adopt(cgroups_); cg.ok()) {
      cg->Remove().IgnoreError();
    }
  }

  pid_t pid() const { return pid_; }
  const std::string& pin_dir() const { return pin_dir_; }
  const std::string& cgroups() const { return cgroups_; }
  std::string records() const { return root_ + "/records"; }
  std::string state() const { return root_ + "/state"; }
  std::string log() const { return root_ + "/daemon.log"; }
  v1::Sandfence::Stub* stub() { return stub_.get(); }

  absl::Status Call(const char* what, const grpc::Status& s) {
    if (s.ok()) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(what, ": ", s.error_message(),
                                            " (see ", log(), ")"));
  }

  // How many rollouts the daemon lists.
  absl::StatusOr<int> Open() {
    grpc::ClientContext ctx;
    v1::ListRolloutsResponse resp;
    if (absl::Status s = Call("ListRollouts", stub_->ListRollouts(&ctx, {}, &resp));
        !s.ok()) {
      return s;
    }
    return resp.rollout_size();
  }

 private:
  SoakDaemon() = default;
  std::string root_, pin_dir_, cgroups_, sandfence_;
  pid_t pid_ = -1;
  std::unique_ptr<v1::Sandfence::Stub> stub_;
};

// How each rollout ends.
enum class Ending { kEnded, kKilledMidway, kCgroupGone };

Ending EndingOf(int i) {
  if (i % 10 == 4) return Ending::kKilledMidway;
  if (i % 10 == 7) return Ending::kCgroupGone;
  return Ending::kEnded;
}

struct Endpoints {
  uint16_t model = 0, tool = 0, udp = 0;
};

std::string PolicyText(const Endpoints& e) {
  return absl::StrFormat(
      R"pb(name: "soak"
           phase {
             name: "agent"
             network_access: MODEL_AND_TOOLS
             dns { mode: NONE }
             tool { name: "t" url: "http://127.0.0.3:%d" }
             allow {
               name: "udp"
               host: "127.0.0.3"
               port: %d
               protocol: UDP
             }
           }
           phase {
             name: "verify"
             network_access: MODEL_ONLY
             dns { mode: NONE }
           })pb",
      e.tool, e.udp);
}

// One rollout, start to end; fills *gone_at when its cgroup was removed
// without EndRollout.
absl::Status OneRollout(const BenchOptions& o, SoakDaemon& d,
                        const Endpoints& e, int i, Ending ending,
                        Clock::time_point* gone_at) {
  const std::string id = absl::StrCat("soak-", i);
  v1::StartRolloutRequest req;
  req.set_rollout_id(id);
  req.mutable_sandbox()->set_create(true);
  req.set_policy_text(PolicyText(e));
  req.mutable_endpoints()->add_model(
      absl::StrCat("http://127.0.0.2:", e.model, "/v1"));
  v1::StartRolloutResponse started;
  {
    grpc::ClientContext ctx;
    if (absl::Status s =
            d.Call("StartRollout", d.stub()->StartRollout(&ctx, req, &started));
        !s.ok()) {
      return s;
    }
  }
  {
    // The worker's cgroup fd is closed before a removal below.
    absl::StatusOr<Cgroup> cg = Cgroup::Open(started.cgroup_path());
    if (!cg.ok()) return cg.status();
    std::vector<std::string> args = {
        "rollout", "--model", "127.0.0.2", "--model-port",
        absl::StrCat(e.model), "--tool", "127.0.0.3", "--tool-port",
        absl::StrCat(e.tool), "--udp-port", absl::StrCat(e.udp), "--denied", "127.0.0.9", "--denied-port", "9"};
    if (ending == Ending::kKilledMidway) args.push_back("--hold");
    absl::StatusOr<Worker> w = Worker::Start(o.worker, cg->fd(), args);
    if (!w.ok()) return w.status();
    if (ending == Ending::kKilledMidway) {
      // Midway: its sockets open, then the whole sandbox is killed.
      if (absl::Status s = w->WaitForLine("held"); !s.ok()) return s;
      if (absl::Status s = KillCgroupProcesses(started.cgroup_path());
          !s.ok()) {
        return s;
      }
      (void)w->Finish();  // killed: its status says so, as expected
    } else if (absl::StatusOr<std::string> r = w->Finish(); !r.ok()) {
      return absl::InternalError(absl::StrCat(id, ": ", r.status().message()));
    }
  }
  if (ending == Ending::kCgroupGone) {
    const std::string& path = started.cgroup_path();
    if (::rmdir(path.c_str()) != 0) {
      return ErrnoError(errno, absl::StrCat("rmdir ", path));
    }
    *gone_at = Clock::now();
    return absl::OkStatus();
  }
  {
    grpc::ClientContext ctx;
    v1::SetPhaseRequest sp;
    sp.set_rollout_id(id);
    sp.set_phase("verify");
    v1::SetPhaseResponse resp;
    if (absl::Status s = d.Call("SetPhase", d.stub()->SetPhase(&ctx, sp, &resp));
        !s.ok()) {
      return s;
    }
  }
  grpc::ClientContext ctx;
  v1::EndRolloutRequest end;
  end.set_rollout_id(id);
  v1::EndRolloutResponse resp;
  return d.Call("EndRollout", d.stub()->EndRollout(&ctx, end, &resp));
}

// What the daemon could leave behind, its own and host-wide.
std::map<std::string, int64_t> Leftovers(const SoakDaemon& d) {
  std::map<std::string, int64_t> s = ProcessSnapshot(d.pid());
  int64_t pins = 0, cgroups = 0, states = 0;
  CountTree(d.pin_dir(), &pins);
  s["pins"] = pins;
  s["map_entries"] = CountMapEntries(d.pin_dir());
  // Directories only: each cgroup's interface files come and go with it.
  int64_t dirs = 0;
  CountTree(d.cgroups(), &cgroups, [&](const std::string& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) ++dirs;
  });
  s["cgroups"] = dirs;
  CountTree(d.state(), &states);
  s["state_files"] = states;
  s.merge(BpfObjectCounts());
  return s;
}

Row SoakRow(std::string name, std::string variant, std::string unit,
            std::vector<double> v, std::string note) {
  Row row;
  row.suite = "soak";
  row.name = std::move(name);
  row.variant = std::move(variant);
  row.unit = std::move(unit);
  row.tail = unit == "ms";
  row.stats = Summarize(std::move(v));
  row.note = std::move(note);
  return row;
}

}  // namespace

absl::Status RunSoakSuite(const BenchOptions& o, Report* report) {
  absl::StatusOr<std::unique_ptr<Acceptor>> model = Acceptor::Start("127.0.0.2");
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<Acceptor>> tool = Acceptor::Start("127.0.0.3");
  if (!tool.ok()) return tool.status();
  // Datagrams to the tool's UDP port land here, unread (a full buffer
  // drops them; the send was judged all the same).
  UniqueFd sink(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.3", &a.sin_addr);
  socklen_t len = sizeof(a);
  if (!sink || ::bind(sink.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      ::getsockname(sink.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return ErrnoError(errno, "bind a UDP sink on 127.0.0.3");
  }
  const Endpoints e{(*model)->port(), (*tool)->port(), ntohs(a.sin_port)};
  absl::StatusOr<std::unique_ptr<SoakDaemon>> started = SoakDaemon::Start(o);
  if (!started.ok()) return started.status();
  SoakDaemon& d = **started;

  // A warm-up of every ending first: what the first rollouts allocate
  // once (gRPC's threads, the pool's, the allocator's arenas) is the
  // baseline, not growth.
  Clock::time_point ignored;
  for (int i = 0; i < 10 && !g_interrupted; ++i) {
    if (absl::Status s = OneRollout(o, d, e, -1 - i, EndingOf(i), &ignored);
        !s.ok()) {
      return s;
    }
  }
  auto settle = [&](double limit_ms) -> absl::Status {
    const Clock::time_point t0 = Clock::now();
    for (;;) {
      absl::StatusOr<int> open = d.Open();
      if (!open.ok()) return open.status();
      if (*open == 0) return absl::OkStatus();
      if (MsSince(t0) > limit_ms) {
        return absl::DeadlineExceededError(absl::StrCat(
            *open, " rollouts still listed ", limit_ms,
            " ms after the last one ended or lost its cgroup"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  if (absl::Status s = settle(10000); !s.ok()) return s;
  const std::map<std::string, int64_t> before = Leftovers(d);
  const std::map<std::string, int64_t> entries_before =
      MapEntriesByPin(d.pin_dir());

  std::vector<double> cycle, reclaim;
  const int n = o.soak_rollouts;
  int done = 0, killed = 0, gone = 0;
  const Clock::time_point soak_start = Clock::now();
  for (int i = 0; i < n && !g_interrupted; ++i) {
    const Ending ending = EndingOf(i);
    Clock::time_point gone_at;
    const Clock::time_point t0 = Clock::now();
    if (absl::Status s = OneRollout(o, d, e, i, ending, &gone_at); !s.ok()) {
      return absl::InternalError(
          absl::StrCat("rollout ", i, " of ", n, ": ", s.message()));
    }
    cycle.push_back(MsSince(t0));
    ++done;
    killed += ending == Ending::kKilledMidway;
    if (ending != Ending::kCgroupGone) continue;
    // Every tenth removed cgroup is waited for: how long the daemon takes
    // to notice on its own (the rest are noticed while the soak goes on).
    if (gone++ % 10 != 0) continue;
    const std::string id = absl::StrCat("soak-", i);
    for (;;) {
      grpc::ClientContext ctx;
      v1::ListRolloutsResponse resp;
      if (absl::Status s =
              d.Call("ListRollouts", d.stub()->ListRollouts(&ctx, {}, &resp));
          !s.ok()) {
        return s;
      }
      bool listed = false;
      for (const auto& r : resp.rollout()) listed |= r.rollout_id() == id;
      if (!listed) break;
      if (MsSince(gone_at) > 30000) {
        return absl::DeadlineExceededError(
            absl::StrCat(id, ": its cgroup was removed 30 s ago and the "
                         "daemon still lists it"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    reclaim.push_back(MsSince(gone_at));
  }
  const double soak_s = MsSince(soak_start) / 1000;
  if (absl::Status s = settle(10000); !s.ok()) return s;
  const std::map<std::string, int64_t> after = Leftovers(d);
  // Which maps kept entries, for the map_entries row's note.
  std::vector<std::string> grown;
  for (const auto& [pin, count] : MapEntriesByPin(d.pin_dir())) {
    const auto it = entries_before.find(pin);
    const int64_t base = it == entries_before.end() ? 0 : it->second;
    if (count != base) {
      grown.push_back(absl::StrFormat("%s %+d", pin, count - base));
    }
  }

  // The first tenth of the cycles is the baseline of the last: a leak
  // that slows the daemon down shows as a ratio above 1.
  const size_t tenth = std::max<size_t>(1, cycle.size() / 10);
  std::vector<double> first(cycle.begin(), cycle.begin() + tenth);
  std::vector<double> last(cycle.end() - tenth, cycle.end());
  const std::string mix = absl::StrFormat(
      "%d rollouts in %.0f s: %d ended, %d killed midway then ended, %d lost "
      "their cgroup without EndRollout",
      done, soak_s, done - killed - gone, killed, gone);
  Row r_first = SoakRow("rollout_cycle", "first tenth", "ms", first, mix);
  const double first_median = r_first.stats.median;
  report->Add(std::move(r_first));
  Row r_last = SoakRow("rollout_cycle", "last tenth", "ms", last,
                       "start, traffic, switch, end (or kill, or rmdir)");
  r_last.baseline = "first tenth";
  r_last.baseline_median = first_median;
  report->Add(std::move(r_last));
  if (!reclaim.empty()) {
    report->Add(SoakRow("reclaim_after_rmdir", "daemon", "ms", reclaim,
                        "from rmdir of a sandbox's cgroup to the daemon "
                        "listing it no more (no EndRollout)"));
  }
  for (const auto& [what, v] : after) {
    const int64_t base = before.at(what);
    Row row = SoakRow(absl::StrCat("left_after_soak/", what),
                      "after - baseline", what == "rss_kib" ? "KiB" : "count",
                      {static_cast<double>(v - base)},
                      absl::StrCat("baseline ", base, ", after ", v,
                                   what == "map_entries" && !grown.empty()
                                       ? absl::StrCat(" (", absl::StrJoin(grown, ", "), ")")
                                       : ""));
    row.params = {{"rollouts", done}};
    report->Add(std::move(row));
  }
  Row rss = SoakRow("daemon_rss", "after", "KiB",
                    {static_cast<double>(after.at("rss_kib"))},
                    "the daemon's resident memory after the soak");
  rss.baseline = "baseline";
  rss.baseline_median = static_cast<double>(before.at("rss_kib"));
  report->Add(std::move(rss));
  return absl::OkStatus();
}

}  // namespace sandfence::bench
