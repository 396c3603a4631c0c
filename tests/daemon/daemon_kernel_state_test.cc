// What a real `sandfence daemon` leaves in the kernel, read from the kernel
// itself (the pinned maps, BPF_PROG_QUERY on the cgroup): a hook that finds
// no sandbox denies; a refused start on an existing cgroup leaves nothing
// attached and no sandbox entry; a phase switch deletes the old generation's
// rules; a nested sandbox narrows its parent's policy and never widens it.
// Loopback only: 127.0.0.2 the model, 127.0.0.3 a tool, 127.0.0.4
// somewhere forbidden.
#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"
#include "daemon/daemon_fixture.h"
#include "egress/egress_abi.h"
#include "egress/egress_controller.h"
#include "egress/egress_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_env.h"

namespace sandfence::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kDenied = 1;  // net_probe exits with the errno: EPERM

// Every cgroup attach type sandfence's egress side uses (the Unix ones by
// number: older UAPI headers do not name them).
const std::vector<bpf_attach_type> kAttachTypes = {
    BPF_CGROUP_INET_SOCK_CREATE,
    BPF_CGROUP_INET4_CONNECT,
    BPF_CGROUP_INET6_CONNECT,
    BPF_CGROUP_UDP4_SENDMSG,
    BPF_CGROUP_UDP6_SENDMSG,
    BPF_CGROUP_INET_EGRESS,
    BPF_CGROUP_UDP4_RECVMSG,
    BPF_CGROUP_UDP6_RECVMSG,
    BPF_CGROUP_INET4_GETPEERNAME,
    BPF_CGROUP_INET6_GETPEERNAME,
    static_cast<bpf_attach_type>(49) /* BPF_CGROUP_UNIX_CONNECT */,
    static_cast<bpf_attach_type>(50) /* BPF_CGROUP_UNIX_SENDMSG */};

// The ids of the programs attached to the cgroup itself (not inherited),
// over every attach type above; attach types the kernel does not know
// count as none.
std::vector<uint32_t> AttachedPrograms(const std::string& cgroup_path) {
  std::vector<uint32_t> all;
  UniqueFd cg(open(cgroup_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cg) {
    ADD_FAILURE() << cgroup_path << ": " << strerror(errno);
    return all;
  }
  for (bpf_attach_type type : kAttachTypes) {
    uint32_t ids[64];
    uint32_t count = 64;
    uint32_t flags = 0;
    if (bpf_prog_query(cg.get(), type, 0, &flags, ids, &count) != 0) {
      EXPECT_EQ(errno, EINVAL)
          << "BPF_PROG_QUERY type " << type << ": " << strerror(errno);
      continue;
    }
    all.insert(all.end(), ids, ids + count);
  }
  return all;
}

class DaemonKernelStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    model_ = Listen("127.0.0.2");
    tool_ = Listen("127.0.0.3");
    forbidden_ = Listen("127.0.0.4");
    daemon_ = std::make_unique<DaemonProcess>(MakeDaemonDirs("kstate"));
    daemon_->Start();
  }
  void TearDown() override {
    // Existing cgroups are the test's: the daemon never removes them.
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
      rmdir(it->c_str());
    }
  }

  // An existing cgroup of the test's, below the daemon's parent.
  std::string MakeCgroup(const std::string& path) {
    EXPECT_EQ(mkdir(path.c_str(), 0755), 0) << path << ": " << strerror(errno);
    made_.push_back(path);
    return path;
  }

  std::string PolicyText() const {
    return absl::StrCat(
        "name: \"kstate\"\n"
        "phase { name: \"setup\" network_access: MODEL_ONLY\n"
        "  dns { mode: NONE } }\n"
        "phase { name: \"agent\" network_access: MODEL_AND_TOOLS\n"
        "  dns { mode: NONE }\n"
        "  tool { name: \"search\" url: \"http://127.0.0.3:",
        tool_.port, "\" } }\n");
  }

  v1::StartRolloutRequest Request(const std::string& id) const {
    v1::StartRolloutRequest req;
    req.set_rollout_id(id);
    req.mutable_sandbox()->set_create(true);
    req.set_policy_text(PolicyText());
    req.mutable_endpoints()->add_model(
        absl::StrCat("http://127.0.0.2:", model_.port, "/v1"));
    return req;
  }

  UniqueFd PinnedMap(const char* name) const {
    const std::string path =
        PinsOf(daemon_->dirs().pin_dir).Map(name);
    UniqueFd fd(bpf_obj_get(path.c_str()));
    EXPECT_TRUE(fd) << path << ": " << strerror(errno);
    return fd;
  }

  // Whether sf_sandboxes has an entry for the cgroup (and what it says).
  bool SandboxEntry(uint64_t cgroup_id, sf_sandbox* out = nullptr) const {
    UniqueFd map = PinnedMap("sf_sandboxes");
    sf_sandbox v{};
    const bool found = bpf_map_lookup_elem(map.get(), &cgroup_id, &v) == 0;
    if (found && out != nullptr) *out = v;
    return found;
  }

  // Rule entries of one generation, over the exact and CIDR maps.
  int RuleEntries(uint32_t generation) const {
    int n = 0;
    auto count = [&](const char* name, size_t key_size, size_t gen_offset) {
      UniqueFd map = PinnedMap(name);
      std::vector<uint8_t> key(key_size), next(key_size);
      void* prev = nullptr;
      while (bpf_map_get_next_key(map.get(), prev, next.data()) == 0) {
        uint32_t g;
        memcpy(&g, next.data() + gen_offset, sizeof(g));
        if (g == generation) ++n;
        key = next;
        prev = key.data();
      }
    };
    count("sf_exact4", sizeof(sf_exact4_key), 0);
    count("sf_exact6", sizeof(sf_exact6_key), 0);
    count("sf_cidr4", sizeof(sf_cidr4_key), offsetof(sf_cidr4_key, generation));
    count("sf_cidr6", sizeof(sf_cidr6_key), offsetof(sf_cidr6_key, generation));
    return n;
  }

  Listener model_, tool_, forbidden_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::vector<std::string> made_;
};

// "A hook that finds no sandbox denies": the programs stay attached, the
// sandbox's entry goes, and the model it could reach is refused; with the
// entry back, reachable again.
TEST_F(DaemonKernelStateTest, AHookThatFindsNoSandboxDenies) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(daemon_->Start(Request("nosb"), &started).ok());
  const std::string& cg = started.cgroup_path();
  const uint64_t id = started.cgroup_id();
  ASSERT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.2", model_.port), 0);

  sf_sandbox saved{};
  ASSERT_TRUE(SandboxEntry(id, &saved));
  UniqueFd map = PinnedMap("sf_sandboxes");
  ASSERT_EQ(bpf_map_delete_elem(map.get(), &id), 0) << strerror(errno);
  EXPECT_FALSE(AttachedPrograms(cg).empty()) << "the hooks must stay";
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.2", model_.port), kDenied);
  EXPECT_EQ(ProbeIn(cg, "udp-sendto", "127.0.0.2", model_.port), kDenied);

  ASSERT_EQ(bpf_map_update_elem(map.get(), &id, &saved, BPF_NOEXIST), 0);
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.2", model_.port), 0);
  v1::EndRolloutResponse ended;
  EXPECT_TRUE(daemon_->End("nosb", &ended).ok());
}

// A start refused on an existing cgroup leaves it as it was: no program of
// sandfence's attached, no sandbox entry, the cgroup still there. Refused
// by the compiler (a required tool under model_only), by the manager (the
// rollout id has a record already), and by the kernel with five of the
// egress hooks already attached: a foreign program holds the cgroup's
// cgroup_skb/egress exclusively (attached without BPF_F_ALLOW_MULTI), so
// the link for the backstop is refused and the five must be undone. Then,
// the foreign program gone, the same cgroup starts and ends, which shows
// that the checks see sandfence's programs and entry when they are there.
TEST_F(DaemonKernelStateTest, ARefusedStartOnAnExistingCgroupAttachesNothing) {
  const std::string cg = MakeCgroup(daemon_->dirs().cgroups + "/existing");
  absl::StatusOr<CgroupRef> ref = InspectCgroup(cg);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(AttachedPrograms(cg).empty());
  auto request = [&](const std::string& id) {
    v1::StartRolloutRequest req = Request(id);
    req.mutable_sandbox()->set_cgroup_path(cg);
    return req;
  };

  // A cgroup_skb program that allows everything, attached without
  // BPF_F_ALLOW_MULTI: the kernel then refuses any link on that hook.
  bpf_insn allow_all[2] = {};
  allow_all[0].code = BPF_ALU64 | BPF_MOV | BPF_K;  // r0 = 1
  allow_all[0].dst_reg = BPF_REG_0;
  allow_all[0].imm = 1;
  allow_all[1].code = BPF_JMP | BPF_EXIT;
  UniqueFd foreign(bpf_prog_load(BPF_PROG_TYPE_CGROUP_SKB, "sf_test_foreign",
                                 "GPL", allow_all, 2, nullptr));
  ASSERT_TRUE(foreign) << "load: " << strerror(errno);
  bpf_prog_info info{};
  uint32_t info_len = sizeof(info);
  ASSERT_EQ(bpf_obj_get_info_by_fd(foreign.get(), &info, &info_len), 0);
  UniqueFd cg_fd(open(cg.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(
      bpf_prog_attach(foreign.get(), cg_fd.get(), BPF_CGROUP_INET_EGRESS, 0), 0)
      << strerror(errno);

  struct Case {
    const char* name;
    std::function<void(v1::StartRolloutRequest*)> mutate;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"required tool under model_only",
       [](v1::StartRolloutRequest* r) {
         r->set_initial_phase("setup");
         v1::ToolGrant* t = r->mutable_endpoints()->add_tool();
         t->set_url("http://127.0.0.5:9000");
         t->set_required(true);
         t->set_name("grader");
       },
       "required"},
      {"the rollout id has a record already",
       [&](v1::StartRolloutRequest* r) {
         mkdir(daemon_->dirs().records().c_str(), 0700);
         const std::string rec = absl::StrCat(daemon_->dirs().records(), "/",
                                              r->rollout_id(), ".record");
         int fd = open(rec.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
         EXPECT_GE(fd, 0) << rec << ": " << strerror(errno);
         close(fd);
       },
       "already has a record"},
      {"egress hook held by a foreign program", [](auto*) {},
       "attach skb_egress"},
      {"the reason, not a privilege it has", [](auto*) {},
       "attached there exclusively"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string id = absl::StrCat("refused-", ++n);
    v1::StartRolloutRequest req = request(id);
    c.mutate(&req);
    v1::StartRolloutResponse resp;
    grpc::Status s = daemon_->Start(req, &resp);
    EXPECT_FALSE(s.ok()) << c.name << ": started";
    EXPECT_THAT(s.error_message(), HasSubstr(c.says)) << c.name;
    EXPECT_THAT(AttachedPrograms(cg), ::testing::ElementsAre(info.id))
        << c.name << ": only the foreign program may be attached; "
        << s.error_message();
    EXPECT_FALSE(SandboxEntry(ref->id)) << c.name << ": a sandbox entry";
    EXPECT_EQ(access(cg.c_str(), F_OK), 0) << c.name << ": cgroup removed";
    EXPECT_EQ(daemon_->List().rollout_size(), 0) << c.name;
  }

  ASSERT_EQ(
      bpf_prog_detach2(foreign.get(), cg_fd.get(), BPF_CGROUP_INET_EGRESS), 0);
  v1::StartRolloutResponse started;
  grpc::Status ok = daemon_->Start(request("accepted"), &started);
  ASSERT_TRUE(ok.ok()) << ok.error_message() << "\n" << daemon_->Log();
  EXPECT_GE(AttachedPrograms(cg).size(), 6u);
  EXPECT_TRUE(SandboxEntry(ref->id));
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(daemon_->End("accepted", &ended).ok());
  EXPECT_TRUE(AttachedPrograms(cg).empty());
  EXPECT_FALSE(SandboxEntry(ref->id));
}

// "Then the old generation is deleted": the rules of the phase switched
// from are gone from every rule map, those of the new phase are there, and
// the tool that only the new phase allows is reachable at once.
TEST_F(DaemonKernelStateTest, APhaseSwitchDeletesTheOldGenerationsRules) {
  v1::StartRolloutResponse started;
  ASSERT_TRUE(daemon_->Start(Request("gens"), &started).ok());
  const uint32_t setup = started.generation();
  sf_sandbox entry{};
  ASSERT_TRUE(SandboxEntry(started.cgroup_id(), &entry));
  EXPECT_EQ(entry.generation, setup);
  const int setup_rules = RuleEntries(setup);
  EXPECT_GE(setup_rules, 1) << "the model's rule";
  EXPECT_EQ(
      ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.3", tool_.port),
      kDenied);

  v1::SetPhaseResponse switched;
  ASSERT_TRUE(daemon_->SetPhase("gens", "agent", &switched).ok());
  const uint32_t agent = switched.generation();
  ASSERT_NE(agent, setup);
  // The switch's cut ran (or says why it could not), and found nothing:
  // the sandbox holds no connection.
  if (KernelCanCutSockets()) {
    EXPECT_EQ(switched.not_cut(), "");
  } else {
    EXPECT_THAT(switched.not_cut(), ::testing::HasSubstr("bpf_sock_destroy"));
  }
  EXPECT_EQ(switched.cut_size(), 0);
  ASSERT_TRUE(SandboxEntry(started.cgroup_id(), &entry));
  EXPECT_EQ(entry.generation, agent);
  // Deleted after the reply (the controller's reaper), not before it.
  EXPECT_TRUE(Eventually([&] { return RuleEntries(setup) == 0; }))
      << "the old generation was left behind: " << RuleEntries(setup);
  EXPECT_GT(RuleEntries(agent), setup_rules) << "the model's and the tool's";
  EXPECT_EQ(
      ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.3", tool_.port),
      0);

  v1::EndRolloutResponse ended;
  ASSERT_TRUE(daemon_->End("gens", &ended).ok());
  EXPECT_EQ(RuleEntries(agent), 0) << "the ended rollout's rules remain";
}

// "A nested sandbox can narrow its parent's policy, never widen it": a
// second rollout on a child cgroup of the first one's sandbox. The outer
// allows the model and the tool; the inner allows the model and the
// forbidden host, not the tool. In the inner, only the model is reachable:
// the tool is narrowed away, the forbidden host is not widened in.
TEST_F(DaemonKernelStateTest, ANestedSandboxNarrowsAndNeverWidens) {
  v1::StartRolloutRequest outer_req = Request("outer");
  outer_req.set_initial_phase("agent");
  v1::StartRolloutResponse outer;
  ASSERT_TRUE(daemon_->Start(outer_req, &outer).ok());
  const std::string inner_cg = MakeCgroup(outer.cgroup_path() + "/inner");

  v1::StartRolloutRequest inner_req;
  inner_req.set_rollout_id("inner");
  inner_req.mutable_sandbox()->set_cgroup_path(inner_cg);
  inner_req.set_policy_text(
      absl::StrCat("name: \"inner\"\n"
                   "phase { name: \"agent\" network_access: MODEL_ONLY\n"
                   "  dns { mode: NONE }\n"
                   "  allow { host: \"127.0.0.4\" port: ",
                   forbidden_.port, " } }\n"));
  inner_req.mutable_endpoints()->add_model(
      absl::StrCat("http://127.0.0.2:", model_.port, "/v1"));
  v1::StartRolloutResponse inner;
  grpc::Status s = daemon_->Start(inner_req, &inner);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(inner.borrowed_from().empty()) << "a sandbox of its own";
  EXPECT_FALSE(AttachedPrograms(inner_cg).empty());

  struct Step {
    const char* where;
    const std::string& cgroup;
    const char* addr;
    uint16_t port;
    int want;
  };
  const Step steps[] = {
      {"outer: model", outer.cgroup_path(), "127.0.0.2", model_.port, 0},
      {"outer: tool", outer.cgroup_path(), "127.0.0.3", tool_.port, 0},
      {"outer: forbidden", outer.cgroup_path(), "127.0.0.4", forbidden_.port,
       kDenied},
      {"inner: model", inner_cg, "127.0.0.2", model_.port, 0},
      {"inner: tool (narrowed)", inner_cg, "127.0.0.3", tool_.port, kDenied},
      {"inner: forbidden (not widened)", inner_cg, "127.0.0.4", forbidden_.port,
       kDenied},
  };
  for (const Step& step : steps) {
    EXPECT_EQ(ProbeIn(step.cgroup, "tcp-connect", step.addr, step.port),
              step.want)
        << step.where;
  }
  v1::EndRolloutResponse ended;
  ASSERT_TRUE(daemon_->End("inner", &ended).ok());
  EXPECT_TRUE(AttachedPrograms(inner_cg).empty());
  rmdir(inner_cg.c_str());
  made_.pop_back();
  ASSERT_TRUE(daemon_->End("outer", &ended).ok());
}

// `sandfence daemon --cleanup` as a user runs it, after the daemon stopped
// (its rollouts stay enforced, pinned): the created sandbox's processes are
// killed and its cgroup removed, the existing cgroup is left with nothing
// attached, the pins and the state go, the records stay. While a daemon
// runs, it refuses (75) and changes nothing.
// What a rollout holds in the kernel and the pins: its sandbox entry, its
// generation's rules, its links.
struct Held {
  bool entry = false;
  int rules = 0;
  bool links = false;
};

// "Dead sandboxes are reclaimed" (issue 36): a rollout whose cgroup is
// removed without EndRollout (a runtime removed the container's cgroup, an
// operator rmdir'ed it) is ended by the daemon: its entry, rules and links
// go, it is no longer listed, and its record is written, saying how it
// ended. With the daemon up, and when the daemon was down at the time (the
// next daemon adopts it, notices, and ends it).
TEST_F(DaemonKernelStateTest, ARemovedSandboxIsReclaimedUpOrAtTheNextStart) {
  const PinLayout pins = PinsOf(daemon_->dirs().pin_dir);
  auto held = [&](const v1::StartRolloutResponse& r) {
    Held h;
    h.entry = SandboxEntry(r.cgroup_id());
    h.rules = RuleEntries(r.generation());
    h.links = std::filesystem::exists(pins.SandboxLinksDir(r.cgroup_id()));
    return h;
  };
  auto listed = [&](const std::string& id) {
    const v1::ListRolloutsResponse list = daemon_->List();
    for (const v1::RolloutSummary& s : list.rollout()) {
      if (s.rollout_id() == id) return true;
    }
    return false;
  };
  auto record_says_gone = [&](const std::string& id) {
    std::ifstream f(daemon_->dirs().records() + "/" + id + ".record.pb",
                    std::ios::binary);
    if (!f) return false;
    std::string bytes((std::istreambuf_iterator<char>(f)), {});
    v1::RolloutRecord record;
    if (!record.ParseFromString(bytes)) return false;
    for (const v1::RecordWarning& w : record.warning()) {
      if (w.kind() == v1::WARNING_SANDBOX_GONE) return true;
    }
    return false;
  };
  auto expect_reclaimed = [&](const std::string& id,
                              const v1::StartRolloutResponse& r) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(Eventually([&] { return !listed(id); }))
        << id << " is still open\n" << daemon_->Log();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
    // Measured, not asserted (the target is 5 s): CI's log shows it.
    std::cout << "[ measured ] " << id << " reclaimed " << ms
              << " ms after its cgroup was removed (or the daemon started)\n";
    EXPECT_TRUE(Eventually([&] {
      const Held h = held(r);
      return !h.entry && h.rules == 0 && !h.links;
    })) << id << ": entry " << held(r).entry << ", rules " << held(r).rules
        << ", links " << held(r).links;
    EXPECT_TRUE(Eventually([&] { return record_says_gone(id); }))
        << id << ": no record with WARNING_SANDBOX_GONE\n" << daemon_->Log();
  };

  // A created sandbox and an existing cgroup (a container's), daemon up.
  v1::StartRolloutResponse created;
  ASSERT_TRUE(daemon_->Start(Request("gone-created"), &created).ok());
  const std::string existing =
      MakeCgroup(daemon_->dirs().cgroups + "/gone-existing");
  v1::StartRolloutRequest req = Request("gone-existing");
  req.mutable_sandbox()->set_cgroup_path(existing);
  v1::StartRolloutResponse on_existing;
  ASSERT_TRUE(daemon_->Start(req, &on_existing).ok());
  // And one that stays: the reclaim must not touch it.
  v1::StartRolloutResponse kept;
  ASSERT_TRUE(daemon_->Start(Request("gone-kept"), &kept).ok());
  for (const auto* r : {&created, &on_existing, &kept}) {
    const Held h = held(*r);
    ASSERT_TRUE(h.entry && h.rules > 0 && h.links) << r->rollout_id();
  }
  // What "gone" rests on: a live cgroup v2 directory cannot be moved away
  // from its path (the kernel refuses rename even to root), so a sandbox
  // cannot make itself look removed while processes run in it.
  const std::string moved = kept.cgroup_path() + "-moved";
  EXPECT_NE(rename(kept.cgroup_path().c_str(), moved.c_str()), 0);
  EXPECT_TRUE(std::filesystem::exists(kept.cgroup_path()));
  ASSERT_EQ(rmdir(created.cgroup_path().c_str()), 0) << strerror(errno);
  ASSERT_EQ(rmdir(existing.c_str()), 0) << strerror(errno);
  expect_reclaimed("gone-created", created);
  expect_reclaimed("gone-existing", on_existing);
  EXPECT_TRUE(listed("gone-kept"));
  const Held still = held(kept);
  EXPECT_TRUE(still.entry && still.rules > 0 && still.links);
  EXPECT_EQ(ProbeIn(kept.cgroup_path(), "tcp-connect", "127.0.0.4",
                    forbidden_.port),
            kDenied)
      << "the rollout that stayed is still enforced";

  // The daemon is killed; the cgroup goes while nobody watches; the next
  // daemon finds it gone.
  v1::StartRolloutResponse unwatched;
  ASSERT_TRUE(daemon_->Start(Request("gone-unwatched"), &unwatched).ok());
  daemon_->Stop(SIGKILL);
  ASSERT_EQ(rmdir(unwatched.cgroup_path().c_str()), 0) << strerror(errno);
  EXPECT_TRUE(held(unwatched).entry) << "nothing frees it while no daemon runs";
  daemon_->Start();
  expect_reclaimed("gone-unwatched", unwatched);
  EXPECT_TRUE(listed("gone-kept")) << "adopted, not reclaimed";

  v1::EndRolloutResponse ended;
  EXPECT_TRUE(daemon_->End("gone-kept", &ended).ok());
}

TEST_F(DaemonKernelStateTest, CleanupFromTheCommandLine) {
  v1::StartRolloutResponse created;
  ASSERT_TRUE(daemon_->Start(Request("clean-created"), &created).ok());
  const std::string existing =
      MakeCgroup(daemon_->dirs().cgroups + "/clean-existing");
  v1::StartRolloutRequest req = Request("clean-existing");
  req.mutable_sandbox()->set_cgroup_path(existing);
  v1::StartRolloutResponse on_existing;
  ASSERT_TRUE(daemon_->Start(req, &on_existing).ok());
  absl::StatusOr<Cgroup> cg = Cgroup::Open(created.cgroup_path());
  ASSERT_TRUE(cg.ok()) << cg.status();
  SpawnOptions spawn;
  spawn.cgroup_fd = cg->fd();
  spawn.argv = {"sleep", "60"};
  absl::StatusOr<pid_t> sleeper = SpawnInCgroup(spawn);
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();

  const DaemonDirs& d = daemon_->dirs();
  const std::string cleanup =
      absl::StrCat(SandfenceBinary(), " daemon --cleanup --pin-dir ", d.pin_dir,
                   " --state-dir ", d.state(), " 2>&1");
  auto run_cleanup = [&](std::string* out) {
    FILE* p = popen(cleanup.c_str(), "r");
    if (p == nullptr) return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
    const int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  };
  std::string out;
  EXPECT_EQ(run_cleanup(&out), 75) << "while the daemon runs: " << out;
  EXPECT_EQ(kill(*sleeper, 0), 0) << out;
  EXPECT_FALSE(AttachedPrograms(existing).empty()) << out;

  daemon_->Stop(SIGTERM);
  // Still enforced with no daemon: pinned.
  EXPECT_EQ(ProbeIn(created.cgroup_path(), "tcp-connect", "127.0.0.4",
                    forbidden_.port),
            kDenied);
  EXPECT_FALSE(AttachedPrograms(existing).empty());

  out.clear();
  EXPECT_EQ(run_cleanup(&out), 0) << out;
  absl::StatusOr<int> status = WaitForExit(*sleeper);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, 128 + SIGKILL) << "the created sandbox's process";
  EXPECT_NE(access(created.cgroup_path().c_str(), F_OK), 0)
      << "the created sandbox is still there";
  EXPECT_EQ(access(existing.c_str(), F_OK), 0) << "an existing cgroup goes";
  EXPECT_TRUE(AttachedPrograms(existing).empty()) << out;
  EXPECT_NE(access(d.pin_dir.c_str(), F_OK), 0) << "the pins remain: " << out;
  std::string states;  // the lock file may stay; no rollout's state
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(d.state(), ec)) {
    const std::string name = e.path().filename();
    if (name != ".lock") absl::StrAppend(&states, name, " ");
  }
  EXPECT_EQ(states, "") << "state left in " << d.state();
  EXPECT_EQ(
      access(absl::StrCat(d.records(), "/clean-created.record").c_str(), F_OK),
      0)
      << "the records stay";
}

}  // namespace
}  // namespace sandfence::testing
