// Unix sockets from restricted sandboxes (issue 21), on real cgroups, with
// whichever enforcer the kernel has: the cgroup connect_unix/sendmsg_unix
// hooks (6.7+; this host) or BPF LSM's unix_stream_connect/unix_may_send
// (the VM's 6.1). A service outside the sandbox is EPERM unless the phase
// lists its name; the sandbox's own sockets stay reachable; sandfence's own
// are never reachable; inherit and UNCHECKED phases reach everything. Where
// the two enforcers differ (the cgroup hooks judge the name the caller
// gives, BPF LSM the socket it reaches), the test says which it expects.
// Every Unix socket here is one the test creates (a temporary directory and
// abstract names with its pid).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "egress/net_event.h"
#include "egress_fixture.h"
#include "gtest/gtest.h"
#include "support/egress_kernel_fixture.h"
#include "support/host_probe.h"
#include "support/test_env.h"

namespace sandfence::testing {
namespace {

socklen_t MakeAddr(const std::string& name, sockaddr_un* a) {
  std::memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  if (name[0] == '@') {
    std::memcpy(a->sun_path + 1, name.data() + 1, name.size() - 1);
    return offsetof(sockaddr_un, sun_path) + name.size();
  }
  std::memcpy(a->sun_path, name.data(), name.size());
  return offsetof(sockaddr_un, sun_path) + name.size() + 1;
}

// A service outside every sandbox: a stream listener that answers each
// connection's byte (so a probe that connects knows a service answered),
// or a bound datagram / seqpacket socket.
class UnixService {
 public:
  UnixService(const std::string& name, int type) : name_(name) {
    fd_.reset(socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
    sockaddr_un a;
    const socklen_t len = MakeAddr(name, &a);
    EXPECT_EQ(bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), len), 0)
        << "bind " << name << ": " << strerror(errno);
    if (type == SOCK_DGRAM) return;
    EXPECT_EQ(listen(fd_.get(), 16), 0);
    if (type != SOCK_STREAM) return;
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_.get(), POLLIN, 0};
        if (poll(&p, 1, 50) != 1) continue;
        UniqueFd c(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!c) continue;
        char ch;
        pollfd q{c.get(), POLLIN, 0};
        if (poll(&q, 1, 2000) == 1 && read(c.get(), &ch, 1) == 1) {
          (void)!write(c.get(), &ch, 1);
        }
      }
    });
  }
  ~UnixService() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (name_[0] != '@') unlink(name_.c_str());
  }

 private:
  std::string name_;
  UniqueFd fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class UnixHooksTest : public EgressKernelTest {
 protected:
  void SetUp() override {
    EgressKernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // A kernel without the hooks skips; one that has them and refuses
    // sandfence's programs fails.
    if (!controller_->unix_checks()) {
      ASSERT_TRUE(absl::StartsWith(controller_->unix_unavailable(),
                                   "this kernel has no cgroup"))
          << controller_->unix_unavailable();
      GTEST_SKIP() << "nothing judges Unix sockets here: "
                   << controller_->unix_unavailable();
    }
    lsm_ = controller_->unix_enforcer() == EgressController::UnixEnforcer::kLsm;
    std::printf("Unix sockets judged by: %s\n",
                std::string(controller_->unix_enforcer_name()).c_str());
    char tmpl[] = "/tmp/sf-unix-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);
    tag_ = absl::StrCat(getpid(), "-", ++counter_);
  }

  void TearDown() override {
    EgressKernelTest::TearDown();
    if (!dir_.empty()) rmdir(dir_.c_str());
  }

  std::string Path(const std::string& leaf) const {
    return absl::StrCat(dir_, "/", leaf);
  }
  std::string Abstract(const std::string& leaf) const {
    return absl::StrCat("@sf-test-", tag_, "-", leaf);
  }

  CompiledPhase ModelOnly(std::vector<UnixName> names = {}) {
    CompiledPhase p = Phase(v1::MODEL_ONLY, {});
    p.unix_checked = true;
    p.unix_names = std::move(names);
    return p;
  }

  Cgroup NewSandbox(const CompiledPhase& phase,
                    const std::string& parent = "") {
    Cgroup cg = EgressKernelTest::NewSandbox(phase, parent);
    // As Sandbox::Start does: its own paths known by the bind tracker.
    if (phase.restricted() && phase.unix_checked) {
      absl::Status s = controller_->SetUnixTraits(cg.id(), {.tracked = true});
      EXPECT_TRUE(s.ok()) << s;
    }
    return cg;
  }

  // unix_probe OP NAME [TARGET] in the sandbox: its exit status.
  int Probe(const Cgroup& sandbox, const std::string& op,
            const std::string& name, const std::string& target = "") {
    std::vector<std::string> argv = {SANDFENCE_UNIX_PROBE_PATH, op, name};
    if (!target.empty()) argv.push_back(target);
    return Wait(Start(sandbox, std::move(argv)));
  }

  // The hook an attempt's event names.
  uint8_t ConnectHook() const {
    return lsm_ ? SF_HOOK_UNIX_STREAM_CONNECT : SF_HOOK_CONNECT_UNIX;
  }

  static int counter_;
  bool lsm_ = false;
  std::string dir_, tag_;
};

int UnixHooksTest::counter_ = 0;

UnixName PathName(const std::string& p) { return UnixName{p, false}; }
UnixName AbstractName(const std::string& at) {
  return UnixName{at.substr(1), true};
}

TEST_F(UnixHooksTest, HostServicesAreRefusedFromARestrictedSandbox) {
  UnixService stream_path(Path("svc.sock"), SOCK_STREAM);
  UnixService stream_abs(Abstract("svc"), SOCK_STREAM);
  UnixService seq(Path("seq.sock"), SOCK_SEQPACKET);
  UnixService dgram(Path("log.sock"), SOCK_DGRAM);  // a /dev/log
  UnixService dgram_abs(Abstract("log"), SOCK_DGRAM);
  Cgroup sb = NewSandbox(ModelOnly());
  EXPECT_EQ(Probe(sb, "stream-connect", Path("svc.sock")), EPERM);
  EXPECT_EQ(Probe(sb, "stream-connect", Abstract("svc")), EPERM);
  EXPECT_EQ(Probe(sb, "seqpacket-connect", Path("seq.sock")), EPERM);
  EXPECT_EQ(Probe(sb, "dgram-connect", Path("log.sock")), EPERM);
  EXPECT_EQ(Probe(sb, "dgram-sendto", Path("log.sock")), EPERM);
  EXPECT_EQ(Probe(sb, "dgram-sendto", Abstract("log")), EPERM);
  auto c = controller_->Counters(sb.id());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->denied, 6u);
  EXPECT_EQ(c->allowed, 0u);
}

TEST_F(UnixHooksTest, InheritAndUncheckedPhasesReachEverything) {
  UnixService stream_path(Path("svc.sock"), SOCK_STREAM);
  UnixService stream_abs(Abstract("svc"), SOCK_STREAM);
  UnixService dgram(Path("log.sock"), SOCK_DGRAM);
  Cgroup inherit = NewSandbox(Phase(v1::INHERIT, {}));
  EXPECT_EQ(Probe(inherit, "stream-connect", Path("svc.sock")), 0);
  EXPECT_EQ(Probe(inherit, "stream-connect", Abstract("svc")), 0);
  EXPECT_EQ(Probe(inherit, "dgram-sendto", Path("log.sock")), 0);

  CompiledPhase unchecked = ModelOnly();
  unchecked.unix_checked = false;
  unchecked.unix_unchecked = true;
  Cgroup sb = NewSandbox(unchecked);
  EXPECT_EQ(Probe(sb, "stream-connect", Path("svc.sock")), 0);
  EXPECT_EQ(Probe(sb, "stream-connect", Abstract("svc")), 0);
  EXPECT_EQ(Probe(sb, "dgram-sendto", Path("log.sock")), 0);
}

TEST_F(UnixHooksTest, ListedNamesAreReachableAndNothingElse) {
  UnixService listed(Path("model-proxy.sock"), SOCK_STREAM);
  UnixService listed_abs(Abstract("proxy"), SOCK_STREAM);
  UnixService other(Path("docker.sock"), SOCK_STREAM);
  Cgroup sb = NewSandbox(ModelOnly(
      {PathName(Path("model-proxy.sock")), AbstractName(Abstract("proxy"))}));
  EXPECT_EQ(Probe(sb, "stream-connect", Path("model-proxy.sock")), 0);
  EXPECT_EQ(Probe(sb, "stream-connect", Abstract("proxy")), 0);
  EXPECT_EQ(Probe(sb, "stream-connect", Path("docker.sock")), EPERM);
  // A path is a name, not an abstract name of the same bytes. (Nobody
  // listens on that abstract name: BPF LSM, judging sockets, never sees
  // the attempt, and the kernel refuses it as it would anywhere.)
  EXPECT_EQ(
      Probe(sb, "stream-connect", absl::StrCat("@", Path("model-proxy.sock"))),
      lsm_ ? ECONNREFUSED : EPERM);
}

// The sandbox's own sockets, in every way the cgroup hooks can verify.
// What they cannot (an addressed datagram to an own path; a connect from
// a process whose descriptor table a thread shares) is refused there, and
// allowed by BPF LSM, which judges the socket reached.
TEST_F(UnixHooksTest, TheSandboxesOwnSocketsStayReachable) {
  Cgroup sb = NewSandbox(ModelOnly());
  EXPECT_EQ(Probe(sb, "own-stream", Path("own.sock")), 0);
  EXPECT_EQ(Probe(sb, "own-stream", Abstract("own")), 0);
  EXPECT_EQ(Probe(sb, "own-dgram-connected", Path("own-dgram-c.sock")), 0);
  EXPECT_EQ(Probe(sb, "own-dgram", Abstract("own-dgram")), 0);
  EXPECT_EQ(Probe(sb, "own-stream-threaded", Abstract("own-threaded")), 0);
  EXPECT_EQ(Probe(sb, "own-dgram", Path("own-dgram.sock")), lsm_ ? 0 : EPERM);
  EXPECT_EQ(Probe(sb, "own-stream-threaded", Path("own-threaded.sock")),
            lsm_ ? 0 : EPERM);
}

TEST_F(UnixHooksTest, ANameTheHostBindsAfterTheSandboxIsNoLongerTheSandboxes) {
  Cgroup sb = NewSandbox(ModelOnly());
  // The sandbox binds the name (its socket is gone when the probe exits)...
  ASSERT_EQ(Probe(sb, "own-stream", Abstract("reused")), 0);
  // ...then a host service binds the same name: it is the host's now.
  UnixService host(Abstract("reused"), SOCK_STREAM);
  EXPECT_EQ(Probe(sb, "stream-connect", Abstract("reused")), EPERM);
}

// The agent's way around a name check: bind a path (the sandbox's own),
// swap the socket file for a link to an outside socket, connect. The cgroup
// hook allows the name; the check at the connect's exit sees an outside
// socket and kills the process before the call returns. BPF LSM sees the
// outside socket itself: EPERM. Either way recorded with the name the
// outside socket was bound to.
TEST_F(UnixHooksTest, AnOwnPathSwappedForALinkOutsideIsCaughtAtTheConnect) {
  auto own = EgressController::Create(PrivateHost());
  ASSERT_TRUE(own.ok()) << own.status();
  std::vector<NetEvent> events;
  auto reader = NetEventReader::Create(
      (*own)->events_fd(), [&](const NetEvent& e) { events.push_back(e); });
  ASSERT_TRUE(reader.ok());
  UnixService docker(Path("docker.sock"), SOCK_STREAM);
  auto cg =
      Cgroup::Create(absl::StrCat(TestCgroupRoot(), "/unix-swap-", getpid()));
  ASSERT_TRUE(cg.ok()) << cg.status();
  ASSERT_TRUE((*own)->AddSandbox(cg->fd(), cg->ref(), ModelOnly()).ok());
  ASSERT_TRUE((*own)->SetUnixTraits(cg->id(), {.tracked = true}).ok());
  SpawnOptions o;
  o.cgroup_fd = cg->fd();
  o.argv = {SANDFENCE_UNIX_PROBE_PATH, "own-then-symlink", Path("own.sock"),
            Path("docker.sock")};
  auto pid = SpawnInCgroup(o);
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(*WaitForExit(*pid), lsm_ ? EPERM : 128 + SIGKILL);
  ASSERT_TRUE((*reader)->Drain().ok());
  bool caught = false;
  for (const NetEvent& e : events) {
    if (e.reason == (lsm_ ? SF_REASON_NO_RULE : SF_REASON_UNIX_PEER_OUTSIDE)) {
      caught = true;
      EXPECT_EQ(e.verdict, SF_VERDICT_DENY);
      EXPECT_EQ(e.unix_name->ToString(), Path("docker.sock"));
      EXPECT_EQ(e.tgid, static_cast<uint32_t>(*pid));
    }
  }
  EXPECT_TRUE(caught) << "no event for the swapped connect";
  // Without the swap, the same steps on the sandbox's own socket pass.
  o.argv = {SANDFENCE_UNIX_PROBE_PATH, "own-stream", Path("own2.sock")};
  auto pid2 = SpawnInCgroup(o);
  ASSERT_TRUE(pid2.ok());
  EXPECT_EQ(*WaitForExit(*pid2), 0);
  ASSERT_TRUE((*own)->RemoveSandbox(cg->id()).ok());
  unlink(Path("own.sock").c_str());
  rmdir(cg->path().c_str());
}

// The swap with a fork (issue 33, attack 3): the socket is made before the
// fork, the child connects to the swapped name. Killing the child would
// leave the parent holding the connected socket; so the connect is refused
// before it is made (the socket has two holders), and the parent's copy
// reaches nothing.
TEST_F(UnixHooksTest, ASwappedConnectFromASharedSocketLeavesNothingConnected) {
  UnixService docker(Path("docker.sock"), SOCK_STREAM);
  Cgroup sb = NewSandbox(ModelOnly());
  EXPECT_EQ(Probe(sb, "own-then-fork-symlink", Path("own-fork.sock"),
                  Path("docker.sock")),
            EPERM)
      << "0: the parent talked to the outside service";
}

// The swap with a datagram (issue 33): an addressed send to a path the
// sandbox bound, now a link to an outside datagram socket. Nothing can
// check a datagram's destination before it is delivered, so the cgroup
// hooks refuse it; BPF LSM refuses it as outside. Nothing arrives.
TEST_F(UnixHooksTest, ASwappedDatagramNeverArrives) {
  UniqueFd outside(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un a;
  const socklen_t len = MakeAddr(Path("syslog.sock"), &a);
  ASSERT_EQ(bind(outside.get(), reinterpret_cast<sockaddr*>(&a), len), 0);
  Cgroup sb = NewSandbox(ModelOnly());
  EXPECT_EQ(Probe(sb, "own-dgram-then-symlink", Path("own-dgram-swap.sock"),
                  Path("syslog.sock")),
            EPERM);
  char buf[8];
  EXPECT_EQ(recv(outside.get(), buf, sizeof(buf), MSG_DONTWAIT), -1)
      << "a datagram from the sandbox arrived outside";
  EXPECT_EQ(errno, EAGAIN);
  unlink(Path("syslog.sock").c_str());
}

// Whether a stream listener answers on name (from the test, in no sandbox).
bool Answers(const std::string& name) {
  UniqueFd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a;
  const socklen_t len = MakeAddr(name, &a);
  return connect(s.get(), reinterpret_cast<sockaddr*>(&a), len) == 0;
}

TEST_F(UnixHooksTest, AnotherSandboxesSocketIsRefused) {
  Cgroup a = NewSandbox(ModelOnly());
  Cgroup b = NewSandbox(ModelOnly());
  // A service of a's, running: b is another sandbox, so it is as outside
  // as the host; a's other processes reach it.
  SpawnOptions o;
  o.cgroup_fd = a.fd();
  o.argv = {SANDFENCE_UNIX_PROBE_PATH, "serve", Abstract("a-only")};
  auto server = SpawnInCgroup(o);
  ASSERT_TRUE(server.ok()) << server.status();
  bool up = false;
  for (int i = 0; i < 100 && !(up = Answers(Abstract("a-only"))); i++) {
    usleep(20 * 1000);
  }
  ASSERT_TRUE(up) << "a's service never listened";
  EXPECT_EQ(Probe(b, "stream-connect", Abstract("a-only")), EPERM);
  EXPECT_EQ(Probe(a, "stream-connect", Abstract("a-only")), 0);
  kill(*server, SIGKILL);
  WaitForExit(*server).IgnoreError();
}

TEST_F(UnixHooksTest, ProtectedNamesAreRefusedEvenWhenListed) {
  UnixService daemon(Path("daemon.sock"), SOCK_STREAM);
  ASSERT_TRUE(controller_->ProtectUnixName(PathName(Path("daemon.sock"))).ok());
  Cgroup sb = NewSandbox(ModelOnly({PathName(Path("daemon.sock"))}));
  EXPECT_EQ(Probe(sb, "stream-connect", Path("daemon.sock")), EPERM);
  // Not even by binding the name itself first (here: an abstract one):
  // a protected name is never the sandbox's.
  ASSERT_TRUE(
      controller_->ProtectUnixName(AbstractName(Abstract("daemon"))).ok());
  EXPECT_EQ(Probe(sb, "own-stream", Abstract("daemon")), EPERM);
  EXPECT_EQ(Probe(sb, "own-stream", Abstract("not-protected")), 0);
}

TEST_F(UnixHooksTest, ANestedSandboxNarrowsItsParent) {
  UnixService listed(Path("proxy.sock"), SOCK_STREAM);
  Cgroup outer = NewSandbox(ModelOnly({PathName(Path("proxy.sock"))}));
  Cgroup inner = NewSandbox(ModelOnly(), outer.path());
  EXPECT_EQ(Probe(outer, "stream-connect", Path("proxy.sock")), 0);
  // The inner sandbox does not list it: denied, whatever the outer allows.
  EXPECT_EQ(Probe(inner, "stream-connect", Path("proxy.sock")), EPERM);
  // The inner sandbox's own sockets are its own (and the outer's).
  EXPECT_EQ(Probe(inner, "own-stream", Abstract("inner")), 0);
}

// Issue 15: an audit-only phase lets a host service through as a
// would-deny (reported, counted apart); sandfence's own sockets stay
// refused; an enforcing sandbox around or inside it still denies.
TEST_F(UnixHooksTest, AnAuditPhaseLetsAHostServiceThroughAsWouldDeny) {
  auto own = EgressController::Create(PrivateHost());
  ASSERT_TRUE(own.ok()) << own.status();
  std::vector<NetEvent> events;
  auto reader = NetEventReader::Create(
      (*own)->events_fd(), [&](const NetEvent& e) { events.push_back(e); });
  ASSERT_TRUE(reader.ok());
  UnixService svc(Path("svc.sock"), SOCK_STREAM);
  UnixService daemon(Path("daemon.sock"), SOCK_STREAM);
  ASSERT_TRUE((*own)->ProtectUnixName(PathName(Path("daemon.sock"))).ok());
  CompiledPhase audit = ModelOnly();
  audit.audit_only = true;
  auto cg =
      Cgroup::Create(absl::StrCat(TestCgroupRoot(), "/unix-audit-", getpid()));
  ASSERT_TRUE(cg.ok()) << cg.status();
  ASSERT_TRUE((*own)->AddSandbox(cg->fd(), cg->ref(), audit).ok());

  EXPECT_EQ(Probe(*cg, "stream-connect", Path("svc.sock")), 0);
  EXPECT_EQ(Probe(*cg, "stream-connect", Path("daemon.sock")), EPERM);
  ASSERT_TRUE((*reader)->Drain().ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].verdict, SF_VERDICT_AUDIT_DENY);
  EXPECT_EQ(events[0].reason, SF_REASON_NO_RULE);
  EXPECT_EQ(events[0].hook, ConnectHook());
  EXPECT_EQ(events[0].unix_name->ToString(), Path("svc.sock"));
  EXPECT_EQ(events[0].sandbox, cg->id());
  EXPECT_EQ(events[1].verdict, SF_VERDICT_DENY);
  EXPECT_EQ(events[1].reason, SF_REASON_UNIX_PROTECTED);
  auto counters = (*own)->Counters(cg->id());
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ(counters->audit_denied, 1u);
  EXPECT_EQ(counters->allowed, 1u);
  EXPECT_EQ(counters->denied, 1u);

  // An enforcing sandbox inside the audit one narrows as ever.
  CompiledPhase enforcing = ModelOnly();
  auto inner = Cgroup::Create(absl::StrCat(cg->path(), "/enforcing"));
  ASSERT_TRUE(inner.ok()) << inner.status();
  ASSERT_TRUE((*own)->AddSandbox(inner->fd(), inner->ref(), enforcing).ok());
  EXPECT_EQ(Probe(*inner, "stream-connect", Path("svc.sock")), EPERM);
  ASSERT_TRUE((*own)->RemoveSandbox(inner->id()).ok());
  rmdir(inner->path().c_str());
  ASSERT_TRUE((*own)->RemoveSandbox(cg->id()).ok());

  // An audit sandbox inside an enforcing one widens nothing.
  ASSERT_TRUE((*own)->AddSandbox(cg->fd(), cg->ref(), enforcing).ok());
  auto audit_inner = Cgroup::Create(absl::StrCat(cg->path(), "/audit"));
  ASSERT_TRUE(audit_inner.ok()) << audit_inner.status();
  ASSERT_TRUE(
      (*own)->AddSandbox(audit_inner->fd(), audit_inner->ref(), audit).ok());
  EXPECT_EQ(Probe(*audit_inner, "stream-connect", Path("svc.sock")), EPERM);
  ASSERT_TRUE((*own)->RemoveSandbox(audit_inner->id()).ok());
  rmdir(audit_inner->path().c_str());
  ASSERT_TRUE((*own)->RemoveSandbox(cg->id()).ok());
  rmdir(cg->path().c_str());
}

TEST_F(UnixHooksTest, EveryAttemptIsRecordedWithItsName) {
  auto own = EgressController::Create(PrivateHost());
  ASSERT_TRUE(own.ok()) << own.status();
  std::vector<NetEvent> events;
  auto reader = NetEventReader::Create(
      (*own)->events_fd(), [&](const NetEvent& e) { events.push_back(e); });
  ASSERT_TRUE(reader.ok());
  UnixService svc(Path("svc.sock"), SOCK_STREAM);
  UnixService listed(Abstract("listed"), SOCK_STREAM);
  auto cg =
      Cgroup::Create(absl::StrCat(TestCgroupRoot(), "/unix-events-", getpid()));
  ASSERT_TRUE(cg.ok()) << cg.status();
  CompiledPhase phase = ModelOnly({AbstractName(Abstract("listed"))});
  ASSERT_TRUE((*own)->AddSandbox(cg->fd(), cg->ref(), phase).ok());
  SpawnOptions o;
  o.cgroup_fd = cg->fd();
  o.argv = {SANDFENCE_UNIX_PROBE_PATH, "stream-connect", Path("svc.sock")};
  auto pid = SpawnInCgroup(o);
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(*WaitForExit(*pid), EPERM);
  o.argv = {SANDFENCE_UNIX_PROBE_PATH, "stream-connect", Abstract("listed")};
  auto pid2 = SpawnInCgroup(o);
  ASSERT_TRUE(pid2.ok());
  EXPECT_EQ(*WaitForExit(*pid2), 0);
  ASSERT_TRUE((*reader)->Drain().ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].is_unix());
  EXPECT_EQ(events[0].hook, ConnectHook());
  EXPECT_EQ(events[0].verdict, SF_VERDICT_DENY);
  EXPECT_EQ(events[0].reason, SF_REASON_NO_RULE);
  EXPECT_EQ(events[0].unix_name->ToString(), Path("svc.sock"));
  EXPECT_EQ(events[0].tgid, static_cast<uint32_t>(*pid));
  EXPECT_EQ(events[0].comm, "unix_probe");
  EXPECT_EQ(events[0].sandbox, cg->id());
  EXPECT_EQ(events[1].verdict, SF_VERDICT_ALLOW);
  EXPECT_EQ(events[1].reason, SF_REASON_UNIX_LISTED);
  EXPECT_EQ(events[1].rule_id, 0u);
  EXPECT_EQ(events[1].unix_name->ToString(), Abstract("listed"));
  auto counters = (*own)->RemoveSandbox(cg->id());
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ(counters->denied, 1u);
  EXPECT_EQ(counters->allowed, 1u);
  EXPECT_EQ(counters->events_lost, 0u);
  rmdir(cg->path().c_str());
}

// A socket made inside `sandbox` by this process (which then moves back):
// the hooks judge a socket by the cgroup it was made in.
UniqueFd SocketMadeIn(const Cgroup& sandbox) {
  std::string own;
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    if (absl::StartsWith(line, "0::")) own = line.substr(3);
  }
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  if (!mount.ok() || own.empty()) return UniqueFd();
  auto move = [](const std::string& dir) {
    std::ofstream procs(absl::StrCat(dir, "/cgroup.procs"));
    procs << getpid() << std::flush;
    return procs.good();
  };
  if (!move(sandbox.ref().path)) return UniqueFd();
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(move(absl::StrCat(*mount, own))) << "back to " << own;
  return fd;
}

// The supervisor's connect for a brokered sandbox (confine/unix_broker.h)
// passes the hook for that socket and that thread only: a connect the agent
// makes meanwhile on the same socket from another thread finds nothing.
TEST_F(UnixHooksTest, ABrokeredConnectPassesForItsSocketAndThreadOnly) {
  if (lsm_) GTEST_SKIP() << "only the cgroup hooks are brokered";
  UnixService svc(Path("host.sock"), SOCK_STREAM);
  Cgroup sb = NewSandbox(ModelOnly());
  ASSERT_TRUE(controller_->SetUnixTraits(sb.id(), {.broker = true}).ok());
  sockaddr_un a;
  const socklen_t len = MakeAddr(Path("host.sock"), &a);
  const uint64_t me =
      (static_cast<uint64_t>(getpid()) << 32) | static_cast<uint32_t>(gettid());
  auto attempt = [&](uint64_t pid_tgid) {
    UniqueFd fd = SocketMadeIn(sb);
    EXPECT_TRUE(fd) << "a socket in the sandbox";
    uint64_t cookie = 0;
    socklen_t clen = sizeof(cookie);
    EXPECT_EQ(getsockopt(fd.get(), SOL_SOCKET, SO_COOKIE, &cookie, &clen), 0);
    EXPECT_TRUE(controller_->AllowBrokeredConnect(cookie, pid_tgid).ok());
    const int rc = connect(fd.get(), reinterpret_cast<sockaddr*>(&a), len);
    const int err = rc == 0 ? 0 : errno;
    controller_->ForgetBrokeredConnect(cookie);
    return err;
  };
  // Another thread's entry: judged as any connect of the sandbox's socket
  // from outside it (no sandbox of the caller's: denied).
  EXPECT_EQ(attempt(me ^ 1), EPERM);
  EXPECT_EQ(attempt(me), 0);
}

// With SF_SB_UNIX_BROKER the hooks never take a path for the sandbox's own
// by its name (the bind tracker's view): only the supervisor reaches it,
// after checking the socket it reaches. An abstract name is not a path.
TEST_F(UnixHooksTest, ABrokeredSandboxReachesNoPathByItsName) {
  if (lsm_) GTEST_SKIP() << "only the cgroup hooks are brokered";
  Cgroup sb = NewSandbox(ModelOnly());
  ASSERT_TRUE(controller_->SetUnixTraits(sb.id(), {.broker = true}).ok());
  EXPECT_EQ(Probe(sb, "own-stream", Path("own-brokered.sock")), EPERM);
  // An abstract name is no path: Landlock's scope, where every process has
  // it, makes it the sandbox's own or unreachable; nothing else knows it.
  EXPECT_EQ(Probe(sb, "own-stream", Abstract("own-brokered")), EPERM);
  ASSERT_TRUE(controller_
                  ->SetUnixTraits(sb.id(),
                                  {.broker = true, .abstract_scoped = true})
                  .ok());
  EXPECT_EQ(Probe(sb, "own-stream", Abstract("own-brokered2")), 0);
  // The control: the same without the trait.
  Cgroup plain = NewSandbox(ModelOnly());
  EXPECT_EQ(Probe(plain, "own-stream", Path("own-plain.sock")), 0);
}

// The bind tracker runs on every system call's exit on the host: attached
// while a sandbox relies on it (a phase checks Unix sockets, nothing
// brokers its paths), and only then.
TEST_F(UnixHooksTest, TheBindTrackerRunsOnlyWhileASandboxNeedsIt) {
  if (lsm_) GTEST_SKIP() << "BPF LSM sees the socket reached: no tracker";
  // The earlier tests' sandboxes are gone (TearDown).
  EXPECT_FALSE(controller_->holds_unix_bind_tracker());
  Cgroup unchecked = NewSandbox(Phase(v1::MODEL_ONLY, {}));
  EXPECT_FALSE(controller_->holds_unix_bind_tracker())
      << "a sandbox whose Unix sockets are not checked";
  Cgroup tracked = NewSandbox(ModelOnly());
  EXPECT_TRUE(controller_->holds_unix_bind_tracker());
  EXPECT_EQ(Probe(tracked, "own-stream", Path("own-tracked.sock")), 0)
      << "its own path, known by the tracker";
  // Brokered from now on: nobody needs the tracker.
  ASSERT_TRUE(controller_->SetUnixTraits(tracked.id(), {.broker = true}).ok());
  EXPECT_FALSE(controller_->holds_unix_bind_tracker());
  EXPECT_EQ(Probe(tracked, "own-stream", Path("own-tracked2.sock")), EPERM)
      << "a brokered sandbox's own path by its name (closed, never open)";
  // Another tracked sandbox brings it back; its end takes it along.
  Cgroup second = NewSandbox(ModelOnly());
  EXPECT_TRUE(controller_->holds_unix_bind_tracker());
  ASSERT_TRUE(controller_->RemoveSandbox(second.id()).ok());
  EXPECT_FALSE(controller_->holds_unix_bind_tracker());
  // A sandbox whose entry carries no trait (an earlier build's, adopted)
  // but whose phase checks names keeps it: its own paths may be known by
  // name already, and only the tracker checks what they reach.
  auto old = Cgroup::Create(
      absl::StrCat(TestCgroupRoot(), "/unix-untraited-", getpid()));
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(controller_->AddSandbox(old->fd(), old->ref(), ModelOnly()).ok());
  EXPECT_TRUE(controller_->holds_unix_bind_tracker());
  ASSERT_TRUE(controller_->RemoveSandbox(old->id()).ok());
  EXPECT_FALSE(controller_->holds_unix_bind_tracker());
  rmdir(old->path().c_str());
}

// Issue 33's attack 1: the swap connected through io_uring, which no
// system call's exit sees. BPF LSM judges the socket reached; the cgroup
// hooks of a brokered sandbox (run's, an entered rollout's) never take a
// path for its own by name. (A sandbox left to the bind tracker, with
// io_uring allowed, is the case README "Unix" names.)
TEST_F(UnixHooksTest, AnIoUringConnectToASwappedNameReachesNothing) {
  UnixService docker(Path("docker-uring.sock"), SOCK_STREAM);
  Cgroup sb = NewSandbox(ModelOnly());
  if (!lsm_) {
    ASSERT_TRUE(controller_->SetUnixTraits(sb.id(), {.broker = true}).ok());
  }
  const int r = Probe(sb, "own-then-symlink-uring", Path("own-uring.sock"),
                      Path("docker-uring.sock"));
  unlink(Path("own-uring.sock").c_str());
  if (r == 253) GTEST_SKIP() << "io_uring is not available here";
  EXPECT_EQ(r, EPERM) << "0: the ring's connect reached the outside service";
}

// Issue 33's attack 4: a listed name with the host's socket mounted over it
// in the agent's own mount namespace. BPF LSM judges the name the server
// bound (not listed). The cgroup hooks see only the name: there the
// supervisor checks it
// (RunUnixAttackTest.NamespaceAttacksReachNothingWithTheGuardOff).
TEST_F(UnixHooksTest, AListedNameMountedOverReachesNothing) {
  if (!lsm_) {
    GTEST_SKIP() << "the cgroup hooks judge a listed name by its name; "
                    "sandfence's supervisor checks the socket it leads to "
                    "(tests/run/run_unix_attack_test.cc)";
  }
  UnixService host(Path("host-over.sock"), SOCK_STREAM);
  UnixService listed(Path("listed-over.sock"), SOCK_STREAM);
  Cgroup sb = NewSandbox(ModelOnly({UnixName{Path("listed-over.sock"), false}}));
  EXPECT_EQ(Probe(sb, "stream-connect", Path("listed-over.sock")), 0)
      << "the control: the listed socket";
  const int r = Probe(sb, "listed-overmount", Path("listed-over.sock"),
                      Path("host-over.sock"));
  if (r == 252) GTEST_SKIP() << "no mount namespace or bind mount here";
  EXPECT_EQ(r, EPERM) << "0: the listed name reached the host's socket";
}

// Issue 33's attack 2: the host socket's name bound again by the sandbox in
// a user and mount namespace of its own (a tmpfs over the directory), then
// connected from the sandbox's namespace. BPF LSM judges the socket
// reached; a brokered sandbox's hooks never take a path for its own by
// name (the bind tracker would kill the connect after the fact instead).
TEST_F(UnixHooksTest, ANameBoundAgainInAnotherNamespaceReachesNothing) {
  UnixService host(Path("host-rebound.sock"), SOCK_STREAM);
  Cgroup sb = NewSandbox(ModelOnly());
  if (!lsm_) {
    ASSERT_TRUE(controller_->SetUnixTraits(sb.id(), {.broker = true}).ok());
  }
  const int r = Probe(sb, "rebind-then-connect", Path("host-rebound.sock"));
  if (r == 252) GTEST_SKIP() << "no user and mount namespace here";
  EXPECT_EQ(r, EPERM) << "0: the connect reached the host's socket";
}

}  // namespace
}  // namespace sandfence::testing
