// Sandbox (userspace/sandbox/sandbox.h) over FakeEnforcement: the order of
// its steps, what a failure undoes, the generation each switch returns, what
// adoption trusts, and what a borrowed sandbox never touches. No root, no
// BPF: the real enforcement is covered by the kernel suites.
#include "sandbox/sandbox.h"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "records/journal.h"
#include "sandbox/fake_enforcement.h"
#include "sandbox/reaper.h"
#include "support/test_files.h"

namespace sandfence::testing {
namespace {

using ::testing::HasSubstr;

bool Exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

// Where `name` first appears in the call log; -1 if never.
int IndexOf(const std::vector<std::string>& calls, absl::string_view name) {
  for (size_t i = 0; i < calls.size(); ++i) {
    if (absl::StartsWith(calls[i], name)) return static_cast<int>(i);
  }
  return -1;
}

bool Called(const std::vector<std::string>& calls, absl::string_view name) {
  return IndexOf(calls, name) >= 0;
}

CompiledPhase Phase(const std::string& name, v1::NetworkAccess access) {
  CompiledPhase p;
  p.name = name;
  p.access = access;
  return p;
}

// "agent" (restricted), "verify" (inherit), "grade" (restricted).
CompiledPolicy ThreePhases() {
  CompiledPolicy policy;
  policy.name = "test";
  policy.content_hash = "0123";
  policy.phases = {Phase("agent", v1::MODEL_ONLY), Phase("verify", v1::INHERIT),
                   Phase("grade", v1::MODEL_ONLY)};
  return policy;
}

NetEvent EventFor(uint64_t cgroup_id, uint32_t generation) {
  NetEvent e;
  e.sandbox = cgroup_id;
  e.cgroup = cgroup_id;
  e.generation = generation;
  e.verdict = SF_VERDICT_DENY;
  e.reason = SF_REASON_NO_RULE;
  e.hook = SF_HOOK_CONNECT4;
  e.protocol = 6;
  e.port = 9;
  e.addr = *IpAddress::Parse("127.0.0.9");
  e.comm = "probe";
  return e;
}

// "agent@1 verify@0": each span's phase and generation.
std::string Timeline(const v1::RolloutRecord& rec) {
  std::vector<std::string> spans;
  for (const v1::PhaseSpan& s : rec.timeline()) {
    spans.push_back(absl::StrCat(s.name(), "@", s.generation()));
  }
  return absl::StrJoin(spans, " ");
}

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<ScopedTempDir>(*std::move(dir));
    kernel_ = std::make_shared<FakeKernel>();
    host_ = std::make_unique<FakeEnforcement>(kernel_);
  }

  SandboxSpec Spec(const std::string& id) {
    SandboxSpec spec;
    spec.rollout_id = id;
    spec.cgroup_path = absl::StrCat("/fake/sandfence/", id);
    spec.policy = ThreePhases();
    spec.record_path = dir_->Path(absl::StrCat(id, ".record"));
    spec.record_options.sync = false;
    return spec;
  }

  SandboxAdoptSpec AdoptSpec(const std::string& id, const CgroupRef& cgroup,
                             const std::string& believed) {
    SandboxAdoptSpec spec;
    spec.rollout_id = id;
    spec.cgroup_path = cgroup.path;
    spec.cgroup_id = cgroup.id;
    spec.created = true;
    spec.policy = ThreePhases();
    spec.guard_mode = GuardMode::kAuto;
    spec.believed_phase = believed;
    spec.record_path = dir_->Path(absl::StrCat(id, ".1.record"));
    spec.record_options.sync = false;
    return spec;
  }

  // Whether the hub still routes the cgroup's events (an unrouted event is
  // counted).
  bool Routed(uint64_t cgroup_id) {
    const uint64_t before = host_->events().counts().net_unrouted;
    host_->events().DispatchNet(EventFor(cgroup_id, 0));
    return host_->events().counts().net_unrouted == before;
  }

  std::unique_ptr<ScopedTempDir> dir_;
  std::shared_ptr<FakeKernel> kernel_;
  std::unique_ptr<FakeEnforcement> host_;
};

// --- Start ---

TEST_F(SandboxTest, StartRefusesFirstThenCgroupThenRecordThenAttachThenGuard) {
  const SandboxSpec spec = Spec("r1");
  bool record_at_attach = false;
  bool routed_at_attach = false;
  kernel_->OnCall([&](FakeCall call, uint64_t id) {
    if (call != FakeCall::kAttachEgress) return;
    // records/recorder.h: the span starts before the kernel switches, and
    // the route exists before the kernel can report anything.
    record_at_attach = Exists(spec.record_path);
    routed_at_attach = Routed(id);
  });
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_TRUE(record_at_attach)
      << "the record must be open before the egress hooks are attached";
  EXPECT_TRUE(routed_at_attach)
      << "the sandbox's events must be routed before the hooks are attached";

  const std::vector<std::string> calls = kernel_->Calls();
  const std::string log = absl::StrJoin(calls, " ");
  ASSERT_GE(IndexOf(calls, "PrepareGuard"), 0) << log;
  EXPECT_LT(IndexOf(calls, "PrepareGuard"), IndexOf(calls, "CreateCgroup"))
      << log;
  EXPECT_LT(IndexOf(calls, "CreateCgroup"), IndexOf(calls, "AttachEgress"))
      << log;
  EXPECT_LT(IndexOf(calls, "AttachEgress"), IndexOf(calls, "AddGuard")) << log;

  const uint64_t id = (*sb)->cgroup().id;
  std::optional<FakeEgress> egress = kernel_->Egress(id);
  ASSERT_TRUE(egress.has_value());
  EXPECT_EQ(egress->phase, 0);
  EXPECT_EQ((*sb)->generation(), egress->generation);
  EXPECT_EQ((*sb)->phase(), "agent");
  // The BPF guard PrepareGuard chose for auto (the fake host runs signal).
  EXPECT_EQ(kernel_->Guarded(id), GuardMode::kSignal);
  EXPECT_TRUE((*sb)->created());
  EXPECT_FALSE((*sb)->borrowed());
  EXPECT_THAT((*sb)->guard_text(), HasSubstr("signal"));
}

TEST_F(SandboxTest, StartWithInitialPhaseWritesItsIndex) {
  SandboxSpec spec = Spec("r1");
  spec.initial_phase = "grade";
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ((*sb)->phase(), "grade");
  EXPECT_EQ(kernel_->Egress((*sb)->cgroup().id)->phase, 2);
}

TEST_F(SandboxTest, UnknownInitialPhaseIsMalformedAndTouchesNothing) {
  SandboxSpec spec = Spec("r1");
  spec.initial_phase = "nope";
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(sb.status().message()), HasSubstr("\"nope\""));
  EXPECT_THAT(std::string(sb.status().message()),
              HasSubstr("agent, verify, grade"));
  // Nothing is asked of the host. (The refused Sandbox's destructor
  // releases cgroup id 0, which it never held: a no-op on the real
  // enforcement, tolerated here.)
  for (const std::string& call : kernel_->Calls()) {
    EXPECT_EQ(call, "ReleaseCgroup(0)") << "a refused start called the host";
  }
  EXPECT_FALSE(Exists(spec.record_path));
}

// On a host without the Unix socket hooks, any phase that checks Unix
// sockets (not only the first) refuses the start before anything exists;
// UNCHECKED phases start.
TEST_F(SandboxTest, UnixCheckingWithoutTheKernelsHooksIsRefusedBeforeAnything) {
  host_->unix_unavailable = "this kernel has no cgroup connect_unix hooks";
  SandboxSpec spec = Spec("r1");
  spec.policy.phases[2].unix_checked = true;  // "grade", not the first
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(RefusalOf(sb.status()), Refusal::kRejected) << sb.status();
  EXPECT_THAT(std::string(sb.status().message()), HasSubstr("\"grade\""));
  EXPECT_THAT(std::string(sb.status().message()),
              HasSubstr("no cgroup connect_unix hooks"));
  EXPECT_THAT(std::string(sb.status().message()),
              HasSubstr("unix { mode: UNCHECKED }"));
  for (const std::string& call : kernel_->Calls()) {
    EXPECT_EQ(call, "ReleaseCgroup(0)") << "a refused start called the host";
  }
  EXPECT_FALSE(Exists(spec.record_path));

  spec.policy.phases[2].unix_checked = false;
  spec.policy.phases[2].unix_unchecked = true;
  sb = Sandbox::Start(host_.get(), spec);
  ASSERT_TRUE(sb.ok()) << sb.status();
}

TEST_F(SandboxTest, GuardModeTheHostCannotHaveIsRefusedBeforeAnything) {
  SandboxSpec spec = Spec("r1");
  spec.guard_mode = GuardMode::kLsm;  // the fake host runs signal
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(sb.status().message()), HasSubstr("phase \"agent\""));
  EXPECT_EQ(kernel_->CallCount(FakeCall::kCreateCgroup), 0);
  EXPECT_FALSE(Exists(spec.record_path));
}

// Each step that fails undoes every step before it: no cgroup, no record,
// no hooks, no guard, no route.
struct UndoCase {
  const char* name;
  FakeCall fails;
  absl::StatusCode want;
};

class StartUndoTest : public SandboxTest,
                      public ::testing::WithParamInterface<UndoCase> {};

TEST_P(StartUndoTest, FailureUndoesEverythingBefore) {
  const UndoCase& c = GetParam();
  const SandboxSpec spec = Spec("r1");
  kernel_->FailNth(c.fails, 1, absl::InternalError("fake: map is full"));
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_FALSE(sb.ok()) << c.name;
  EXPECT_EQ(sb.status().code(), c.want) << sb.status();
  EXPECT_THAT(std::string(sb.status().message()),
              HasSubstr("fake: map is full"));

  std::optional<FakeCgroup> cg = kernel_->Cgroup(spec.cgroup_path);
  ASSERT_TRUE(cg.has_value());
  EXPECT_TRUE(cg->removed) << "the created cgroup must be removed";
  EXPECT_EQ(cg->holders, 0) << "the cgroup must be let go";
  EXPECT_GE(cg->kills, 1) << "what ran in it must be killed first";
  EXPECT_THAT(kernel_->AllEgress(), ::testing::IsEmpty());
  EXPECT_FALSE(kernel_->Guarded(cg->ref.id).has_value());
  EXPECT_FALSE(Exists(spec.record_path)) << "the record must be removed";
  EXPECT_FALSE(Routed(cg->ref.id)) << "the route must be removed";
  // The same rollout can start again.
  absl::StatusOr<std::unique_ptr<Sandbox>> again =
      Sandbox::Start(host_.get(), spec);
  EXPECT_TRUE(again.ok()) << again.status();
}

INSTANTIATE_TEST_SUITE_P(
    Steps, StartUndoTest,
    ::testing::Values(UndoCase{"attach", FakeCall::kAttachEgress,
                               absl::StatusCode::kInternal},
                      UndoCase{"guard", FakeCall::kAddGuard,
                               absl::StatusCode::kInternal}),
    [](const ::testing::TestParamInfo<UndoCase>& p) {
      return std::string(p.param.name);
    });

TEST_F(SandboxTest, AttachAlreadyExistsIsTheAlreadyEnforcedRefusal) {
  // The code decides, never the text: this message says nothing of
  // "exists".
  kernel_->FailNth(FakeCall::kAttachEgress, 1,
                   absl::AlreadyExistsError("fake: zzz"));
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), Spec("r1"));
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(sb.status().message()),
              HasSubstr("is already enforced by sandfence"));
}

TEST_F(SandboxTest, CgroupThatExistsIsRefusedAndNotRemoved) {
  const SandboxSpec spec = Spec("r1");
  kernel_->AddCgroup(spec.cgroup_path);
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(kernel_->Cgroup(spec.cgroup_path)->removed);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kKillCgroup), 0);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAttachEgress), 0);
}

// --- SwitchPhase ---

TEST_F(SandboxTest, EachSwitchReturnsTheGenerationItWrote) {
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), Spec("r1"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  Sandbox& s = **sb;
  const uint64_t id = s.cgroup().id;
  const uint32_t first = s.generation();

  // Another sandbox takes a generation in between: generations are the
  // host's, not the sandbox's.
  absl::StatusOr<std::unique_ptr<Sandbox>> other =
      Sandbox::Start(host_.get(), Spec("r2"));
  ASSERT_TRUE(other.ok()) << other.status();

  absl::StatusOr<PhaseChange> v = s.SwitchPhase("verify");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->changed);
  EXPECT_EQ(v->previous, "agent");
  EXPECT_EQ(v->phase, "verify");
  EXPECT_EQ(v->generation, kernel_->Egress(id)->generation);
  EXPECT_GT(v->generation, (*other)->generation());
  EXPECT_EQ(kernel_->Egress(id)->phase, 1);
  EXPECT_EQ(s.generation(), v->generation);

  absl::StatusOr<PhaseChange> g = s.SwitchPhase("grade");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->generation, kernel_->Egress(id)->generation);
  EXPECT_GT(g->generation, v->generation);
  EXPECT_EQ(kernel_->Egress(id)->phase, 2);
  EXPECT_GT(v->generation, first);

  // A retried switch: the same answer, nothing written.
  const int switches = kernel_->CallCount(FakeCall::kSwitchEgress);
  absl::StatusOr<PhaseChange> again = s.SwitchPhase("grade");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(again->generation, g->generation);
  EXPECT_EQ(again->previous, "grade");
  EXPECT_EQ(kernel_->CallCount(FakeCall::kSwitchEgress), switches);

  // The record's spans carry the generations the switches returned.
  absl::StatusOr<SandboxEnd> end = s.End();
  ASSERT_TRUE(end.ok()) << end.status();
  absl::StatusOr<v1::RolloutRecord> rec =
      ReadRecordFile(dir_->Path("r1.record"));
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_EQ(rec->timeline_size(), 3) << rec->DebugString();
  EXPECT_EQ(rec->timeline(0).name(), "agent");
  EXPECT_EQ(rec->timeline(0).generation(), first);
  EXPECT_EQ(rec->timeline(1).name(), "verify");
  EXPECT_EQ(rec->timeline(1).generation(), v->generation);
  EXPECT_EQ(rec->timeline(2).name(), "grade");
  EXPECT_EQ(rec->timeline(2).generation(), g->generation);
}

TEST_F(SandboxTest, UnknownPhaseIsMalformedWithTheNamesAndChangesNothing) {
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), Spec("r1"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  const uint64_t id = (*sb)->cgroup().id;
  const FakeEgress before = *kernel_->Egress(id);
  absl::StatusOr<PhaseChange> c = (*sb)->SwitchPhase("review");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("\"review\""));
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("agent, verify, grade"));
  EXPECT_EQ(kernel_->Egress(id)->generation, before.generation);
  EXPECT_EQ(kernel_->Egress(id)->phase, before.phase);
  EXPECT_EQ((*sb)->phase(), "agent");
}

TEST_F(SandboxTest, FailedSwitchKeepsThePhaseInForceAndCanBeRetried) {
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), Spec("r1"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  const uint32_t first = (*sb)->generation();
  kernel_->FailNth(FakeCall::kSwitchEgress, 1,
                   absl::UnavailableError("fake: busy"));
  absl::StatusOr<PhaseChange> c = (*sb)->SwitchPhase("verify");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("switch to phase verify"));
  EXPECT_EQ((*sb)->phase(), "agent");
  EXPECT_EQ((*sb)->generation(), first);
  absl::StatusOr<PhaseChange> retry = (*sb)->SwitchPhase("verify");
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->changed);
  EXPECT_GT(retry->generation, first);
}

// Issue 15: where the host cannot cut connections, a switch still holds,
// and says why nothing was cut; a CUT_REQUIRED policy is refused there
// before anything exists.
TEST_F(SandboxTest, ASwitchThatCannotCutSaysWhy) {
  host_->cut_unavailable = "fake: no bpf_sock_destroy";
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), Spec("r1"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  absl::StatusOr<PhaseChange> c = (*sb)->SwitchPhase("verify");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->changed);
  EXPECT_TRUE(c->cut.empty());
  EXPECT_EQ(c->not_cut, "fake: no bpf_sock_destroy");
}

TEST_F(SandboxTest, CutRequiredIsRefusedWhereTheHostCannotCut) {
  host_->cut_unavailable = "fake: no bpf_sock_destroy";
  SandboxSpec spec = Spec("r1");
  spec.policy.cut_required = true;
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), std::move(spec));
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(RefusalOf(sb.status()), Refusal::kRejected) << sb.status();
  EXPECT_THAT(std::string(sb.status().message()),
              HasSubstr("on_switch: CUT_REQUIRED"));
  EXPECT_THAT(std::string(sb.status().message()),
              HasSubstr("fake: no bpf_sock_destroy"));
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAttachEgress), 0)
      << "refused before anything was attached";
  // Where the host can cut, the same policy starts.
  host_->cut_unavailable = "";
  SandboxSpec ok = Spec("r2");
  ok.policy.cut_required = true;
  EXPECT_TRUE(Sandbox::Start(host_.get(), std::move(ok)).ok());
}

// A switch the kernel refused never took effect: the record must not end
// in a phase that was never enforced.
TEST_F(SandboxTest, FailedSwitchLeavesTheRecordInThePhaseInForce) {
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), Spec("r1"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  const uint32_t first = (*sb)->generation();
  kernel_->FailNth(FakeCall::kSwitchEgress, 1,
                   absl::UnavailableError("fake: busy"));
  ASSERT_FALSE((*sb)->SwitchPhase("verify").ok());
  absl::StatusOr<SandboxEnd> end = (*sb)->End();
  ASSERT_TRUE(end.ok()) << end.status();
  absl::StatusOr<v1::RolloutRecord> rec =
      ReadRecordFile(dir_->Path("r1.record"));
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_GE(rec->timeline_size(), 1);
  const v1::PhaseSpan& last = rec->timeline(rec->timeline_size() - 1);
  EXPECT_EQ(last.name(), "agent")
      << "PRODUCT BUG (userspace/sandbox/sandbox.cc, Sandbox::SwitchPhase): "
         "the record's span for \"verify\" is begun before the kernel "
         "switch and left open when the switch fails, so the record ends in "
         "a phase the kernel never enforced (it enforced \"agent\", "
         "generation "
      << first << "); timeline: " << Timeline(*rec);
}

// Its processes die before the hooks come off (sandbox.cc, End): when they
// cannot be killed, the hooks and the guard must stay, or what is left runs
// unenforced.
TEST_F(SandboxTest, EndKeepsEnforcementWhenTheProcessesCannotBeKilled) {
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), Spec("r1"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  const uint64_t id = (*sb)->cgroup().id;
  kernel_->FailNth(FakeCall::kKillCgroup, 1,
                   absl::UnavailableError("fake: cgroup did not empty"));
  absl::StatusOr<SandboxEnd> end = (*sb)->End();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->cleanup.ok()) << "the failed kill must be reported";
  EXPECT_TRUE(kernel_->Egress(id).has_value())
      << "PRODUCT BUG (userspace/sandbox/sandbox.cc, Sandbox::End): the "
         "egress hooks are detached although KillCgroup failed, so the "
         "sandbox's surviving processes run with no egress policy";
  EXPECT_TRUE(kernel_->Guarded(id).has_value())
      << "PRODUCT BUG (userspace/sandbox/sandbox.cc, Sandbox::End): the "
         "process guard is removed although KillCgroup failed";
}

// --- End and events ---

TEST_F(SandboxTest, EndKillsThenDrainsThenRemovesGuardAndHooksThenCgroup) {
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), Spec("r1"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  const uint64_t id = (*sb)->cgroup().id;
  int seen = 0;
  (*sb)->AddListener(SandboxListener{[&](const NetEvent&) { ++seen; }, {}});
  SandboxCounters counters;
  counters.allowed = 3;
  counters.denied = 2;
  counters.events_lost = 1;
  kernel_->SetCounters(id, counters);
  kernel_->SetGuardLost(id, 4);
  // Queued in the ring, not yet read: End must read it into the record.
  host_->Queue(EventFor(id, (*sb)->generation()));

  const size_t skip = kernel_->Calls().size();
  absl::StatusOr<SandboxEnd> end = (*sb)->End();
  ASSERT_TRUE(end.ok()) << end.status();
  std::vector<std::string> calls = kernel_->Calls();
  calls.erase(calls.begin(), calls.begin() + skip);
  const std::string log = absl::StrJoin(calls, " ");
  EXPECT_LT(IndexOf(calls, "KillCgroup"), IndexOf(calls, "DrainEvents")) << log;
  EXPECT_LT(IndexOf(calls, "DrainEvents"), IndexOf(calls, "RemoveGuard"))
      << log;
  EXPECT_LT(IndexOf(calls, "RemoveGuard"), IndexOf(calls, "DetachEgress"))
      << log;
  EXPECT_LT(IndexOf(calls, "DetachEgress"), IndexOf(calls, "ReleaseCgroup"))
      << log;
  EXPECT_EQ(IndexOf(calls, "KillCgroup"), 0) << log;

  EXPECT_EQ(seen, 1) << "the queued event must reach the sandbox at End";
  EXPECT_TRUE(end->counters_read);
  EXPECT_EQ(end->counters.allowed, 3u);
  EXPECT_EQ(end->counters.denied, 2u);
  EXPECT_EQ(end->guard_events_lost, 4u);
  EXPECT_TRUE(end->cleanup.ok()) << end->cleanup;
  ASSERT_TRUE(end->record.has_value());
  EXPECT_TRUE(end->record->lossy);  // a kernel loss and guard losses

  EXPECT_TRUE(kernel_->CgroupById(id)->removed);
  EXPECT_FALSE(kernel_->Egress(id).has_value());
  EXPECT_FALSE(kernel_->Guarded(id).has_value());
  EXPECT_FALSE(Routed(id));

  absl::StatusOr<v1::RolloutRecord> rec =
      ReadRecordFile(dir_->Path("r1.record"));
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(rec->net_attempt_size(), 1);
  EXPECT_EQ(rec->loss().guard_events_lost(), 4u);

  absl::StatusOr<SandboxEnd> twice = (*sb)->End();
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<PhaseChange> after = (*sb)->SwitchPhase("verify");
  EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SandboxTest, AnOpenedCgroupIsNeverKilledOrRemoved) {
  SandboxSpec spec = Spec("r1");
  const CgroupRef existing = kernel_->AddCgroup("/fake/agents/a1");
  spec.cgroup_path = existing.path;
  spec.create_cgroup = false;
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ((*sb)->cgroup().id, existing.id);
  EXPECT_TRUE(kernel_->Egress(existing.id).has_value());
  ASSERT_TRUE((*sb)->End().ok());
  EXPECT_EQ(kernel_->CallCount(FakeCall::kKillCgroup), 0);
  EXPECT_FALSE(kernel_->Cgroup(existing.path)->removed);
  EXPECT_EQ(kernel_->Cgroup(existing.path)->holders, 0);
  EXPECT_FALSE(kernel_->Egress(existing.id).has_value());
}

TEST_F(SandboxTest, ReleaseLeavesEverythingEnforced) {
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), Spec("r1"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  const uint64_t id = (*sb)->cgroup().id;
  sb->reset();  // destroyed without End: released
  EXPECT_TRUE(kernel_->Egress(id).has_value());
  EXPECT_TRUE(kernel_->Guarded(id).has_value());
  EXPECT_FALSE(kernel_->CgroupById(id)->removed);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kKillCgroup), 0);
  EXPECT_FALSE(Routed(id));
}

// --- Borrowed ---

TEST_F(SandboxTest, BorrowedNeverTouchesEgressOrGuard) {
  SandboxSpec spec = Spec("r2");
  const CgroupRef existing = kernel_->AddCgroup("/fake/agents/a1");
  spec.cgroup_path = existing.path;
  spec.create_cgroup = false;
  spec.borrowed = true;
  spec.borrowed_guard_text = "lsm (the guard of rollout \"r1\")";
  spec.guard_mode = GuardMode::kLsm;  // ignored: the owner's guard governs
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_TRUE((*sb)->borrowed());
  EXPECT_EQ((*sb)->guard_text(), spec.borrowed_guard_text);
  EXPECT_EQ((*sb)->guard_mode(), GuardMode::kOff);
  absl::StatusOr<PhaseChange> c = (*sb)->SwitchPhase("verify");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->changed);
  EXPECT_EQ(c->generation, 0u);
  absl::StatusOr<SandboxCounters> counters = (*sb)->Counters();
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ(counters->allowed, 0u);
  absl::StatusOr<SandboxEnd> end = (*sb)->End();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_TRUE(end->counters_read);

  const std::vector<std::string> calls = kernel_->Calls();
  for (const char* never :
       {"AttachEgress", "SwitchEgress", "DetachEgress", "EgressCounters",
        "AdoptEgress", "PrepareGuard", "AddGuard", "RemoveGuard", "AdoptGuard",
        "KillCgroup"}) {
    EXPECT_FALSE(Called(calls, never))
        << never
        << " called for a borrowed sandbox: " << absl::StrJoin(calls, " ");
  }
  EXPECT_FALSE(kernel_->Cgroup(existing.path)->removed);
  EXPECT_TRUE(Exists(spec.record_path)) << "a borrower keeps its record";
}

TEST_F(SandboxTest, BorrowedAdoptionNeverTouchesEgressOrGuard) {
  const CgroupRef existing = kernel_->AddCgroup("/fake/agents/a1");
  SandboxAdoptSpec spec = AdoptSpec("r2", existing, "verify");
  spec.created = false;
  spec.borrowed = true;
  spec.borrowed_guard_text = "owner's";
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Adopt(host_.get(), spec);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ((*sb)->phase(), "verify");
  EXPECT_EQ((*sb)->guard_text(), "owner's");
  ASSERT_TRUE((*sb)->End().ok());
  const std::vector<std::string> calls = kernel_->Calls();
  for (const char* never :
       {"AttachEgress", "DetachEgress", "AdoptEgress", "PrepareGuard",
        "AddGuard", "RemoveGuard", "AdoptGuard", "KillCgroup"}) {
    EXPECT_FALSE(Called(calls, never))
        << never
        << " called adopting a borrowed sandbox: " << absl::StrJoin(calls, " ");
  }
}

// --- Adopt ---

TEST_F(SandboxTest, AdoptionTrustsTheKernelsPhaseAndSaysWhenBeliefDiffers) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/sandfence/r1");
  FakeEgress left;
  left.generation = 41;
  left.phase = 1;  // "verify": the switch happened, the state never said so
  left.ring = 9;
  kernel_->PutEgress(cg.id, left);
  kernel_->PutGuard(cg.id, GuardMode::kAuto);
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Adopt(host_.get(), AdoptSpec("r1", cg, "agent"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ((*sb)->phase(), "verify");
  EXPECT_EQ((*sb)->generation(), 41u);
  ASSERT_EQ((*sb)->adoption_warnings().size(), 1u)
      << absl::StrJoin((*sb)->adoption_warnings(), "\n");
  EXPECT_THAT((*sb)->adoption_warnings()[0],
              HasSubstr("believed phase \"agent\""));
  EXPECT_THAT((*sb)->adoption_warnings()[0],
              HasSubstr("the kernel enforced phase \"verify\""));
  // Taken over as it was: not attached again, not guarded again.
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAttachEgress), 0);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAddGuard), 0);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kKillCgroup), 0);
  EXPECT_EQ(kernel_->Egress(cg.id)->ring, host_->slot());
  EXPECT_TRUE(Routed(cg.id));

  // Its next switch writes a later generation.
  absl::StatusOr<PhaseChange> c = (*sb)->SwitchPhase("grade");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->previous, "verify");
  EXPECT_GT(c->generation, 41u);
  EXPECT_EQ(kernel_->Egress(cg.id)->phase, 2);
}

TEST_F(SandboxTest, AdoptionWithTheSameBeliefWarnsNothing) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/sandfence/r1");
  FakeEgress left;
  left.generation = 5;
  left.phase = 2;
  kernel_->PutEgress(cg.id, left);
  kernel_->PutGuard(cg.id, GuardMode::kAuto);
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Adopt(host_.get(), AdoptSpec("r1", cg, "grade"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ((*sb)->phase(), "grade");
  EXPECT_THAT((*sb)->adoption_warnings(), ::testing::IsEmpty());
}

TEST_F(SandboxTest, AdoptionReattachesMissingHooksInTheKernelsPhase) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/sandfence/r1");
  FakeEgress left;
  left.generation = 12;
  left.phase = 2;
  left.missing_hooks = {"connect4", "sendmsg6"};
  kernel_->PutEgress(cg.id, left);
  kernel_->PutGuard(cg.id, GuardMode::kAuto);
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Adopt(host_.get(), AdoptSpec("r1", cg, "agent"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  const std::vector<std::string> calls = kernel_->Calls();
  const std::string log = absl::StrJoin(calls, " ");
  // Created: what ran unenforced dies before the hooks come back.
  ASSERT_GE(IndexOf(calls, "KillCgroup"), 0) << log;
  EXPECT_LT(IndexOf(calls, "KillCgroup"), IndexOf(calls, "DetachEgress"))
      << log;
  EXPECT_LT(IndexOf(calls, "DetachEgress"), IndexOf(calls, "AttachEgress"))
      << log;
  std::optional<FakeEgress> now = kernel_->Egress(cg.id);
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->phase, 2) << "re-attached in the kernel's phase";
  EXPECT_GT(now->generation, 12u);
  EXPECT_TRUE(now->missing_hooks.empty());
  EXPECT_EQ((*sb)->phase(), "grade");
  EXPECT_EQ((*sb)->generation(), now->generation);
  const std::string warnings = absl::StrJoin((*sb)->adoption_warnings(), "\n");
  EXPECT_THAT(warnings, HasSubstr("connect4, sendmsg6"));
  EXPECT_THAT(warnings, HasSubstr("killed"));
}

TEST_F(SandboxTest, AdoptionOfAnOpenedCgroupWithMissingHooksKillsNothing) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/agents/a1");
  FakeEgress left;
  left.generation = 12;
  left.missing_hooks = {"skb_egress"};
  kernel_->PutEgress(cg.id, left);
  SandboxAdoptSpec spec = AdoptSpec("r1", cg, "agent");
  spec.created = false;
  spec.guard_mode = GuardMode::kOff;
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Adopt(host_.get(), spec);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(kernel_->CallCount(FakeCall::kKillCgroup), 0);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAttachEgress), 1);
  EXPECT_GT(kernel_->Egress(cg.id)->generation, 12u);
}

TEST_F(SandboxTest, AdoptionWithoutAKernelEntryKillsAndAttachesTheBelief) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/sandfence/r1");
  kernel_->PutGuard(cg.id, GuardMode::kAuto);
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Adopt(host_.get(), AdoptSpec("r1", cg, "verify"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(kernel_->CgroupById(cg.id)->kills, 1);
  ASSERT_TRUE(kernel_->Egress(cg.id).has_value());
  EXPECT_EQ(kernel_->Egress(cg.id)->phase, 1);
  EXPECT_EQ((*sb)->phase(), "verify");
  EXPECT_THAT(absl::StrJoin((*sb)->adoption_warnings(), "\n"),
              HasSubstr("no egress entry"));
}

TEST_F(SandboxTest, AdoptionWithAPhaseIndexBeyondThePolicyKeepsTheBelief) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/sandfence/r1");
  FakeEgress left;
  left.generation = 3;
  left.phase = 7;
  kernel_->PutEgress(cg.id, left);
  kernel_->PutGuard(cg.id, GuardMode::kAuto);
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Adopt(host_.get(), AdoptSpec("r1", cg, "verify"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ((*sb)->phase(), "verify");
  EXPECT_THAT(absl::StrJoin((*sb)->adoption_warnings(), "\n"),
              HasSubstr("phase index 7"));
}

TEST_F(SandboxTest, AdoptionGuardsAgainWhenTheGuardLetGo) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/sandfence/r1");
  FakeEgress left;
  left.generation = 3;
  kernel_->PutEgress(cg.id, left);
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Adopt(host_.get(), AdoptSpec("r1", cg, "agent"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(kernel_->Guarded(cg.id), GuardMode::kSignal);
  EXPECT_THAT(absl::StrJoin((*sb)->adoption_warnings(), "\n"),
              HasSubstr("guarded again"));
  EXPECT_THAT((*sb)->guard_text(), HasSubstr("signal"));
}

TEST_F(SandboxTest, AdoptionOfAGoneCgroupFinishesTheRecordWithoutAttaching) {
  CgroupRef gone;
  gone.path = "/fake/sandfence/r1";
  gone.id = 4242;  // no such cgroup in the fake
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Adopt(host_.get(), AdoptSpec("r1", gone, "agent"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(kernel_->CallCount(FakeCall::kAttachEgress), 0);
  EXPECT_EQ(kernel_->CallCount(FakeCall::kKillCgroup), 0);
  EXPECT_THAT(absl::StrJoin((*sb)->adoption_warnings(), "\n"),
              HasSubstr("was gone"));
  absl::StatusOr<SandboxEnd> end = (*sb)->End();
  EXPECT_TRUE(end.ok()) << end.status();
}

TEST_F(SandboxTest, AdoptionFailsWhenTheKernelCannotBeRead) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/sandfence/r1");
  kernel_->PutEgress(cg.id, FakeEgress{});
  kernel_->FailNth(FakeCall::kAdoptEgress, 1,
                   absl::InternalError("fake: map read failed"));
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Adopt(host_.get(), AdoptSpec("r1", cg, "agent"));
  ASSERT_FALSE(sb.ok());
  EXPECT_THAT(std::string(sb.status().message()), HasSubstr("map read failed"));
  // Nothing was detached or killed on a read error.
  EXPECT_TRUE(kernel_->Egress(cg.id).has_value());
  EXPECT_EQ(kernel_->CallCount(FakeCall::kKillCgroup), 0);
}

// --- The reaper ---

TEST_F(SandboxTest, ReaperEndsADeadRunsSandboxProcessesFirst) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/run/s1");
  FakeEgress left;
  left.ring = 20;
  kernel_->PutEgress(cg.id, left);
  kernel_->PutGuard(cg.id, GuardMode::kSignal);
  kernel_->AddDeadDriver(20, DriverKind::kRun, 999);
  ReapReport report = ReapDeadRuns(*host_);
  EXPECT_EQ(report.reaped, std::vector<uint64_t>{cg.id});
  EXPECT_THAT(report.errors, ::testing::IsEmpty());
  const std::vector<std::string> calls = kernel_->Calls();
  const std::string log = absl::StrJoin(calls, " ");
  EXPECT_LT(IndexOf(calls, "KillCgroup"), IndexOf(calls, "RemoveGuard")) << log;
  EXPECT_LT(IndexOf(calls, "RemoveGuard"), IndexOf(calls, "DetachEgress"))
      << log;
  EXPECT_FALSE(kernel_->Egress(cg.id).has_value());
  EXPECT_TRUE(kernel_->Cgroup(cg.path)->removed);
  EXPECT_EQ(kernel_->ForgottenSlots(), std::vector<uint32_t>{20});
}

TEST_F(SandboxTest, ReaperKeepsEnforcementWhenTheProcessesCannotBeKilled) {
  const CgroupRef cg = kernel_->AddCgroup("/fake/run/s1");
  FakeEgress left;
  left.ring = 20;
  kernel_->PutEgress(cg.id, left);
  kernel_->PutGuard(cg.id, GuardMode::kSignal);
  kernel_->AddDeadDriver(20, DriverKind::kRun, 999);
  kernel_->FailNth(FakeCall::kKillCgroup, 1,
                   absl::UnavailableError("fake: cgroup did not empty"));
  ReapReport report = ReapDeadRuns(*host_);
  EXPECT_THAT(report.reaped, ::testing::IsEmpty());
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_THAT(report.errors[0], HasSubstr("did not empty"));
  EXPECT_THAT(kernel_->ForgottenSlots(), ::testing::IsEmpty())
      << "a slot with a sandbox left must not be freed";
  EXPECT_TRUE(kernel_->Egress(cg.id).has_value())
      << "PRODUCT BUG (userspace/sandbox/reaper.cc, ReapDeadRuns): the "
         "egress hooks are detached although KillCgroup failed, so the dead "
         "run's surviving processes run with no egress policy";
  EXPECT_TRUE(kernel_->Guarded(cg.id).has_value())
      << "PRODUCT BUG (userspace/sandbox/reaper.cc, ReapDeadRuns): the "
         "process guard is removed although KillCgroup failed";
}

// --- Fault injection itself ---

TEST(FakeEnforcementTest, FailNthCountsFromNowAndFailsOnce) {
  auto kernel = std::make_shared<FakeKernel>();
  FakeEnforcement host(kernel);
  ASSERT_TRUE(host.CreateCgroup("/fake/a").ok());
  kernel->FailNth(FakeCall::kCreateCgroup, 2, absl::DataLossError("x"));
  EXPECT_TRUE(host.CreateCgroup("/fake/b").ok());
  EXPECT_EQ(host.CreateCgroup("/fake/c").status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_FALSE(kernel->Cgroup("/fake/c").has_value())
      << "a failed call changes nothing";
  EXPECT_TRUE(host.CreateCgroup("/fake/c").ok());
  EXPECT_EQ(kernel->CallCount(FakeCall::kCreateCgroup), 4);
}

// --- DNS filter (issue 14) ---

// "agent" filters DNS through 127.0.0.1:5353, "verify" is inherit, "grade"
// filters too (same upstream).
CompiledPolicy FilteredPolicy() {
  CompiledPolicy policy = ThreePhases();
  for (CompiledPhase* p : {&policy.phases[0], &policy.phases[2]}) {
    p->dns_filtered = true;
    p->dns_upstreams = {*HostPort::Parse("127.0.0.1:5353", 53)};
    p->name_rules = {{"api.model.test", {{L4::kTcp, 8000, 8000}}, "model"}};
  }
  policy.phases[2].name_rules.push_back(
      {"*.tool.test", {{L4::kTcp, 443, 443}}, "allow"});
  return policy;
}

TEST_F(SandboxTest, AFilteredPolicyIsServedBeforeAnythingRunsAndFollowsPhases) {
  SandboxSpec spec = Spec("dns1");
  spec.policy = FilteredPolicy();
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_TRUE(sb.ok()) << sb.status();
  const uint64_t id = (*sb)->cgroup().id;
  std::vector<std::string> calls = kernel_->Calls();
  const std::string log = absl::StrJoin(calls, " ");
  // Attached, then its filter, then its names, then the guard: the caller
  // spawns only after Start returns.
  EXPECT_LT(IndexOf(calls, "AttachEgress"), IndexOf(calls, "StartDns")) << log;
  EXPECT_LT(IndexOf(calls, "StartDns"), IndexOf(calls, "SetDnsPhase")) << log;
  EXPECT_LT(IndexOf(calls, "SetDnsPhase"), IndexOf(calls, "AddGuard")) << log;
  std::optional<FakeDns> dns = kernel_->Dns(id);
  ASSERT_TRUE(dns.has_value());
  EXPECT_EQ(dns->phase, "agent");
  EXPECT_EQ(dns->generation, (*sb)->generation());
  EXPECT_EQ(dns->upstreams,
            std::vector<HostPort>{*HostPort::Parse("127.0.0.1:5353", 53)});

  // Each switch: the kernel first, then the filter's names and generation.
  ASSERT_TRUE((*sb)->SwitchPhase("verify").ok());
  dns = kernel_->Dns(id);
  EXPECT_EQ(dns->phase, "") << "inherit: nothing is filtered";
  EXPECT_EQ(dns->generation, (*sb)->generation());
  ASSERT_TRUE((*sb)->SwitchPhase("grade").ok());
  dns = kernel_->Dns(id);
  EXPECT_EQ(dns->phase, "grade");
  EXPECT_EQ(dns->generation, (*sb)->generation());

  // A query's outcome reaches the record, in the phase that judged it.
  DnsQueryInfo q;
  q.generation = (*sb)->generation();
  q.name = "secret.attacker.test";
  q.type = 1;
  q.verdict = "blocked";
  q.rcode = 3;
  q.transport = "udp";
  dns->on_query(q);

  const size_t skip = kernel_->Calls().size();
  absl::StatusOr<SandboxEnd> end = (*sb)->End();
  ASSERT_TRUE(end.ok()) << end.status();
  calls = kernel_->Calls();
  calls.erase(calls.begin(), calls.begin() + skip);
  EXPECT_LT(IndexOf(calls, "KillCgroup"), IndexOf(calls, "StopDns"))
      << absl::StrJoin(calls, " ");
  EXPECT_LT(IndexOf(calls, "StopDns"), IndexOf(calls, "DetachEgress"))
      << absl::StrJoin(calls, " ");
  EXPECT_FALSE(kernel_->Dns(id).has_value());
  absl::StatusOr<v1::RolloutRecord> rec =
      ReadRecordFile(dir_->Path("dns1.record"));
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_EQ(rec->dns_query_size(), 1);
  EXPECT_EQ(rec->dns_query(0).name(), "secret.attacker.test");
  EXPECT_EQ(rec->dns_query(0).verdict(), "blocked");
  EXPECT_EQ(rec->dns_query(0).phase(), "grade");
}

TEST_F(SandboxTest, AnOwnNetnsSandboxIsServedInItsNamespaceOrRefused) {
  // Which namespace is not known: its queries would go to its own
  // loopback, where no filter listens. Refused before anything exists.
  SandboxSpec unknown = Spec("dns-netns1");
  unknown.policy = FilteredPolicy();
  unknown.own_netns = true;
  absl::StatusOr<std::unique_ptr<Sandbox>> refused =
      Sandbox::Start(host_.get(), unknown);
  EXPECT_EQ(RefusalOf(refused.status()), Refusal::kRejected)
      << refused.status();
  EXPECT_TRUE(
      absl::StrContains(refused.status().message(), "own network namespace"))
      << refused.status();
  EXPECT_FALSE(Called(kernel_->Calls(), "CreateCgroup"));

  // Known: the filter is asked to listen there.
  SandboxSpec known = Spec("dns-netns2");
  known.policy = FilteredPolicy();
  known.own_netns = true;
  known.netns_fd = 42;  // the fake only passes it on
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), known);
  ASSERT_TRUE(sb.ok()) << sb.status();
  std::optional<FakeDns> dns = kernel_->Dns((*sb)->cgroup().id);
  ASSERT_TRUE(dns.has_value());
  EXPECT_EQ(dns->netns_fd, 42);
  ASSERT_TRUE((*sb)->End().ok());

  // Without a filtered phase, the namespace is not needed.
  SandboxSpec unfiltered = Spec("dns-netns3");
  unfiltered.own_netns = true;
  absl::StatusOr<std::unique_ptr<Sandbox>> plain =
      Sandbox::Start(host_.get(), unfiltered);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE((*plain)->End().ok());
}

TEST_F(SandboxTest, AnUnfilteredPolicyGetsNoDnsFilter) {
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), Spec("dns2"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_FALSE(Called(kernel_->Calls(), "StartDns"));
  ASSERT_TRUE((*sb)->SwitchPhase("verify").ok());
  EXPECT_FALSE(Called(kernel_->Calls(), "SetDnsPhase"));
}

TEST_F(SandboxTest, FilteredPhasesWithDifferentUpstreamsAreRefusedFirst) {
  SandboxSpec spec = Spec("dns3");
  spec.policy = FilteredPolicy();
  spec.policy.phases[2].dns_upstreams = {*HostPort::Parse("127.0.0.2", 53)};
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(RefusalOf(sb.status()), Refusal::kRejected);
  EXPECT_THAT(std::string(sb.status().message()),
              ::testing::HasSubstr("different upstream resolvers"));
  // (The refused Sandbox's destructor releases cgroup id 0, never held.)
  for (const std::string& call : kernel_->Calls()) {
    EXPECT_EQ(call, "ReleaseCgroup(0)") << "a refused start called the host";
  }
}

TEST_F(SandboxTest, AFilterThatCannotStartUndoesTheSandbox) {
  SandboxSpec spec = Spec("dns4");
  spec.policy = FilteredPolicy();
  kernel_->FailNth(FakeCall::kStartDns, 1,
                   absl::ResourceExhaustedError("every target is in use"));
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_FALSE(sb.ok());
  EXPECT_THAT(std::string(sb.status().message()),
              ::testing::HasSubstr("DNS filter: every target is in use"));
  EXPECT_TRUE(kernel_->AllEgress().empty()) << "the hooks come off again";
  EXPECT_TRUE(kernel_->Cgroup("/fake/sandfence/dns4")->removed);
}

TEST_F(SandboxTest, AdoptionServesAFilteredSandboxAgain) {
  SandboxSpec spec = Spec("dns5");
  spec.policy = FilteredPolicy();
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host_.get(), spec);
  ASSERT_TRUE(sb.ok()) << sb.status();
  const CgroupRef cg = (*sb)->cgroup();
  (*sb)->Release();
  EXPECT_FALSE(kernel_->Dns(cg.id).has_value())
      << "the filter goes with its process";
  FakeEnforcement successor(kernel_);
  SandboxAdoptSpec adopt = AdoptSpec("dns5", cg, "agent");
  adopt.policy = FilteredPolicy();
  absl::StatusOr<std::unique_ptr<Sandbox>> again =
      Sandbox::Adopt(&successor, adopt);
  ASSERT_TRUE(again.ok()) << again.status();
  std::optional<FakeDns> dns = kernel_->Dns(cg.id);
  ASSERT_TRUE(dns.has_value());
  EXPECT_EQ(dns->phase, "agent");
  EXPECT_EQ(dns->generation, (*again)->generation());
  ASSERT_TRUE((*again)->End().ok());
}

}  // namespace
}  // namespace sandfence::testing
