#include "tests/records/learn_records.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <utility>

#include "tests/records/records_test_util.h"

namespace sandfence::testing {

absl::StatusOr<std::unique_ptr<LearnRecord>> LearnRecord::Create(
    const std::string& path, const std::string& rollout_id,
    const CompiledPolicy& policy) {
  std::unique_ptr<LearnRecord> r(new LearnRecord());
  FakeTime time;
  r->now_ = time.now;
  RolloutInfo info = GymInfo();
  info.rollout_id = rollout_id;
  RecorderOptions options;
  options.flush_interval = absl::ZeroDuration();  // deterministic bytes
  options.loss_snapshot_interval = absl::InfiniteDuration();
  options.sync = false;
  absl::StatusOr<std::unique_ptr<RolloutRecorder>> rec =
      RolloutRecorder::Create(path, info, policy, time.clock(), options);
  if (!rec.ok()) return rec.status();
  r->recorder_ = *std::move(rec);
  return r;
}

absl::Status LearnRecord::Phase(const std::string& name) {
  *now_ += 1000000000;  // phases a second apart
  if (absl::Status s = recorder_->BeginPhase(name); !s.ok()) return s;
  recorder_->BindGeneration(++generation_);
  return absl::OkStatus();
}

void LearnRecord::Connect(const std::string& addr, uint16_t port, int count,
                          sf_verdict verdict, sf_reason reason, bool udp,
                          sf_hook hook) {
  for (int i = 0; i < count; ++i) {
    *now_ += 1000000;
    NetEvent e = MakeEvent(
        {.addr = addr.c_str(),
         .port = port,
         .verdict = verdict,
         .reason = reason,
         .protocol = static_cast<uint8_t>(udp ? IPPROTO_UDP : IPPROTO_TCP),
         .sock_type = static_cast<uint8_t>(udp ? SOCK_DGRAM : SOCK_STREAM),
         .hook = hook,
         .comm = "agent",
         .tgid = static_cast<uint32_t>(tgid_),
         .generation = generation_,
         .boot_ns = *now_});
    (verdict == SF_VERDICT_ALLOW ? kernel_.allowed : kernel_.denied)++;
    recorder_->Add(e);
  }
}

void LearnRecord::ConnectUnix(const std::string& name, int count,
                              sf_verdict verdict, sf_reason reason,
                              const std::string& reached) {
  for (int i = 0; i < count; ++i) {
    *now_ += 1000000;
    NetEvent e = MakeEvent({.verdict = verdict,
                            .reason = reason,
                            .protocol = 0,
                            .sock_type = SOCK_STREAM,
                            .hook = SF_HOOK_CONNECT_UNIX,
                            .comm = "agent",
                            .generation = generation_,
                            .boot_ns = *now_});
    e.addr = IpAddress();
    UnixName n;
    n.abstract = !name.empty() && name[0] == '@';
    n.name = n.abstract ? name.substr(1) : name;
    e.unix_name = n;
    e.unix_reached = reached;
    // The supervisor's decisions are no kernel counter's.
    if (!IsSupervised(e)) {
      (verdict == SF_VERDICT_ALLOW ? kernel_.allowed : kernel_.denied)++;
    }
    recorder_->Add(e);
  }
}

void LearnRecord::RawSocket(sf_verdict verdict, sf_reason reason) {
  *now_ += 1000000;
  NetEvent e = MakeEvent({.addr = "0.0.0.0",
                          .port = 0,
                          .verdict = verdict,
                          .reason = reason,
                          .protocol = IPPROTO_ICMP,
                          .sock_type = SOCK_RAW,
                          .hook = SF_HOOK_SOCK_CREATE,
                          .comm = "ping",
                          .generation = generation_,
                          .boot_ns = *now_});
  (verdict == SF_VERDICT_ALLOW ? kernel_.allowed : kernel_.denied)++;
  recorder_->Add(e);
}

void LearnRecord::Query(const std::string& name, uint16_t type,
                        const std::vector<std::string>& addresses, int count,
                        const std::string& verdict) {
  DnsQueryInfo q;
  q.generation = generation_;
  q.name = name;
  q.type = type;
  q.verdict = verdict;
  q.rcode = verdict == "allowed" ? 0 : 3;
  q.transport = "udp";
  for (const std::string& a : addresses) {
    q.addresses.push_back(*IpAddress::Parse(a));
  }
  for (int i = 0; i < count; ++i) {
    *now_ += 1000000;
    q.boot_ns = *now_;
    recorder_->AddDnsQuery(q);
  }
}

absl::Status LearnRecord::Finish() {
  *now_ += 1000000000;
  FinalCounts counts;
  counts.kernel = kernel_;
  absl::StatusOr<RecordOutcome> out = recorder_->Finalize(counts);
  if (!out.ok()) return out.status();
  if (out->lossy) {
    return absl::InternalError(
        absl::StrCat("the test record is lossy: ", out->warnings.size(),
                     " warnings, the first: ",
                     out->warnings.empty() ? "" : out->warnings[0]));
  }
  return absl::OkStatus();
}

CompiledPolicy LearningPolicy(const std::vector<std::string>& phases,
                              bool inherit) {
  CompiledPolicy p;
  p.name = "learning";
  p.content_hash = std::string(64, '0');
  for (const std::string& name : phases) {
    CompiledPhase phase;
    phase.name = name;
    if (inherit) {
      phase.access = v1::INHERIT;
      phase.audit_allowed = v1::Audit::ALL;
    } else {
      phase.access = v1::MODEL_AND_TOOLS;
      phase.rules = {MakeRule(L4::kTcp, "127.0.0.2", 8000, RuleSource::kModel,
                              "127.0.0.2")};
      phase.audit_allowed = v1::Audit::ALL;
      phase.dns_filtered = true;
      phase.dns_mode = v1::Dns::FILTERED;
      phase.name_rules = {
          NameRule{"*.test", {NameGrant{L4::kTcp, 1, 65535}}, "allow"}};
      phase.dns_upstreams = {*HostPort::Parse("127.0.0.1:5353", 53)};
      phase.unix_checked = true;
    }
    p.phases.push_back(std::move(phase));
  }
  return p;
}

absl::Status RecordThreeHosts(const std::string& path) {
  absl::StatusOr<std::unique_ptr<LearnRecord>> rec =
      LearnRecord::Create(path, "rollout-three", LearningPolicy({"agent"}));
  if (!rec.ok()) return rec.status();
  LearnRecord& r = **rec;
  if (absl::Status s = r.Phase("agent"); !s.ok()) return s;
  r.Connect("127.0.0.2", 8000, 4, SF_VERDICT_ALLOW, SF_REASON_RULE);
  r.Connect("127.0.0.53", 53, 6, SF_VERDICT_ALLOW, SF_REASON_DNS_REDIRECT,
            /*udp=*/true, SF_HOOK_SENDMSG4);
  r.Query("a.test", 1, {"127.0.0.3"});
  r.Query("a.test", 28, {});
  r.Connect("127.0.0.3", 80, 3);
  r.Query("b.test", 1, {"127.0.0.4"});
  r.Query("b.test", 28, {});
  r.Connect("127.0.0.4", 80, 2);
  r.Query("c.test", 1, {"127.0.0.5"}, 2);
  r.Query("c.test", 28, {});
  r.Connect("127.0.0.5", 443, 2);
  // Asked again after the answer expired: the address was closed.
  r.Connect("127.0.0.5", 443, 1, SF_VERDICT_DENY, SF_REASON_NO_RULE);
  return r.Finish();
}

}  // namespace sandfence::testing
