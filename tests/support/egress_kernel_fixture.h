// The base of the egress suites that run real sandboxes in the kernel: one
// EgressController for the test binary, sandboxes (cgroups with a phase
// attached) under TestCgroupRoot(), children in them (net_probe, or any
// argv), and the controller's events.
#ifndef SANDFENCE_TESTS_SUPPORT_EGRESS_KERNEL_FIXTURE_H_
#define SANDFENCE_TESTS_SUPPORT_EGRESS_KERNEL_FIXTURE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/cgroup.h"
#include "compile/compiled_policy.h"
#include "egress/egress_controller.h"
#include "egress/net_event.h"
#include "gtest/gtest.h"

namespace sandfence::testing {

class EgressKernelTest : public ::testing::Test {
 protected:
  // Deletes the controller and removes the test binary's cgroup root.
  static void TearDownTestSuite();

  // Skips without root or a kernel that runs the egress programs. Loads the
  // controller once, in a test (not SetUpTestSuite), so that a kernel that
  // refuses the programs fails every case instead of skipping them. A
  // suite's own SetUp calls this first, and returns when it skipped or
  // failed (IsSkipped() || HasFatalFailure()).
  void SetUp() override;

  // Removes every sandbox NewSandbox added from the controller, the last
  // added first (a nested one before its parent).
  void TearDown() override;

  // A new cgroup `parent`/sb<n>-<pid> (parent "": TestCgroupRoot()) with
  // `phase` attached; removed from the controller at TearDown, and from
  // the cgroup tree when the returned object goes.
  Cgroup NewSandbox(const CompiledPhase& phase, const std::string& parent = "");

  // Starts argv in `sandbox`, its capabilities dropped unless keep_caps (as
  // root with every capability: CAP_NET_RAW lets raw sockets reach
  // cgroup/sock_create instead of failing the kernel's capability check),
  // in a private network namespace with only lo if new_netns. -1 (and a
  // failure) if it could not start.
  static pid_t Start(const Cgroup& sandbox, std::vector<std::string> argv,
                     bool new_netns = false, bool keep_caps = false);
  // A started child's exit status; -1 if there is none.
  static int Wait(pid_t pid);
  // net_probe with `args` in `sandbox` (Start, then Wait): the errno its
  // attempt got (0: it went through, EPERM: denied by sandfence).
  static int Probe(const Cgroup& sandbox, std::vector<std::string> args,
                   bool new_netns = false, bool keep_caps = false);

  // From now on the controller's events are read into events_ (by
  // reader_->Drain()).
  void ReadEvents();

  static EgressController* controller_;
  std::vector<uint64_t> sandbox_ids_;
  std::unique_ptr<NetEventReader> reader_;
  std::vector<NetEvent> events_;
};

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_SUPPORT_EGRESS_KERNEL_FIXTURE_H_
