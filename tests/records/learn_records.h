// Rollout records for the tests of `records suggest` and `check --against`,
// written through the real recording path (RolloutRecorder, the journal):
// attempts and DNS queries as the kernel and the DNS filter report them.
// Addresses are loopback only (127.0.0.0/8); no test here sends a packet.
#ifndef SANDFENCE_TESTS_RECORDS_LEARN_RECORDS_H_
#define SANDFENCE_TESTS_RECORDS_LEARN_RECORDS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compile/compiled_policy.h"
#include "egress/net_event.h"
#include "records/recorder.h"

namespace sandfence::testing {

// One record being written. Every call lands in the current phase.
class LearnRecord {
 public:
  // Creates the record at path for `policy` (the compiled policy the
  // rollout "ran" under: its phases, model rules and DNS setting).
  static absl::StatusOr<std::unique_ptr<LearnRecord>> Create(
      const std::string& path, const std::string& rollout_id,
      const CompiledPolicy& policy);

  // Starts the next phase span (the policy's phase of that name).
  absl::Status Phase(const std::string& name);

  // `count` attempts to addr:port, as the kernel reports them.
  void Connect(const std::string& addr, uint16_t port, int count = 1,
               sf_verdict verdict = SF_VERDICT_ALLOW,
               sf_reason reason = SF_REASON_LEARNED, bool udp = false,
               sf_hook hook = SF_HOOK_CONNECT4);
  // `count` connects to a Unix socket name ("/path" or "@name").
  // `reached`: what the supervisor found the name led to.
  void ConnectUnix(const std::string& name, int count, sf_verdict verdict,
                   sf_reason reason, const std::string& reached = "");
  // A raw socket the sandbox tried to create.
  void RawSocket(sf_verdict verdict, sf_reason reason);
  // `count` DNS queries of `type` (1 A, 28 AAAA) for name, answered with
  // `addresses` (allowed), or blocked when verdict is "blocked".
  void Query(const std::string& name, uint16_t type,
             const std::vector<std::string>& addresses, int count = 1,
             const std::string& verdict = "allowed");

  // Writes the trailer: a complete record with nothing lost.
  absl::Status Finish();

 private:
  LearnRecord() = default;

  std::shared_ptr<uint64_t> now_;
  std::unique_ptr<RolloutRecorder> recorder_;
  SandboxCounters kernel_;
  uint32_t generation_ = 0;
  uint64_t tgid_ = 500;
};

// The compiled policy of a learning run: each phase named restricted
// (model_and_tools, the model at 127.0.0.2:8000, DNS filtered answering
// every name below .test on any port) or, when `inherit`, unrestricted.
CompiledPolicy LearningPolicy(const std::vector<std::string>& phases,
                              bool inherit = false);

// A rollout that touched three hosts besides the model, in phase "agent":
// a.test (127.0.0.3) tcp/80, b.test (127.0.0.4) tcp/80 and c.test
// (127.0.0.5) tcp/443 (one of those attempts denied), each asked for by
// name first (A and AAAA); the model (127.0.0.2:8000) by address; DNS
// queries to port 53, which the filter answered.
absl::Status RecordThreeHosts(const std::string& path);

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_RECORDS_LEARN_RECORDS_H_
