// Events: how many denials per second reach user space (and records) with
// nothing lost, what is lost above that, and how long a denial takes to
// arrive. Each run gets a fresh deny-all sandbox; child workers in it
// connect() at paced rates to a denied loopback address, so every attempt
// is exactly one event. The kernel's counters for the sandbox (denied,
// events_lost) are the ground truth the reader's count is checked against.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/allowlist.h"
#include "bench/event_sink.h"
#include "bench/fillers.h"
#include "bench/host.h"
#include "bench/suites.h"
#include "bench/worker.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "egress/egress_abi.h"
#include "egress/egress_controller.h"
#include "egress/net_event.h"

namespace sandfence::bench {
namespace {

struct Arrival {
  uint32_t tgid;
  uint64_t boot_ns;     // the kernel's stamp, at the denial
  uint64_t arrival_ns;  // the reader's, when the callback ran
  uint64_t stored_ns;   // after the sink took it (folded into the record)
};

// What the reader thread does for one run.
struct RunState {
  uint64_t sandbox = 0;
  EventSink* sink = nullptr;
  bool keep_arrivals = false;
  uint64_t read = 0;
  uint64_t foreign = 0;  // events of other sandboxes (none expected)
  std::vector<Arrival> arrivals;
};

struct RunResult {
  uint64_t attempts = 0;
  uint64_t other = 0;  // attempts that were not denied: a broken run
  double seconds = 0;
  uint64_t denied = 0;
  uint64_t kernel_lost = 0;
  uint64_t read = 0;
  std::string sink_note;
  // Latencies in microseconds (runs with stamps only).
  std::vector<double> to_hook, to_user, to_sink;
  uint64_t unmatched = 0;  // children whose events could not be paired
  // The final Drain(): for a stalled run, everything the run produced.
  double drain_seconds = 0;
  uint64_t drained = 0;

  double offered() const { return seconds > 0 ? attempts / seconds : 0; }
  double delivered() const { return seconds > 0 ? read / seconds : 0; }
  uint64_t missing() const { return denied > read ? denied - read : 0; }
  bool lossless() const { return kernel_lost == 0 && missing() == 0; }
  double loss_percent() const {
    return denied ? 100.0 * missing() / denied : 0;
  }
};

// Stops and joins a thread on every way out of a scope.
class Joiner {
 public:
  Joiner(std::atomic<bool>* stop, std::thread* t) : stop_(stop), t_(t) {}
  ~Joiner() {
    stop_->store(true);
    if (t_->joinable()) t_->join();
  }

 private:
  std::atomic<bool>* stop_;
  std::thread* t_;
};

class EventsSuite {
 public:
  EventsSuite(const BenchOptions& o, Report* r) : o_(o), report_(r) {}
  absl::Status Run();

 private:
  // One run: `children` workers deny at `rate` for `ms`. With `stalled`
  // the reader does not poll until they are done (a consumer that stalls),
  // and then drains the ring as fast as it can.
  absl::StatusOr<RunResult> RunOnce(uint64_t rate, int ms, int children,
                                    EventSink* sink, bool stamps,
                                    bool stalled = false);
  absl::Status Drain(const std::vector<EventSink*>& sinks);
  absl::Status Stall();
  absl::StatusOr<std::vector<double>> PipeLatency(uint64_t rate, int ms);
  absl::Status Ladder(EventSink* sink);
  absl::Status Latency(const std::vector<EventSink*>& sinks);

  const BenchOptions& o_;
  Report* report_;
  std::unique_ptr<EgressController> controller_;
  std::unique_ptr<NetEventReader> reader_;
  RunState* current_ = nullptr;  // touched by one thread at a time
  int runs_ = 0;
};

absl::StatusOr<RunResult> EventsSuite::RunOnce(uint64_t rate, int ms,
                                               int children, EventSink* sink,
                                               bool stamps, bool stalled) {
  absl::StatusOr<Cgroup> cg =
      Cgroup::Create(absl::StrCat(o_.cgroup_root, "/ev", runs_++));
  if (!cg.ok()) return cg.status();
  const CompiledPhase phase = DenyAllPhase();
  if (absl::Status s = sink->Open(*cg, phase); !s.ok()) return s;
  if (absl::Status s =
          controller_->AddSandbox(cg->fd(), cg->ref(), phase).status();
      !s.ok()) {
    return s;
  }
  sink->Bind(controller_->Generation(cg->id()).value_or(0));

  RunState state;
  state.sandbox = cg->id();
  state.sink = sink;
  state.keep_arrivals = stamps;
  if (stamps) {
    state.arrivals.reserve(rate ? rate * ms / 1000 + 1024 : 1 << 22);
  }
  current_ = &state;

  RunResult r;
  absl::Status failure;
  {
    std::atomic<bool> stop{false};
    std::thread reader([&] {
      while (!stalled && !stop.load()) {
        reader_->Poll(10).IgnoreError();
        sink->Tick();
      }
    });
    Joiner joiner(&stop, &reader);

    // The children start together, once all of them are up.
    const uint64_t start = BootNs() + 50'000'000;
    std::vector<Worker> workers;
    for (int i = 0; i < children && failure.ok(); ++i) {
      std::vector<std::string> args = {"deny",
                                       "--dst",
                                       kDeniedDst,
                                       "--port-base",
                                       "20000",
                                       "--ports",
                                       "64",
                                       "--rate",
                                       absl::StrCat(rate / children),
                                       "--duration-ms",
                                       absl::StrCat(ms),
                                       "--start-boot-ns",
                                       absl::StrCat(start)};
      if (stamps) args.push_back("--stamps");
      absl::StatusOr<Worker> w = Worker::Start(o_.worker, cg->fd(), args);
      if (!w.ok()) {
        failure = w.status();
      } else {
        workers.push_back(*std::move(w));
      }
    }
    std::vector<std::pair<pid_t, LoadReport>> loads;
    for (Worker& w : workers) {
      const pid_t pid = w.pid();
      absl::StatusOr<std::string> out = w.Finish();
      absl::StatusOr<LoadReport> load =
          out.ok() ? ParseLoadReport(*out) : out.status();
      if (!load.ok()) {
        failure.Update(load.status());
        continue;
      }
      loads.emplace_back(pid, *std::move(load));
    }
    for (const auto& [pid, load] : loads) {
      r.attempts += load.attempts;
      r.other += load.other;
      r.seconds = std::max(r.seconds, load.elapsed_ns / 1e9);
    }
    // Every event is in the ring by now (a denial is submitted before the
    // connect() returns): stop polling and take the rest.
    stop.store(true);
    reader.join();
    const uint64_t drain_start = MonoNs();
    reader_->Drain().IgnoreError();
    r.drain_seconds = (MonoNs() - drain_start) / 1e9;
    r.drained = state.read;

    if (stamps) {
      std::map<uint32_t, std::vector<const Arrival*>> by_child;
      for (const Arrival& a : state.arrivals) by_child[a.tgid].push_back(&a);
      for (const auto& [pid, load] : loads) {
        const auto& events = by_child[static_cast<uint32_t>(pid)];
        // One thread's events reach the ring in the order it made them, so
        // the k-th event is the k-th attempt; only without loss.
        if (events.size() != load.stamps.size()) {
          ++r.unmatched;
          continue;
        }
        for (size_t k = 0; k < events.size(); ++k) {
          const double t0 = static_cast<double>(load.stamps[k]);
          r.to_hook.push_back((events[k]->boot_ns - t0) / 1e3);
          r.to_user.push_back((events[k]->arrival_ns - t0) / 1e3);
          r.to_sink.push_back((events[k]->stored_ns - t0) / 1e3);
        }
      }
    }
  }
  current_ = nullptr;

  absl::StatusOr<SandboxCounters> kernel = controller_->RemoveSandbox(cg->id());
  if (!kernel.ok()) return kernel.status();
  r.denied = kernel->denied;
  r.kernel_lost = kernel->events_lost;
  r.read = state.read;
  if (absl::Status s = sink->Close(cg->id(), *kernel, reader_->decode_errors(),
                                   &r.sink_note);
      !s.ok()) {
    failure.Update(s);
  }
  if (!failure.ok()) return failure;
  if (r.other) {
    return absl::InternalError(
        absl::StrCat(r.other, " of ", r.attempts,
                     " attempts were not denied: the sandbox is not deny-all"));
  }
  return r;
}

absl::StatusOr<std::vector<double>> EventsSuite::PipeLatency(uint64_t rate,
                                                             int ms) {
  absl::StatusOr<Cgroup> cg =
      Cgroup::Create(absl::StrCat(o_.cgroup_root, "/pipe", runs_++));
  if (!cg.ok()) return cg.status();
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2");
  UniqueFd read_end(p[0]), write_end(p[1]);
  const uint64_t count = std::max<uint64_t>(1, rate * ms / 1000);
  std::vector<double> latency;
  latency.reserve(count);
  std::atomic<uint64_t> got{0};
  absl::Status failure;
  {
    std::atomic<bool> stop{false};
    std::thread reader([&] {
      // As the ring reader does: wait for readiness, then take all there is.
      char buf[1 << 16];
      size_t have = 0;
      while (!stop.load() && got.load() < count) {
        pollfd pfd{read_end.get(), POLLIN, 0};
        if (::poll(&pfd, 1, 10) <= 0) continue;
        ssize_t n = ::read(read_end.get(), buf + have, sizeof(buf) - have);
        if (n <= 0) continue;
        const uint64_t now = BootNs();
        have += n;
        size_t k = 0;
        for (; k + 8 <= have; k += 8) {
          uint64_t t0;
          std::memcpy(&t0, buf + k, 8);
          latency.push_back((now - t0) / 1e3);
        }
        got.store(latency.size());
        std::memmove(buf, buf + k, have - k);
        have -= k;
      }
    });
    Joiner joiner(&stop, &reader);
    absl::StatusOr<Worker> w = Worker::Start(
        o_.worker, cg->fd(),
        {"pipe", "--notify", absl::StrCat(write_end.get()), "--rate",
         absl::StrCat(rate), "--count", absl::StrCat(count), "--start-boot-ns",
         absl::StrCat(BootNs() + 50'000'000)},
        {write_end.get()});
    if (!w.ok()) return w.status();
    write_end.reset();
    absl::StatusOr<std::string> out = w->Finish();
    if (!out.ok()) failure = out.status();
    // The reader stops once it has them all; give it a second at most.
    for (int i = 0; i < 200 && got.load() < count; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (!failure.ok()) return failure;
  return latency;
}

Row EventRow(std::string name, std::string variant, uint64_t rate,
             std::string unit, std::vector<double> samples) {
  Row row;
  row.suite = "events";
  row.name = std::move(name);
  row.variant = std::move(variant);
  row.params = {{"rate", static_cast<int64_t>(rate)}};
  row.unit = std::move(unit);
  row.stats = Summarize(std::move(samples));
  return row;
}

absl::Status EventsSuite::Ladder(EventSink* sink) {
  // target rate -> (zero loss in every repetition, its runs)
  std::map<uint64_t, std::vector<RunResult>> points;
  auto run_point = [&](uint64_t rate, int reps) -> absl::Status {
    std::vector<RunResult>& runs = points[rate];
    for (int rep = 0; rep < reps; ++rep) {
      if (g_interrupted) return absl::CancelledError("interrupted");
      absl::StatusOr<RunResult> r =
          RunOnce(rate, o_.event_ms, o_.event_children, sink, false);
      if (!r.ok()) return r.status();
      runs.push_back(*std::move(r));
    }
    return absl::OkStatus();
  };
  auto lossless = [&](uint64_t rate) {
    for (const RunResult& r : points[rate]) {
      if (!r.lossless()) return false;
    }
    return true;
  };

  for (uint64_t rate : o_.event_rates) {
    std::fprintf(stderr, "events: %s sink, rate %llu/s\n", sink->name().c_str(),
                 static_cast<unsigned long long>(rate));
    if (absl::Status s = run_point(rate, o_.event_reps); !s.ok()) return s;
  }
  // Bisect between the fastest paced rate without loss and the slowest
  // with (the unpaced point only bounds the generator).
  uint64_t lo = 0, hi = 0;
  for (uint64_t rate : o_.event_rates) {
    if (rate == 0) continue;
    if (lossless(rate)) {
      lo = std::max(lo, rate);
    } else if (!hi || rate < hi) {
      hi = rate;
    }
  }
  for (int step = 0; step < o_.bisect_steps && lo && hi > lo; ++step) {
    const uint64_t mid = (lo + hi) / 2;
    if (absl::Status s = run_point(mid, 1); !s.ok()) return s;
    (lossless(mid) ? lo : hi) = mid;
  }

  // The lossless point with the highest median offered rate.
  double best = 0;
  uint64_t best_rate = 0;
  std::vector<double> best_offered;
  // Paced rates in order, the unpaced point last.
  std::vector<uint64_t> order;
  for (const auto& [rate, runs] : points) {
    if (rate) order.push_back(rate);
  }
  if (points.count(0)) order.push_back(0);
  for (uint64_t rate : order) {
    const std::vector<RunResult>& runs = points[rate];
    std::vector<double> offered, delivered, loss;
    uint64_t kernel_lost = 0, missing = 0, denied = 0;
    for (const RunResult& r : runs) {
      offered.push_back(r.offered());
      delivered.push_back(r.delivered());
      loss.push_back(r.loss_percent());
      kernel_lost += r.kernel_lost;
      missing += r.missing();
      denied += r.denied;
    }
    Row row =
        EventRow("events_delivered", sink->name(), rate, "events/s", delivered);
    row.baseline = "offered";
    row.baseline_median = Summarize(offered).median;
    row.note = absl::StrFormat(
        "%s%d run(s): %llu denied, %llu missing (kernel events_lost %llu)%s%s",
        rate ? "" : "unpaced; ", static_cast<int>(runs.size()),
        static_cast<unsigned long long>(denied),
        static_cast<unsigned long long>(missing),
        static_cast<unsigned long long>(kernel_lost),
        runs.back().sink_note.empty() ? "" : "; ", runs.back().sink_note);
    report_->Add(row);
    report_->Add(EventRow("events_lost", sink->name(), rate, "%", loss));
    if (lossless(rate) && Summarize(offered).median > best) {
      best = Summarize(offered).median;
      best_rate = rate;
      best_offered = offered;
    }
  }
  const bool none = best_offered.empty();
  if (none) best_offered.push_back(0);
  Row row = EventRow("max_rate_without_loss", sink->name(), best_rate,
                     "events/s", best_offered);
  row.note = none ? "loss at every tested rate"
             : hi ? absl::StrFormat("loss from a target of %llu/s",
                                    static_cast<unsigned long long>(hi))
                  : "no loss at any tested rate: the producers ran out of CPU "
                    "first";
  report_->Add(std::move(row));
  return absl::OkStatus();
}

absl::Status EventsSuite::Latency(const std::vector<EventSink*>& sinks) {
  for (uint64_t rate : o_.latency_rates) {
    if (g_interrupted) return absl::CancelledError("interrupted");
    std::fprintf(stderr, "events: latency at %llu/s\n",
                 static_cast<unsigned long long>(rate));
    absl::StatusOr<std::vector<double>> pipe = PipeLatency(rate, o_.latency_ms);
    if (!pipe.ok()) return pipe.status();
    Row base = EventRow("denial_to_user_space", "pipe", rate, "us", *pipe);
    base.tail = true;
    base.note =
        "baseline: a timestamp written to a pipe and read by a polling thread";
    const double base_median = base.stats.median;
    report_->Add(std::move(base));

    for (EventSink* sink : sinks) {
      absl::StatusOr<RunResult> r =
          RunOnce(rate, o_.latency_ms, 1, sink, /*stamps=*/true);
      if (!r.ok()) return r.status();
      const std::string lost =
          r->unmatched ? "; events were lost, unpaired runs left out" : "";
      Row row = EventRow(
          sink->name() == "ring" ? "denial_to_user_space" : "denial_to_record",
          sink->name(), rate, "us",
          sink->name() == "ring" ? r->to_user : r->to_sink);
      row.tail = true;
      row.baseline = "pipe";
      row.baseline_median = base_median;
      Summary hook = Summarize(r->to_hook);
      row.note = absl::StrFormat(
          "from the timestamp before connect(); the kernel stamps the event "
          "%.2f us (median) after it%s%s%s",
          hook.median, lost, r->sink_note.empty() ? "" : "; ", r->sink_note);
      report_->Add(std::move(row));
    }
  }
  return absl::OkStatus();
}

// Events per slot in the ring buffer: the record and its 8-byte header.
constexpr uint64_t kRingSlot = sizeof(sf_net_event) + 8;

absl::Status EventsSuite::Drain(const std::vector<EventSink*>& sinks) {
  // What user space can take: the ring filled to about three quarters
  // while the reader waits, then drained flat out. The end-to-end ladder
  // cannot show this on a small machine, where the producers run out of
  // CPU long before the consumer does.
  const uint64_t capacity = EgressOptions{}.ring_bytes / kRingSlot;
  const int fill_ms = 150;
  const uint64_t rate = capacity * 3 / 4 * 1000 / fill_ms;
  double ring_median = 0;
  for (EventSink* sink : sinks) {
    std::vector<double> rates;
    uint64_t events = 0;
    for (int rep = 0; rep < o_.drain_reps; ++rep) {
      if (g_interrupted) return absl::CancelledError("interrupted");
      absl::StatusOr<RunResult> r = RunOnce(rate, fill_ms, o_.event_children,
                                            sink, false, /*stalled=*/true);
      if (!r.ok()) return r.status();
      if (r->drain_seconds > 0 && r->drained) {
        rates.push_back(r->drained / r->drain_seconds);
        events += r->drained;
      }
    }
    Row row =
        EventRow("consumer_drain_rate", sink->name(), rate, "events/s", rates);
    row.params = {{"ring_slots", static_cast<int64_t>(capacity)}};
    row.note = absl::StrCat(events / std::max<size_t>(1, rates.size()),
                            " events per drain (ring of ", capacity,
                            " slots); user space alone, no producer running");
    if (sink->name() == "ring") {
      ring_median = row.stats.median;
      row.note += "; decode and count";
    } else {
      row.baseline = "ring";
      row.baseline_median = ring_median;
    }
    report_->Add(std::move(row));
  }
  return absl::OkStatus();
}

absl::Status EventsSuite::Stall() {
  // The loss curve: a reader that stalls for stall_ms while denials keep
  // coming at each rate. The ring holds `capacity` events; past that every
  // event is lost, and counted by the kernel (events_lost), which must equal
  // what the reader found missing.
  const uint64_t capacity = EgressOptions{}.ring_bytes / kRingSlot;
  std::unique_ptr<EventSink> ring = MakeRingSink();
  for (uint64_t rate : o_.stall_rates) {
    if (g_interrupted) return absl::CancelledError("interrupted");
    std::vector<double> loss;
    uint64_t lost = 0, missing = 0, denied = 0;
    for (int rep = 0; rep < o_.event_reps; ++rep) {
      absl::StatusOr<RunResult> r = RunOnce(
          rate, o_.stall_ms, o_.event_children, ring.get(), false, true);
      if (!r.ok()) return r.status();
      loss.push_back(r->loss_percent());
      lost += r->kernel_lost;
      missing += r->missing();
      denied += r->denied;
    }
    Row row = EventRow("loss_while_reader_stalled", "ring", rate, "%", loss);
    row.params.emplace_back("stall_ms", o_.stall_ms);
    row.note = absl::StrFormat(
        "%s%llu denied, %llu lost (kernel events_lost %llu: %s); the ring "
        "holds %llu events",
        rate ? "" : "unpaced; ", static_cast<unsigned long long>(denied),
        static_cast<unsigned long long>(missing),
        static_cast<unsigned long long>(lost),
        lost == missing ? "every loss accounted for" : "MISMATCH",
        static_cast<unsigned long long>(capacity));
    report_->Add(std::move(row));
  }
  return absl::OkStatus();
}

absl::Status EventsSuite::Run() {
  absl::StatusOr<std::unique_ptr<EgressController>> c =
      EgressController::Create(BenchHost());
  if (!c.ok()) return c.status();
  controller_ = *std::move(c);
  absl::StatusOr<std::unique_ptr<NetEventReader>> reader =
      NetEventReader::Create(
          controller_->events_fd(), [this](const NetEvent& e) {
            RunState* s = current_;
            if (!s) return;
            const uint64_t arrival = s->keep_arrivals ? BootNs() : 0;
            if (e.sandbox != s->sandbox) {
              ++s->foreign;
              return;
            }
            ++s->read;
            s->sink->OnEvent(e);
            if (s->keep_arrivals) {
              s->arrivals.push_back({e.tgid, e.boot_ns, arrival, BootNs()});
            }
          });
  if (!reader.ok()) return reader.status();
  reader_ = *std::move(reader);

  std::unique_ptr<EventSink> ring = MakeRingSink();
  std::unique_ptr<EventSink> records =
      MakeRecordsSink(absl::StrCat(o_.work_dir));
  std::vector<EventSink*> sinks = {ring.get()};
  if (records) {
    sinks.push_back(records.get());
  } else {
    report_->Note(
        "events were measured to user space only: this build has no "
        "userspace/records (HOOK(records) in bench/event_sink.h)");
  }
  for (EventSink* sink : sinks) {
    if (absl::Status s = Ladder(sink); !s.ok()) return s;
  }
  if (absl::Status s = Drain(sinks); !s.ok()) return s;
  if (absl::Status s = Stall(); !s.ok()) return s;
  return Latency(sinks);
}

}  // namespace

absl::Status RunEventsSuite(const BenchOptions& options, Report* report) {
  EventsSuite suite(options, report);
  return suite.Run();
}

}  // namespace sandfence::bench
