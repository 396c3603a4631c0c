#include "bench/event_sink.h"

#include "absl/strings/str_cat.h"

#if SANDFENCE_BENCH_HAVE_RECORDS
#include "records/recorder.h"
#endif

namespace sandfence::bench {
namespace {

class RingSink : public EventSink {
 public:
  std::string name() const override { return "ring"; }
};

#if SANDFENCE_BENCH_HAVE_RECORDS
class RecordsSink : public EventSink {
 public:
  explicit RecordsSink(std::string dir) : dir_(std::move(dir)) {}
  std::string name() const override { return "records"; }

  absl::Status Open(const Cgroup& cgroup, const CompiledPhase& phase) override {
    CompiledPolicy policy;
    policy.name = "bench";
    policy.phases = {phase};
    RolloutInfo info;
    info.rollout_id = absl::StrCat("bench-", ++opened_);
    info.cgroup_path = cgroup.path();
    info.cgroup_id = cgroup.id();
    RecorderOptions options;
    options.overwrite = true;
    absl::StatusOr<std::shared_ptr<RolloutRecorder>> rec =
        router_.Open(absl::StrCat(dir_, "/", info.rollout_id, ".record"), info,
                     policy, options);
    if (!rec.ok()) return rec.status();
    recorder_ = *std::move(rec);
    return recorder_->BeginPhase(phase.name);
  }
  void Bind(uint32_t generation) override {
    recorder_->BindGeneration(generation);
  }
  void OnEvent(const NetEvent& event) override { router_.OnEvent(event); }
  void Tick() override { router_.Tick().IgnoreError(); }
  absl::Status Close(uint64_t cgroup_id, const SandboxCounters& kernel,
                     uint64_t decode_errors, std::string* note) override {
    FinalCounts counts;
    counts.kernel = kernel;
    counts.decode_errors = decode_errors;
    absl::StatusOr<RecordOutcome> out = router_.Close(cgroup_id, counts);
    recorder_.reset();
    if (!out.ok()) return out.status();
    *note = absl::StrCat("record: ", out->entries, " entries, ", out->bytes,
                         " bytes", out->lossy ? ", marked lossy" : "");
    return absl::OkStatus();
  }

 private:
  std::string dir_;
  int opened_ = 0;
  RecordRouter router_;
  std::shared_ptr<RolloutRecorder> recorder_;
};
#endif

}  // namespace

std::unique_ptr<EventSink> MakeRingSink() {
  return std::make_unique<RingSink>();
}

std::unique_ptr<EventSink> MakeRecordsSink(const std::string& dir) {
#if SANDFENCE_BENCH_HAVE_RECORDS
  return std::make_unique<RecordsSink>(dir);
#else
  (void)dir;
  return nullptr;
#endif
}

}  // namespace sandfence::bench
