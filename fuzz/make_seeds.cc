// Writes the seed corpora that cannot be copied from the tree as they are:
// record journals (written by the recorder itself, through the records
// tests' gym rollout) and binary StartRolloutRequests. The output is
// committed under fuzz/corpus/; run this again when a format changes:
//
//   build-asan/fuzz/make_seeds fuzz/corpus .
//
// Seeds whose file names start with "gen-" are this program's; the others
// in fuzz/corpus/ are written by hand or copied.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/timestamp.pb.h"
#include "policy/policy_loader.h"
#include "records/journal.h"
#include "sandfence/v1/daemon.pb.h"
#include "tests/records/gym_rollout.h"

namespace sandfence {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

google::protobuf::Timestamp At(int64_t seconds, int32_t nanos) {
  google::protobuf::Timestamp t;
  t.set_seconds(seconds);
  t.set_nanos(nanos);
  return t;
}

// A small journal with one entry of every kind, written by RecordJournal:
// quicker to mutate than a real rollout's.
absl::Status SmallJournal(const std::string& path, bool finalize) {
  std::remove(path.c_str());
  absl::StatusOr<RecordJournal> j = RecordJournal::Create(path);
  if (!j.ok()) return j.status();
  v1::RecordJournalEntry e;
  v1::RecordHeader* h = e.mutable_header();
  h->set_format(kRecordFormat);
  v1::RolloutRecord* r = h->mutable_record();
  r->set_rollout_id("seed-1");
  r->mutable_sandbox()->set_cgroup_path("/sys/fs/cgroup/sandfence/seed-1");
  r->mutable_sandbox()->set_cgroup_id(4242);
  r->set_host("fuzz");
  r->set_sandfence_version("0.1.0");
  r->mutable_policy()->set_name("gym-default");
  r->mutable_policy()->set_content_hash(std::string(64, 'a'));
  v1::PhasePolicy* p = r->add_phase_policy();
  p->set_name("agent");
  p->set_network_access(v1::MODEL_ONLY);
  v1::CompiledRule* rule = p->add_rule();
  rule->set_protocol("tcp");
  rule->set_destination("10.1.2.3");
  rule->set_port_first(8000);
  rule->set_port_last(8000);
  rule->set_source(v1::RULE_SOURCE_MODEL);
  rule->set_origin("model.internal");
  *r->mutable_start_time() = At(1764580000, 5);
  j->Append(e);

  e.Clear();
  e.mutable_phase()->set_index(0);
  e.mutable_phase()->mutable_span()->set_name("agent");
  *e.mutable_phase()->mutable_span()->mutable_start_time() = At(1764580000, 6);
  j->Append(e);

  e.Clear();
  v1::NetAttempt* a = e.mutable_attempt()->mutable_attempt();
  e.mutable_attempt()->set_id(0);
  a->set_verdict(v1::VERDICT_DENY);
  a->set_reason("no rule");
  a->set_hook("connect6");
  a->set_protocol("tcp");
  a->set_address("2001:db8::9");
  a->set_port(443);
  a->set_command("curl");
  a->set_tgid(77);
  a->set_count(1);
  a->set_phase("agent");
  *a->mutable_first_time() = At(1764580001, 0);
  *a->mutable_last_time() = At(1764580001, 0);
  j->Append(e);

  e.Clear();
  a = e.mutable_attempt()->mutable_attempt();
  e.mutable_attempt()->set_id(1);
  a->set_verdict(v1::VERDICT_ALLOW);
  a->set_hook("connect4");
  a->set_protocol("tcp");
  a->set_address("10.1.2.3");
  a->set_port(8000);
  a->set_rule_index(0);
  a->set_rule("tcp 10.1.2.3:8000");
  a->set_allowed_as("model.internal");
  a->set_command("python3");
  a->set_count(1);
  a->set_phase("agent");
  j->Append(e);

  e.Clear();
  v1::NetAttemptCount* c = e.mutable_counts()->add_count();
  c->set_id(0);
  c->set_count(3);
  *c->mutable_last_time() = At(1764580002, 500);
  j->Append(e);

  e.Clear();
  v1::GuardEntry* g = e.mutable_guard_event();
  *g->mutable_time() = At(1764580003, 0);
  g->set_action("denied");
  g->set_what("proc_open");
  g->mutable_actor()->set_command("cat");
  g->mutable_target()->set_command("sshd");
  g->set_detail("environ");
  g->set_phase("agent");
  j->Append(e);

  e.Clear();
  e.mutable_enforcement()->set_egress("cgroup-bpf");
  e.mutable_enforcement()->set_guard("signal");
  j->Append(e);

  v1::LossAccounting loss;
  loss.set_kernel_counters_read(true);
  loss.set_kernel_denied(3);
  loss.set_kernel_allowed(1);
  loss.set_events_recorded(4);
  e.Clear();
  *e.mutable_loss() = loss;
  j->Append(e);

  if (finalize) {
    e.Clear();
    *e.mutable_trailer()->mutable_end_time() = At(1764580009, 0);
    *e.mutable_trailer()->mutable_loss() = loss;
    j->Append(e);
  }
  return j->Close();
}

absl::Status Journals(const std::string& dir) {
  // One real rollout's record, through the recorder.
  const std::string gym = absl::StrCat(dir, "/gen-gym");
  std::remove(gym.c_str());
  absl::StatusOr<RecordOutcome> r = testing::RecordGymRollout(gym, {});
  if (!r.ok()) return r.status();
  if (absl::Status s = SmallJournal(absl::StrCat(dir, "/gen-small"), true);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          SmallJournal(absl::StrCat(dir, "/gen-small-unfinished"), false);
      !s.ok()) {
    return s;
  }
  // Cut inside an entry: the reader's "cut short" path.
  const std::string whole = ReadAll(absl::StrCat(dir, "/gen-small"));
  return WriteAll(absl::StrCat(dir, "/gen-small-cut"),
                  whole.substr(0, whole.size() - 7));
}

absl::Status Requests(const std::string& dir, const std::string& source) {
  const char* policies[] = {"inherit", "model_only", "model_and_tools",
                            "phased"};
  for (const char* name : policies) {
    const std::string text =
        ReadAll(absl::StrCat(source, "/policies/", name, ".textproto"));
    v1::StartRolloutRequest req;
    req.set_rollout_id(absl::StrCat("seed-", name, "-1"));
    req.mutable_sandbox()->set_create(true);
    req.set_policy_text(text);
    req.mutable_endpoints()->add_model("http://model.internal:8000/v1");
    v1::ToolGrant* tool = req.mutable_endpoints()->add_tool();
    tool->set_url("https://search.internal/");
    tool->set_name("search");
    if (absl::Status s = WriteAll(absl::StrCat(dir, "/gen-text-", name),
                                  req.SerializeAsString());
        !s.ok()) {
      return s;
    }
    // The same policy as a message, from a private network namespace.
    absl::StatusOr<v1::PolicySet> set = ParsePolicySetText(text, name);
    if (!set.ok()) return set.status();
    *req.mutable_policy_set() = *set;
    req.set_own_netns(true);
    req.set_initial_phase("agent");
    if (absl::Status s = WriteAll(absl::StrCat(dir, "/gen-set-", name),
                                  req.SerializeAsString());
        !s.ok()) {
      return s;
    }
  }
  v1::StartRolloutRequest inline_req;
  inline_req.set_rollout_id("run.42_a-b");
  inline_req.mutable_sandbox()->set_cgroup_path(
      "/sys/fs/cgroup/unified/sandbox-1");
  inline_req.set_network_access(v1::MODEL_ONLY);
  inline_req.mutable_endpoints()->add_model("http://[2001:db8::1]:8000/");
  v1::AllowRule* allow = inline_req.mutable_endpoints()->add_allow();
  allow->set_host("10.20.0.0/16");
  allow->mutable_port_range()->set_first(9000);
  allow->mutable_port_range()->set_last(9010);
  allow->set_protocol(v1::ANY);
  inline_req.set_borrowed(true);
  return WriteAll(absl::StrCat(dir, "/gen-inline"),
                  inline_req.SerializeAsString());
}

}  // namespace
}  // namespace sandfence

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make_seeds CORPUS_DIR SOURCE_DIR\n";
    return 64;
  }
  const std::string corpus = argv[1];
  if (absl::Status s = sandfence::Journals(corpus + "/journal"); !s.ok()) {
    std::cerr << "make_seeds: " << s << "\n";
    return 1;
  }
  if (absl::Status s = sandfence::Requests(corpus + "/start_request", argv[2]);
      !s.ok()) {
    std::cerr << "make_seeds: " << s << "\n";
    return 1;
  }
  return 0;
}
