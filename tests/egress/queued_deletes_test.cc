// What a killed sandfence process leaves to the next one (issue 36), with
// real pinned maps and real child processes:
// - deletes it queued and never did: a phase switch leaves the old
//   generation's rules to the controller's reaper thread, after the switch
//   returned; the journal (sf_doomed) lets the process that forgets the
//   dead driver finish them;
// - its slot: forgotten once, by whoever comes first. A second process
//   that also saw it dead must leave the slot alone, since a live process
//   may have taken it in between (its ring, its journal).
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
#include "sandbox/kernel_enforcement.h"
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

// The pinned drivers map's entry of `slot`.
sf_driver DriverAt(const HostState& host, uint32_t slot) {
  UniqueFd fd(bpf_obj_get(host.pins().DriversMap().c_str()));
  sf_driver d{};
  EXPECT_EQ(bpf_map_lookup_elem(fd.get(), &slot, &d), 0) << strerror(errno);
  return d;
}

// A child that registers on the pinned root (with a controller: its ring
// sits in its slot), writes its slot, and then either dies at once or
// waits for the other end of `hold` (hold_writer, closed here) to close.
pid_t Driver(const std::string& root, int report, int hold = -1,
             int hold_writer = -1) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (hold_writer >= 0) close(hold_writer);
  auto host = HostState::Open({.pin_root = root});
  if (!host.ok()) _exit(2);
  auto c = EgressController::Create(host->get());
  if (!c.ok()) _exit(3);
  const uint32_t slot = (*host)->slot();
  (void)!write(report, &slot, sizeof(slot));
  if (hold >= 0) {
    char byte;
    (void)!read(hold, &byte, 1);
  }
  _exit(0);  // no destructor: as a kill would leave it
}

uint32_t ReadSlot(int fd) {
  uint32_t slot = ~0u;
  EXPECT_EQ(read(fd, &slot, sizeof(slot)),
            static_cast<ssize_t>(sizeof(slot)));
  return slot;
}

TEST(DeadDrivers, ASecondForgetOfADeadDriverLeavesItsSlotsNewOwnerAlone) {
  SANDFENCE_REQUIRE_ROOT();
  SANDFENCE_REQUIRE_HOST(HostKernelRunsEgress());
  const std::string root =
      absl::StrCat("/sys/fs/bpf/sandfence-forget-", getpid());
  KernelEnforcementOptions options;
  options.host.pin_root = root;
  auto kernel = KernelEnforcement::Create(options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  int report[2];
  ASSERT_EQ(pipe(report), 0);

  // A dies; this process sees it dead, and (as a first reaper would)
  // forgets it: its slot is free.
  const pid_t a = Driver(root, report[1]);
  const uint32_t slot = ReadSlot(report[0]);
  ASSERT_EQ(waitpid(a, nullptr, 0), a);
  const std::vector<DeadDriver> dead = (*kernel)->DeadDrivers();
  ASSERT_EQ(dead.size(), 1u);
  ASSERT_EQ(dead[0].slot, slot);
  (*kernel)->ForgetDeadDriver(dead[0]);

  // B takes the free slot and lives.
  int hold[2];
  ASSERT_EQ(pipe(hold), 0);
  const pid_t b = Driver(root, report[1], hold[0], hold[1]);
  ASSERT_EQ(ReadSlot(report[0]), slot) << "B did not get A's old slot";
  auto probe = HostState::Open({.pin_root = root});
  ASSERT_TRUE(probe.ok()) << probe.status();
  ASSERT_EQ(DriverAt(**probe, slot).pid, static_cast<uint32_t>(b));
  auto ring = [&] {
    UniqueFd rings(bpf_obj_get((*probe)->pins().Map("sf_rings").c_str()));
    uint32_t id = 0;
    return bpf_map_lookup_elem(rings.get(), &slot, &id) == 0;
  };
  ASSERT_TRUE(ring()) << "B's ring is not in its slot";

  // A second reaper that saw A dead before B came forgets A again: B's
  // slot and ring stay.
  (*kernel)->ForgetDeadDriver(dead[0]);
  EXPECT_EQ(DriverAt(**probe, slot).pid, static_cast<uint32_t>(b))
      << "B's slot was freed under it";
  EXPECT_TRUE(ring()) << "B's ring was taken from it";
  EXPECT_TRUE((*kernel)->RecoverEvents(dead[0]).ok());

  close(hold[1]);
  ASSERT_EQ(waitpid(b, nullptr, 0), b);
  for (const DeadDriver& d : (*kernel)->DeadDrivers()) {
    (*kernel)->ForgetDeadDriver(d);
  }
  probe->reset();
  kernel->reset();
  EXPECT_TRUE(EgressController::RemovePins(root).ok());
  rmdir(root.c_str());
}

}  // namespace
}  // namespace sandfence::testing
