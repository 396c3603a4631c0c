// StartRollout of a big policy (issue 12, item 9): a policy of many allow
// rules started through RolloutManager, end to end, and the same work split
// into its stages, each timed on its own in the same run:
//
//   parse     the request parsed from its wire bytes, its policy set taken
//   compile   endpoints applied, validated, hashed, compiled (PolicyCompiler)
//   validate  ValidatePolicySet alone (a part of compile, shown apart)
//   entries   the compiled phase turned into kernel map entries
//             (BuildRuleEntries; a part of the start, shown apart)
//   save      the rollout state written for a successor (StateStore::Save,
//             after the compiled phase is converted into it)
//   start     RolloutManager::Start, everything: the stages above plus the
//             map writes and the cgroup attachments
//
// The baseline is RolloutManager::Start of a 10-rule policy, so the ratio
// says what the size costs. Nothing is ever connected to: the IPv4 rules
// name 127.0.0.0/8, the IPv6 hosts ::1, and the IPv6 blocks 2001:db8::/32
// (the documentation prefix, never routed).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/report.h"
#include "bench/suites.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "compile/compiler.h"
#include "daemon/rollout_manager.h"
#include "daemon/state_store.h"
#include "egress/rule_entries.h"
#include "google/protobuf/text_format.h"
#include "policy/policy_source.h"
#include "policy/rollout_endpoints.h"
#include "policy/validate.h"
#include "records/recorder.h"

namespace sandfence::bench {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

constexpr char kModel[] = "http://127.0.0.2:8000/v1";

// `n` allow rules: 40% exact IPv4 hosts, 20% exact IPv6 (::1, one port
// each), 25% IPv4 /24 blocks with port ranges, 15% IPv6 /48 blocks; tcp,
// udp and any mixed. No rule covers another, so all of them compile.
std::string BigPolicyText(size_t n) {
  std::string out =
      "name: \"big\"\nphase {\n  name: \"agent\"\n"
      "  network_access: MODEL_ONLY\n  dns { mode: NONE }\n";
  const char* protocols[] = {"TCP", "UDP", "ANY"};
  for (size_t i = 0; i < n; ++i) {
    const char* proto = protocols[i % 3];
    const size_t kind = i % 20;  // 0-7 v4 host, 8-11 v6 host, 12-16 v4
                                 // block, 17-19 v6 block
    const size_t k = i / 20;
    if (kind < 8) {
      const size_t h = k * 8 + kind;  // 127.0.0.0 - 127.127.255.255
      absl::StrAppendFormat(&out,
                            "  allow { host: \"127.%d.%d.%d\" port: %d "
                            "protocol: %s }\n",
                            (h >> 16) & 127, (h >> 8) & 255, h & 255,
                            1024 + h % 50000, proto);
    } else if (kind < 12) {
      const size_t port = 1024 + k * 4 + (kind - 8);  // distinct ports
      absl::StrAppendFormat(&out,
                            "  allow { host: \"::1\" port: %d protocol: "
                            "%s }\n",
                            port, proto);
    } else if (kind < 17) {
      const size_t b = k * 5 + (kind - 12);  // 127.128.0.0/24 up
      absl::StrAppendFormat(&out,
                            "  allow { host: \"127.%d.%d.0/24\" port_range "
                            "{ first: %d last: %d } protocol: %s }\n",
                            128 + ((b >> 8) & 127), b & 255, 2000 + b % 1000,
                            2100 + b % 1000, proto);
    } else {
      const size_t b = k * 3 + (kind - 17);
      absl::StrAppendFormat(&out,
                            "  allow { host: \"2001:db8:%x::/48\" port: %d "
                            "protocol: %s }\n",
                            b, 443 + b % 1000, proto);
    }
  }
  out += "}\n";
  return out;
}

// The policy travels in the request as a PolicySet, as a gRPC client sends
// it: 40,000 rules are about 0.8 MB that way, within the daemon's 1 MiB
// request limit (as text they are not, nor as a policy file).
absl::StatusOr<v1::StartRolloutRequest> Request(const std::string& id,
                                                const std::string& text) {
  v1::StartRolloutRequest req;
  req.set_rollout_id(id);
  req.mutable_sandbox()->set_create(true);
  if (!google::protobuf::TextFormat::ParseFromString(
          text, req.mutable_policy_set())) {
    return absl::InternalError("the generated policy does not parse");
  }
  req.mutable_endpoints()->add_model(kModel);
  return req;
}

Row StartRow(std::string name, std::string variant, size_t rules,
             std::vector<double> ms, std::string note) {
  Row row;
  row.suite = "start";
  row.name = std::move(name);
  row.variant = std::move(variant);
  row.params = {{"rules", static_cast<int64_t>(rules)}};
  row.unit = "ms";
  row.stats = Summarize(std::move(ms));
  row.note = std::move(note);
  return row;
}

// The stages of one start, each alone.
struct Stages {
  std::vector<double> parse, validate, compile, entries, save;
};

absl::Status TimeStages(const std::string& request_bytes,
                        const std::string& state_dir, Stages* st) {
  Clock::time_point t0 = Clock::now();
  v1::StartRolloutRequest req;
  if (!req.ParseFromString(request_bytes)) {
    return absl::InternalError("the request does not parse");
  }
  PolicySource source;
  source.kind = PolicySource::Kind::kSet;
  source.set = req.policy_set();
  absl::StatusOr<v1::PolicySet> set = LoadPolicySource(source, "");
  if (!set.ok()) return set.status();
  st->parse.push_back(MsSince(t0));

  RolloutEndpoints endpoints;
  endpoints.model.push_back(kModel);
  t0 = Clock::now();
  v1::PolicySet effective = ApplyRolloutEndpoints(*set, endpoints);
  if (absl::Status s = ValidatePolicySet(effective); !s.ok()) return s;
  st->validate.push_back(MsSince(t0));

  t0 = Clock::now();
  PolicyCompiler compiler(nullptr, std::vector<HostPort>{});
  absl::StatusOr<CompiledPolicy> compiled =
      compiler.Compile(*set, endpoints, CompileContext{});
  if (!compiled.ok()) return compiled.status();
  st->compile.push_back(MsSince(t0));

  t0 = Clock::now();
  absl::StatusOr<RuleEntries> entries =
      BuildRuleEntries(compiled->phases[0], 1);
  if (!entries.ok()) return entries.status();
  st->entries.push_back(MsSince(t0));

  absl::StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::Open(state_dir);
  if (!store.ok()) return store.status();
  t0 = Clock::now();
  v1::RolloutState state;
  state.mutable_request()->set_rollout_id("stages");
  for (const CompiledPhase& p : compiled->phases) {
    *state.mutable_response()->add_phase_policy() = ToPhasePolicy(p);
    *state.add_compiled_phase() = ToPhasePolicy(p);
  }
  if (absl::Status s = (*store)->Save(state); !s.ok()) return s;
  st->save.push_back(MsSince(t0));
  (*store)->Remove("stages");
  return absl::OkStatus();
}

}  // namespace

absl::Status RunStartSuite(const BenchOptions& options, Report* report) {
  const size_t big = options.smoke ? 400 : 40000;
  const int reps = options.smoke ? 1 : 3;
  const std::string root = absl::StrCat(options.work_dir, "/start");
  ManagerOptions mo;
  mo.pin_dir = absl::StrCat("/sys/fs/bpf/sf-bench-start-", getpid());
  mo.state_dir = root + "/state";
  mo.records_dir = root + "/records";
  mo.cgroup_parent = absl::StrCat(options.cgroup_root, "/start");
  mo.resolvers = {*HostPort::Parse("127.0.0.1:9", 53)};
  for (const std::string& d : {root, mo.records_dir}) {
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("mkdir ", d));
    }
  }
  absl::StatusOr<Cgroup> parent = Cgroup::Create(mo.cgroup_parent);
  if (!parent.ok()) return parent.status();
  const std::string big_text = BigPolicyText(big);
  const std::string small_text = BigPolicyText(10);
  absl::StatusOr<v1::StartRolloutRequest> big_req = Request("stages", big_text);
  if (!big_req.ok()) return big_req.status();
  const size_t request_bytes = big_req->ByteSizeLong();

  Stages st;
  for (int i = 0; i < reps && !g_interrupted; ++i) {
    if (absl::Status s = TimeStages(big_req->SerializeAsString(),
                                    root + "/stage-state", &st);
        !s.ok()) {
      return s;
    }
  }

  std::vector<double> start_big, start_small, start_warm;
  std::vector<double> first_big, first_small;
  const int warm_reps = options.smoke ? 3 : 200;
  absl::Status status;
  {
    absl::StatusOr<std::unique_ptr<RolloutManager>> m =
        RolloutManager::Create(mo);
    if (!m.ok()) return m.status();
    RolloutManager& manager = **m;
    manager.AdoptAndStart();
    // Starts one rollout, times the Start, ends it.
    auto time_start = [&](const std::string& id, const std::string& text,
                          std::vector<double>* out) {
      absl::StatusOr<v1::StartRolloutRequest> req = Request(id, text);
      if (!req.ok()) return req.status();
      Clock::time_point t0 = Clock::now();
      absl::StatusOr<v1::StartRolloutResponse> r = manager.Start(*req);
      const double ms = MsSince(t0);
      if (!r.ok()) return r.status();
      out->push_back(ms);
      return manager.End(id).status();
    };
    // Small starts in a row on a warm manager (the daemon's common case):
    // their p50 and p99.
    for (int i = 0; i < warm_reps && !g_interrupted && status.ok(); ++i) {
      status = time_start(absl::StrCat("warm-", i), small_text, &start_warm);
    }
    // Alternating, so that drift on a shared machine hits both alike.
    for (int i = 0; i < reps && !g_interrupted && status.ok(); ++i) {
      status = time_start(absl::StrCat("small-", i), small_text, &start_small);
      if (status.ok()) {
        status = time_start(absl::StrCat("big-", i), big_text, &start_big);
      }
    }
  }
  // Adoption: a rollout left open by one manager, taken over by the next
  // (a restarted daemon) in AdoptAndStart, which runs before it serves.
  std::vector<double> adopt_big, adopt_small;
  for (int i = 0; i < reps && !g_interrupted && status.ok(); ++i) {
    for (const char* which : {"small", "big"}) {
      const std::string id = absl::StrCat("adopt-", which, "-", i);
      absl::StatusOr<v1::StartRolloutRequest> req =
          Request(id, std::string(which) == "big" ? big_text : small_text);
      if (!req.ok()) {
        status = req.status();
        break;
      }
      {
        absl::StatusOr<std::unique_ptr<RolloutManager>> m =
            RolloutManager::Create(mo);
        if (!m.ok()) {
          status = m.status();
          break;
        }
        (*m)->AdoptAndStart();
        // The first start of a manager that just started (a daemon's
        // first StartRollout), with the host's program set pinned.
        Clock::time_point t0 = Clock::now();
        if (absl::StatusOr<v1::StartRolloutResponse> r = (*m)->Start(*req);
            !r.ok()) {
          status = r.status();
          break;
        }
        (std::string(which) == "big" ? first_big : first_small)
            .push_back(MsSince(t0));
      }  // the manager goes; the rollout stays enforced
      absl::StatusOr<std::unique_ptr<RolloutManager>> m =
          RolloutManager::Create(mo);
      if (!m.ok()) {
        status = m.status();
        break;
      }
      Clock::time_point t0 = Clock::now();
      std::vector<std::string> adopted = (*m)->AdoptAndStart();
      const double ms = MsSince(t0);
      if (adopted.size() != 1) {
        status = absl::InternalError(
            absl::StrCat("adopted ", adopted.size(), " rollouts, not 1"));
        break;
      }
      (std::string(which) == "big" ? adopt_big : adopt_small).push_back(ms);
      if (absl::Status s = (*m)->End(id).status(); !s.ok()) {
        status = s;
        break;
      }
    }
  }
  absl::Status cleanup = RolloutManager::Cleanup(mo);
  if (!status.ok()) return status;
  if (!cleanup.ok()) return cleanup;

  Row baseline = StartRow("start_rollout", "baseline", 10, start_small,
                          "baseline: RolloutManager::Start of a 10-rule "
                          "policy, alternating with the big one");
  report->Add(baseline);
  Row total = StartRow(
      "start_rollout", "sandfence", big, start_big,
      absl::StrCat("RolloutManager::Start end to end: validate, compile, "
                   "map writes, cgroup attach, state save; "
                   "the request is ",
                   request_bytes, " bytes"));
  // What the stages timed alone leave of the whole (map writes, cgroup
  // creation and attachments, the journal, the request's bytes): a
  // difference of medians, an estimate.
  const double rest = total.stats.median - Summarize(st.compile).median -
                      Summarize(st.entries).median - Summarize(st.save).median;
  absl::StrAppendFormat(&total.note,
                        "; not in the stages below (map writes, cgroup, "
                        "attach, journal), by difference of medians: %.0f ms",
                        rest);
  total.baseline = "baseline";
  total.baseline_median = baseline.stats.median;
  report->Add(total);
  Row warm = StartRow("start_rollout_warm", "sandfence", 10, start_warm,
                      "RolloutManager::Start of a 10-rule policy, one after "
                      "another on a warm manager (each ended before the "
                      "next)");
  warm.tail = true;
  report->Add(warm);
  Row first = StartRow("start_rollout_first", "sandfence", 10, first_small,
                       "the first Start of a manager just created (a "
                       "daemon's first StartRollout after its start), "
                       "program set already pinned");
  first.tail = true;
  first.baseline = "start_rollout_warm";
  first.baseline_median = warm.stats.median;
  report->Add(first);
  report->Add(StartRow("start_rollout_first", "sandfence", big, first_big,
                       "the same, with the big policy"));
  Row adopt_base = StartRow("adopt_and_start", "baseline", 10, adopt_small,
                            "baseline: a new manager's AdoptAndStart over one "
                            "open 10-rule rollout");
  report->Add(adopt_base);
  Row adopt = StartRow("adopt_and_start", "sandfence", big, adopt_big,
                       "a new manager's AdoptAndStart (before it serves) over "
                       "one open rollout of this size: its compiled policy "
                       "read back from the state file, nothing recompiled");
  adopt.baseline = "baseline";
  adopt.baseline_median = adopt_base.stats.median;
  report->Add(adopt);
  const std::string of_start = "a stage of start_rollout, timed alone";
  report->Add(StartRow("stage_parse", "sandfence", big, st.parse,
                       absl::StrCat(of_start,
                                    ": the request parsed from its "
                                    "wire bytes (as gRPC does) and "
                                    "its policy set taken")));
  report->Add(StartRow("stage_validate", "sandfence", big, st.validate,
                       absl::StrCat(of_start,
                                    ": ValidatePolicySet (a part "
                                    "of compile)")));
  report->Add(StartRow("stage_compile", "sandfence", big, st.compile,
                       absl::StrCat(of_start,
                                    ": validate, hash, compile, "
                                    "sort and merge")));
  report->Add(StartRow("stage_entries", "sandfence", big, st.entries,
                       absl::StrCat(of_start,
                                    ": map entries built "
                                    "(BuildRuleEntries)")));
  report->Add(StartRow("stage_save", "sandfence", big, st.save,
                       absl::StrCat(of_start,
                                    ": state converted and saved "
                                    "(StateStore::Save)")));
  return absl::OkStatus();
}

}  // namespace sandfence::bench
