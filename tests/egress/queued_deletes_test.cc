// Deletes a controller queued and never did because it was killed (issue
// 36): a phase switch leaves the old generation's rules to the controller's
// reaper thread, after the switch returned. A process killed in between
// used to leave them in the pinned maps for good; the journal (sf_doomed)
// lets the process that forgets the dead driver finish them. Real pinned
// maps, a real child process that dies with its deletes held.
#include <bpf/bpf.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "egress/egress_fixture.h"
#include "gtest/gtest.h"
#include "host/host_state.h"
#include "support/host_probe.h"
#include "support/test_env.h"

namespace sandfence::testing {
namespace {

// Keys of the pinned rule map `name` whose generation is `generation`.
template <typename K>
int KeysOf(const HostState& host, const char* name, uint32_t generation) {
  UniqueFd fd(bpf_obj_get(host.pins().Map(name).c_str()));
  EXPECT_TRUE(fd) << name << ": " << strerror(errno);
  int n = 0;
  K key{}, next{};
  const K* prev = nullptr;
  while (bpf_map_get_next_key(fd.get(), prev, &next) == 0) {
    n += next.generation == generation;
    key = next;
    prev = &key;
  }
  return n;
}

int RulesOf(const HostState& host, uint32_t generation) {
  return KeysOf<sf_exact4_key>(host, "sf_exact4", generation) +
         KeysOf<sf_exact6_key>(host, "sf_exact6", generation) +
         KeysOf<sf_cidr4_key>(host, "sf_cidr4", generation) +
         KeysOf<sf_cidr6_key>(host, "sf_cidr6", generation);
}

CompiledPhase Rules(uint16_t port) {
  return Phase(v1::MODEL_ONLY,
               {TcpRule("127.0.0.2", port), TcpRule("::1", port),
                TcpRule("127.0.1.0/24", port), TcpRule("fd00::/64", port)});
}

TEST(QueuedDeletes, AKilledControllersQueuedDeletesAreDoneByTheNextOne) {
  SANDFENCE_REQUIRE_ROOT();
  SANDFENCE_REQUIRE_HOST(HostKernelRunsEgress());
  const std::string root =
      absl::StrCat("/sys/fs/bpf/sandfence-doomed-", getpid());
  absl::StatusOr<Cgroup> sb =
      Cgroup::Create(absl::StrCat(TestCgroupRoot(), "/doomed-", getpid()));
  ASSERT_TRUE(sb.ok()) << sb.status();

  // The child: a controller of its own on the pinned root switches the
  // sandbox's phase with its reaper held, says which generations, and
  // dies (no destructor runs: as a SIGKILL would leave it).
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(report[0]);
    uint32_t gens[2] = {0, 0};
    auto host = HostState::Open({.pin_root = root});
    if (!host.ok()) _exit(2);
    auto c = EgressController::Create(host->get());
    if (!c.ok()) _exit(3);
    auto first = (*c)->AddSandbox(sb->fd(), sb->ref(), Rules(1000));
    if (!first.ok()) _exit(4);
    (*c)->HoldDeletesForTest();
    auto second = (*c)->SwitchPhase(sb->id(), Rules(2000));
    if (!second.ok()) _exit(5);
    gens[0] = *first;
    gens[1] = *second;
    (void)!write(report[1], gens, sizeof(gens));
    _exit(0);
  }
  close(report[1]);
  uint32_t gens[2] = {0, 0};
  ASSERT_EQ(read(report[0], gens, sizeof(gens)),
            static_cast<ssize_t>(sizeof(gens)));
  close(report[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const uint32_t old_gen = gens[0], live_gen = gens[1];

  auto host = HostState::Open({.pin_root = root});
  ASSERT_TRUE(host.ok()) << host.status();
  // What the child left: its old phase's rules, never deleted.
  ASSERT_EQ(RulesOf(**host, old_gen), 4)
      << "the child's reaper ran after all: the test proves nothing";
  ASSERT_EQ(RulesOf(**host, live_gen), 4);

  auto next = EgressController::Create(host->get());
  ASSERT_TRUE(next.ok()) << next.status();
  const std::vector<DeadDriver> dead = (*host)->DeadDrivers();
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ((*next)->FinishDeletesOf(dead[0].slot), 1u);
  EXPECT_EQ(RulesOf(**host, old_gen), 0) << "the dead one's queued deletes";
  EXPECT_EQ(RulesOf(**host, live_gen), 4)
      << "the sandbox's phase in force is not a queued delete";
  EXPECT_EQ((*next)->FinishDeletesOf(dead[0].slot), 0u) << "done once";

  // The sandbox, adopted and ended; the pins go.
  ASSERT_TRUE((*next)->AdoptSandbox(sb->id()).ok());
  ASSERT_TRUE((*next)->RemoveSandbox(sb->id()).ok());
  (*next)->FinishDeletes();
  EXPECT_EQ(RulesOf(**host, live_gen), 0);
  next->reset();
  (*host)->FreeSlot(dead[0].slot);
  host->reset();
  EXPECT_TRUE(EgressController::RemovePins(root).ok());
  rmdir(root.c_str());
}

}  // namespace
}  // namespace sandfence::testing
