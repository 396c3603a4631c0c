// The cgroup_skb backstop and host loopback, on the running kernel. A UDP
// socket connected in a phase that allowed 127.0.0.6 keeps sending after a
// switch to a phase that does not: no connect or sendmsg hook runs for
// those datagrams (a connected send() carries no address), so the backstop
// alone judges them. Where cgroup_skb programs can read the socket's
// network namespace (bpf_get_netns_cookie, Linux 6.14+: this machine), it
// drops them like any host-loopback destination without a rule. Before
// that (the VM suite's 6.1 and 6.12) it cannot tell the host's loopback
// from a sandbox's own, and lets loopback through for sandboxes whose
// policy frees their own loopback: the documented exception. Under
// `loopback: LOOPBACK_RULES_ONLY` it drops them on every kernel.
#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/cgroup.h"
#include "common/unique_fd.h"
#include "egress/egress_controller.h"
#include "egress/spawn.h"
#include "gtest/gtest.h"
#include "support/host_probe.h"
#include "support/private_host.h"
#include "support/test_env.h"
#include "tests/egress/egress_fixture.h"

namespace sandfence::testing {
namespace {

// Whether a cgroup_skb program may call bpf_get_netns_cookie: probed here
// by loading one, independently of the controller's own probe.
bool SkbProgramsReadTheNetns() {
  bpf_insn insns[3] = {};
  insns[0].code = BPF_JMP | BPF_CALL;
  insns[0].imm = BPF_FUNC_get_netns_cookie;
  insns[1].code = BPF_ALU64 | BPF_MOV | BPF_K;
  insns[1].dst_reg = BPF_REG_0;
  insns[1].imm = 1;
  insns[2].code = BPF_JMP | BPF_EXIT;
  UniqueFd fd(bpf_prog_load(BPF_PROG_TYPE_CGROUP_SKB, "sf_test_cookie", "GPL",
                            insns, 3, nullptr));
  return static_cast<bool>(fd);
}

// Receives one datagram on fd within timeout_ms; "" if none came.
std::string Receive(int fd, int timeout_ms) {
  pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return "";
  char buf[64];
  ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  return n > 0 ? std::string(buf, n) : "";
}

class BackstopLoopbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    SANDFENCE_REQUIRE_HOST(HostKernelRunsEgress());
    if (access("/bin/bash", X_OK) != 0) {
      GTEST_SKIP() << "needs /bin/bash (its /dev/udp) for the sender";
    }
    auto c = EgressController::Create(PrivateHost());
    ASSERT_TRUE(c.ok()) << c.status();
    controller_ = *std::move(c);
    target_ = Listen("127.0.0.6");
    fifo_ = absl::StrCat("/tmp/sf-backstop-", getpid(), "-", ++serial_);
    unlink(fifo_.c_str());
    ASSERT_EQ(mkfifo(fifo_.c_str(), 0600), 0) << strerror(errno);
  }
  void TearDown() override {
    if (controller_ && sandbox_id_) {
      controller_->RemoveSandbox(sandbox_id_).IgnoreError();
    }
    unlink(fifo_.c_str());
  }

  // Connects in a phase that allows 127.0.0.6 (a first datagram proves
  // it), switches to one that does not, then sends once more. Returns
  // whether that second datagram arrived; *status is the sender's exit
  // status (1: its write failed).
  bool SecondDatagramArrives(v1::Loopback loopback, int* status) {
    const CompiledPhase allowing =
        Phase(v1::MODEL_ONLY, {UdpRule("127.0.0.6", target_.port)}, loopback);
    const CompiledPhase not_allowing =
        Phase(v1::MODEL_ONLY, {TcpRule("127.0.0.2", 9)}, loopback);
    auto cg = Cgroup::Create(
        absl::StrCat(TestCgroupRoot(), "/backstop-", serial_, "-", getpid()));
    EXPECT_TRUE(cg.ok()) << cg.status();
    if (!cg.ok()) return false;
    absl::Status added =
        controller_->AddSandbox(cg->fd(), cg->ref(), allowing).status();
    EXPECT_TRUE(added.ok()) << added;
    if (!added.ok()) return false;
    sandbox_id_ = cg->id();

    SpawnOptions o;
    o.cgroup_fd = cg->fd();
    o.argv = {"/bin/bash", "-c",
              absl::StrCat("exec 3<>/dev/udp/127.0.0.6/", target_.port,
                           " && echo first >&3 && read go < ", fifo_,
                           " && echo second >&3")};
    absl::StatusOr<pid_t> pid = SpawnInCgroup(o);
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) return false;
    EXPECT_EQ(Receive(target_.udp.get(), 20000), "first\n")
        << "the allowed phase's datagram did not arrive";

    absl::Status switched =
        controller_->SwitchPhase(cg->id(), not_allowing).status();
    EXPECT_TRUE(switched.ok()) << switched;
    // Let it send (bounded: ENXIO until it opens the fifo to read).
    UniqueFd go;
    for (int i = 0; i < 2000 && !go; ++i) {
      go.reset(open(fifo_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
      if (!go) usleep(10 * 1000);
    }
    EXPECT_TRUE(go) << "the sender never waited for the go";
    if (go) {
      EXPECT_EQ(write(go.get(), "go\n", 3), 3);
    }
    go.reset();
    absl::StatusOr<int> exit = WaitForExit(*pid);
    EXPECT_TRUE(exit.ok()) << exit.status();
    *status = exit.ok() ? *exit : -1;
    // Loopback delivers before send() returns: it is queued by now.
    return Receive(target_.udp.get(), 0) == "second\n";
  }

  static inline int serial_ = 0;
  std::unique_ptr<EgressController> controller_;
  Listener target_;
  std::string fifo_;
  uint64_t sandbox_id_ = 0;
};

TEST_F(BackstopLoopbackTest, ByDefaultHostLoopbackPassesOnlyWithoutTheNetns) {
  int status = -1;
  const bool arrived = SecondDatagramArrives(v1::LOOPBACK_DEFAULT, &status);
  if (SkbProgramsReadTheNetns()) {
    EXPECT_FALSE(arrived) << "the backstop let a host-loopback datagram with "
                             "no rule through";
    EXPECT_EQ(status, 1) << "the sender's write should fail with EPERM";
  } else {
    // The exception the README states for kernels whose cgroup_skb
    // programs cannot read the netns.
    EXPECT_TRUE(arrived) << "status " << status;
    EXPECT_EQ(status, 0);
  }
}

TEST_F(BackstopLoopbackTest, LoopbackRulesOnlyIsDroppedOnEveryKernel) {
  int status = -1;
  EXPECT_FALSE(SecondDatagramArrives(v1::LOOPBACK_RULES_ONLY, &status))
      << "cgroup_skb reads the netns: " << SkbProgramsReadTheNetns();
  EXPECT_EQ(status, 1);
}

}  // namespace
}  // namespace sandfence::testing
