// The stage after the ring buffer in the events benchmark. The ring sink
// only counts: it measures kernel -> user space. The records sink folds
// every event into a rollout record on disk through userspace/records, the
// way `sandfence run` does: kernel -> records.
#ifndef SANDFENCE_BENCH_EVENT_SINK_H_
#define SANDFENCE_BENCH_EVENT_SINK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/cgroup.h"
#include "compile/compiled_policy.h"
#include "egress/egress_controller.h"
#include "egress/net_event.h"

namespace sandfence::bench {

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual std::string name() const = 0;

  // Before the sandbox is registered with the controller.
  virtual absl::Status Open(const Cgroup& cgroup, const CompiledPhase& phase) {
    return absl::OkStatus();
  }
  // After: the kernel generation the sandbox is on.
  virtual void Bind(uint32_t generation) {}
  // On the reader thread, for every event of the sandbox.
  virtual void OnEvent(const NetEvent& event) {}
  // On the reader thread, between polls.
  virtual void Tick() {}
  // After the sandbox is gone and the reader drained; says what the sink
  // made of the run in *note.
  virtual absl::Status Close(uint64_t cgroup_id, const SandboxCounters& kernel,
                             uint64_t decode_errors, std::string* note) {
    return absl::OkStatus();
  }
};

std::unique_ptr<EventSink> MakeRingSink();

// HOOK(records): the journal-writing stage. Null when this build has no
// userspace/records (SANDFENCE_BENCH_HAVE_RECORDS unset); the events suite
// then measures up to user space only and says so in the report.
std::unique_ptr<EventSink> MakeRecordsSink(const std::string& dir);

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_EVENT_SINK_H_
