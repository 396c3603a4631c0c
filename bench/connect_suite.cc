// Connect cost. Three cgroups at the same depth under the run's subtree:
// "plain" (no sandbox: the baseline), "sb" (a sandfence sandbox) and "nft"
// (matched by the nftables sidecar table). The measuring worker is started
// inside one of them, so its own sockets are the ones judged. Filler
// sandboxes (each with a small policy of its own) are registered with the
// controller and the nftables table to reach the sandbox counts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/allowlist.h"
#include "bench/empty_programs.h"
#include "bench/fillers.h"
#include "bench/host.h"
#include "bench/nft_sidecar.h"
#include "bench/suites.h"
#include "bench/worker.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "egress/egress_controller.h"
#include "egress/spawn.h"

namespace sandfence::bench {
namespace {

constexpr std::array<const char*, 3> kOps = {"udp_connect", "udp_sendto",
                                             "tcp_connect_accept"};
constexpr std::array<const char*, 4> kHooks = {"sock_create", "connect4",
                                               "sendmsg4", "skb_egress"};

// Detaches the nftables base chain when a measurement ends, however it
// ends.
class AttachScope {
 public:
  explicit AttachScope(NftSidecar* nft) : nft_(nft) {}
  absl::Status Attach() { return nft_ ? nft_->Attach() : absl::OkStatus(); }
  ~AttachScope() {
    if (nft_) nft_->Detach().IgnoreError();
  }

 private:
  NftSidecar* nft_;
};

using Samples = std::map<std::string, std::vector<double>>;

class ConnectSuite {
 public:
  ConnectSuite(const BenchOptions& o, Report* r) : o_(o), report_(r) {}
  absl::Status Run();

 private:
  absl::Status SetUp();
  absl::Status GrowFillers(size_t sandboxes);
  absl::Status Measure(size_t sandboxes, size_t rules);
  absl::StatusOr<Samples> RunWorker(const Cgroup& cg, int batches);
  // The kernel's run time per run of each hook's program (prog_fd) while
  // the worker runs in `cg`: a row per hook, against the empty program's
  // (floors_) when they are known. Returns the medians.
  absl::StatusOr<std::map<std::string, double>> MeasureProgramCost(
      size_t sandboxes, size_t rules, double baseline_udp_connect,
      const Cgroup& cg, const std::string& variant,
      const std::function<int(const char*)>& prog_fd);
  // The floors: the same worker in a cgroup with an empty program of each
  // hook (issue 37), measured at every size, just before sandfence's.
  absl::Status MeasureFloors(size_t sandboxes, size_t rules,
                             double baseline_udp_connect);
  absl::Status MeasureBreakdown(size_t sandboxes, size_t rules,
                                double baseline_udp_connect);

  const BenchOptions& o_;
  Report* report_;
  // Destroyed in reverse: the table, the fillers' map entries, their
  // cgroups, the three measured cgroups, then the controller.
  std::unique_ptr<EgressController> controller_;
  std::optional<Cgroup> plain_, sb_, nft_cg_, floor_cg_;
  std::unique_ptr<EmptyPrograms> empty_;
  std::map<std::string, double> floors_;  // hook -> ns/run, this size
  std::unique_ptr<CgroupDirs> filler_dirs_;
  std::optional<MapOnlySandboxes> map_only_;
  size_t fillers_ = 0;
  size_t attached_fillers_ = 0;
  Listeners listeners_;
  std::unique_ptr<NftSidecar> nft_;
};

absl::Status ConnectSuite::SetUp() {
  absl::StatusOr<std::unique_ptr<EgressController>> c =
      EgressController::Create(BenchHost());
  if (!c.ok()) return c.status();
  controller_ = *std::move(c);

  for (auto [slot, name] :
       {std::pair{&plain_, "plain"}, {&sb_, "sb"}, {&nft_cg_, "nft"},
        {&floor_cg_, "floor"}}) {
    absl::StatusOr<Cgroup> cg =
        Cgroup::Create(absl::StrCat(o_.cgroup_root, "/", name));
    if (!cg.ok()) return cg.status();
    slot->emplace(*std::move(cg));
  }
  absl::StatusOr<std::unique_ptr<EmptyPrograms>> empty = EmptyPrograms::Attach(
      floor_cg_->fd(), std::vector<std::string>(kHooks.begin(), kHooks.end()));
  if (!empty.ok()) return empty.status();
  empty_ = *std::move(empty);
  absl::StatusOr<Listeners> l = ListenLoopback();
  if (!l.ok()) return l.status();
  listeners_ = *std::move(l);

  const size_t first_rules = o_.connect_rules.front();
  absl::Status s =
      controller_
          ->AddSandbox(sb_->fd(), sb_->ref(),
                       AllowlistPhase(first_rules, listeners_.tcp_port,
                                      listeners_.udp_port))
          .status();
  if (!s.ok()) return s;

  // nftables is the comparison, not the subject: without it the suite
  // still measures sandfence against the baseline, and says so.
  absl::StatusOr<std::string> nft_binary = FindExecutable("nft");
  absl::StatusOr<NftCgroupName> name =
      NftNameOf(nft_cg_->path(), o_.cgroup2_mount);
  if (!nft_binary.ok()) {
    report_->Note(absl::StrCat(
        "nftables variant skipped: ", nft_binary.status().message(),
        " (scripts/install-deps.sh --test installs it)"));
  } else if (!name.ok()) {
    report_->Note(
        absl::StrCat("nftables variant skipped: ", name.status().message()));
  } else {
    absl::StatusOr<std::unique_ptr<NftSidecar>> nft =
        NftSidecar::Create(absl::StrCat("sf_bench_", ::getpid()),
                           o_.cgroup2_mount, name->level, o_.work_dir);
    if (nft.ok()) {
      nft_ = *std::move(nft);
      s = nft_->AddSandboxes(
          {{nft_cg_->path(), AllowlistAddresses(first_rules)}});
    } else {
      s = nft.status();
    }
    if (!s.ok()) {
      report_->Note(absl::StrCat("nftables variant skipped: ", s.message()));
      nft_.reset();
    }
  }
  return absl::OkStatus();
}

absl::Status ConnectSuite::GrowFillers(size_t sandboxes) {
  if (!filler_dirs_)
    filler_dirs_ = std::make_unique<CgroupDirs>(o_.cgroup_root);
  // The measured sandbox is one of the `sandboxes`.
  std::vector<NftSandbox> added;
  size_t budget = SandboxFdBudget(*controller_);
  while (fillers_ + 1 < sandboxes) {
    const size_t k = fillers_;
    absl::StatusOr<CgroupDirs::Dir> dir =
        filler_dirs_->Make(absl::StrCat("f", k));
    if (!dir.ok()) return dir.status();
    absl::Status s;
    if (budget > 0) {
      s = controller_->AddSandbox(dir->fd.get(), dir->ref(), FillerPhase(k))
              .status();
      --budget;
      ++attached_fillers_;
    } else {
      if (!map_only_) {
        absl::StatusOr<MapOnlySandboxes> m =
            MapOnlySandboxes::Open(*controller_);
        if (!m.ok()) return m.status();
        map_only_.emplace(*std::move(m));
      }
      s = map_only_->Add(dir->id, FillerPhase(k));
    }
    if (!s.ok()) return s;
    added.push_back({dir->path, FillerAddresses(k)});
    ++fillers_;
  }
  if (map_only_ && !added.empty()) {
    report_->Note(absl::StrCat(
        "connect with ", sandboxes, " sandboxes: ", attached_fillers_ + 1,
        " attached through the controller, ", map_only_->size(),
        " written into its maps only: a link fd per hook per sandbox exceeds this "
        "host's RLIMIT_NOFILE (bench/fillers.h)"));
  }
  if (nft_ && !added.empty()) return nft_->AddSandboxes(added);
  return absl::OkStatus();
}

absl::StatusOr<Samples> ConnectSuite::RunWorker(const Cgroup& cg, int batches) {
  absl::StatusOr<Worker> w = Worker::Start(
      o_.worker, cg.fd(),
      {"connect", "--tcp-listen", absl::StrCat(listeners_.tcp.get()),
       "--udp-sink", absl::StrCat(listeners_.udp.get()), "--dst", kAllowedDst,
       "--tcp-port", absl::StrCat(listeners_.tcp_port), "--udp-port",
       absl::StrCat(listeners_.udp_port), "--batches", absl::StrCat(batches),
       "--udp-batch", absl::StrCat(o_.udp_connect_batch), "--send-batch",
       absl::StrCat(o_.udp_send_batch), "--tcp-batch",
       absl::StrCat(o_.tcp_batch)},
      {listeners_.tcp.get(), listeners_.udp.get()});
  if (!w.ok()) return w.status();
  absl::StatusOr<std::string> out = w->Finish();
  if (!out.ok()) return out.status();
  return ParseSamples(*out);
}

absl::Status ConnectSuite::Measure(size_t sandboxes, size_t rules) {
  enum Variant { kBaseline, kSandfence, kNft };
  const char* names[] = {"baseline", "sandfence", "nftables"};
  const Cgroup* cgroups[] = {&*plain_, &*sb_, &*nft_cg_};
  Samples samples[3];
  // Per round and op, each variant's median: overhead estimates that come
  // from workers run back to back, so that the machine's drift between
  // rounds (a shared host) shows as spread instead of as overhead.
  std::map<std::string, std::vector<double>> overhead[3];
  for (int round = 0; round < o_.connect_rounds; ++round) {
    Samples this_round[3];
    // Rotate the order so that no variant always runs first (warm caches,
    // a neighbour's burst).
    for (int i = 0; i < 3; ++i) {
      const int v = (i + round) % 3;
      if (v == kNft && !nft_) continue;
      if (g_interrupted) return absl::CancelledError("interrupted");
      AttachScope hooked(v == kNft ? nft_.get() : nullptr);
      if (absl::Status s = hooked.Attach(); !s.ok()) return s;
      absl::StatusOr<Samples> got = RunWorker(*cgroups[v], o_.connect_batches);
      if (!got.ok()) {
        return absl::Status(
            got.status().code(),
            absl::StrCat(names[v], " worker: ", got.status().message()));
      }
      this_round[v] = *got;
      for (auto& [op, values] : *got) {
        auto& all = samples[v][op];
        all.insert(all.end(), values.begin(), values.end());
      }
    }
    for (const char* op : kOps) {
      const double base = Summarize(this_round[kBaseline][op]).median;
      for (int v : {kSandfence, kNft}) {
        if (v == kNft && !nft_) continue;
        overhead[v][op].push_back(Summarize(this_round[v][op]).median - base);
      }
    }
  }

  const std::vector<std::pair<std::string, int64_t>> params = {
      {"rules", static_cast<int64_t>(rules)},
      {"sandboxes", static_cast<int64_t>(sandboxes)}};
  for (const char* op : kOps) {
    Summary base = Summarize(samples[kBaseline][op]);
    for (int v = kBaseline; v <= kNft; ++v) {
      if (v == kNft && !nft_) continue;
      Row row;
      row.suite = "connect";
      row.name = op;
      row.params = params;
      row.variant = names[v];
      row.unit = "ns/op";
      row.stats = Summarize(samples[v][op]);
      if (v != kBaseline) {
        row.baseline = "baseline";
        row.baseline_median = base.median;
      }
      report_->Add(std::move(row));
    }
    // The overheads, nftables' first: sandfence's is judged against it.
    double nft_overhead = 0;
    for (int v : {kNft, kSandfence}) {
      if (v == kNft && !nft_) continue;
      Row row;
      row.suite = "connect";
      row.name = op;
      row.params = params;
      row.variant = absl::StrCat(names[v], " overhead");
      row.unit = "ns/op";
      row.stats = Summarize(overhead[v][op]);
      row.note = "per round: the variant's median minus the baseline's";
      if (v == kNft) {
        nft_overhead = row.stats.median;
        if (std::string(op) == "udp_connect") {
          row.note += "; a UDP connect() sends no packet: nftables sees none";
        }
      } else if (nft_ && nft_overhead > 0.05 * base.median) {
        row.baseline = "nftables overhead";
        row.baseline_median = nft_overhead;
      } else if (nft_) {
        row.note += "; no ratio: nftables' overhead is within 5% of zero";
      }
      report_->Add(std::move(row));
    }
  }
  const double base = Summarize(samples[kBaseline]["udp_connect"]).median;
  if (absl::Status s = MeasureFloors(sandboxes, rules, base); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::map<std::string, double>> kernel = MeasureProgramCost(
      sandboxes, rules, base, *sb_, "kernel",
      [&](const char* hook) { return controller_->prog_fd(hook); });
  if (!kernel.ok()) return kernel.status();
  // Once, at the first size: what the allow audit costs per run.
  if (sandboxes == o_.connect_sandboxes.front() &&
      rules == o_.connect_rules.front()) {
    return MeasureBreakdown(sandboxes, rules, base);
  }
  return absl::OkStatus();
}

absl::Status ConnectSuite::MeasureBreakdown(size_t sandboxes, size_t rules,
                                            double baseline_udp_connect) {
  struct Variant {
    const char* cgroup;
    const char* label;
    v1::NetworkAccess access;
    v1::Audit::Allowed audit;
  };
  const Variant variants[] = {
      {"sb-audit-none", "kernel, allows not audited", v1::MODEL_ONLY,
       v1::Audit::NO_ALLOWED},
      {"sb-inherit", "kernel, inherit (nothing judged)", v1::INHERIT,
       v1::Audit::NO_ALLOWED},
  };
  for (const Variant& v : variants) {
    absl::StatusOr<Cgroup> cg =
        Cgroup::Create(absl::StrCat(o_.cgroup_root, "/", v.cgroup));
    if (!cg.ok()) return cg.status();
    CompiledPhase phase =
        AllowlistPhase(rules, listeners_.tcp_port, listeners_.udp_port);
    phase.access = v.access;
    phase.audit_allowed = v.audit;
    if (absl::Status s =
            controller_->AddSandbox(cg->fd(), cg->ref(), phase).status();
        !s.ok()) {
      return s;
    }
    absl::Status s =
        MeasureProgramCost(
            sandboxes, rules, baseline_udp_connect, *cg, v.label,
            [&](const char* hook) { return controller_->prog_fd(hook); })
            .status();
    controller_->RemoveSandbox(cg->id()).IgnoreError();
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ConnectSuite::MeasureFloors(size_t sandboxes, size_t rules,
                                         double baseline_udp_connect) {
  absl::StatusOr<std::map<std::string, double>> floors = MeasureProgramCost(
      sandboxes, rules, baseline_udp_connect, *floor_cg_, "empty program",
      [&](const char* hook) { return empty_->prog_fd(hook); });
  if (!floors.ok()) return floors.status();
  floors_ = *std::move(floors);
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, double>> ConnectSuite::MeasureProgramCost(
    size_t sandboxes, size_t rules, double baseline_udp_connect,
    const Cgroup& sandbox, const std::string& variant,
    const std::function<int(const char*)>& prog_fd) {
  std::map<std::string, double> medians;
  absl::StatusOr<BpfStatsEnabled> stats = BpfStatsEnabled::Enable();
  if (!stats.ok()) {
    report_->Note(absl::StrCat("kernel per-program cost not measured: ",
                               stats.status().message()));
    return medians;
  }
  std::map<std::string, std::vector<double>> per_run;
  for (int run = 0; run < o_.bpf_stats_runs; ++run) {
    std::map<std::string, ProgRunStats> before;
    for (const char* hook : kHooks) {
      absl::StatusOr<ProgRunStats> s = ReadProgRunStats(prog_fd(hook));
      if (!s.ok()) return s.status();
      before[hook] = *s;
    }
    absl::StatusOr<Samples> got =
        RunWorker(sandbox, std::max(1, o_.connect_batches / 3));
    if (!got.ok()) return got.status();
    for (const char* hook : kHooks) {
      absl::StatusOr<ProgRunStats> s = ReadProgRunStats(prog_fd(hook));
      if (!s.ok()) return s.status();
      const uint64_t runs = s->run_cnt - before[hook].run_cnt;
      if (runs) {
        per_run[hook].push_back(
            static_cast<double>(s->run_time_ns - before[hook].run_time_ns) /
            runs);
      }
    }
  }
  for (const char* hook : kHooks) {
    Row row;
    row.suite = "connect";
    row.name = absl::StrCat("bpf_run/", hook);
    row.params = {{"rules", static_cast<int64_t>(rules)},
                  {"sandboxes", static_cast<int64_t>(sandboxes)}};
    row.variant = variant;
    row.unit = "ns/run";
    row.stats = Summarize(per_run[hook]);
    medians[hook] = row.stats.median;
    // Against the hook's floor (issue 37); the floor itself against the
    // whole operation it is a part of.
    const auto floor = floors_.find(hook);
    if (variant != "empty program" && floor != floors_.end() &&
        floor->second > 0) {
      row.baseline = "empty program";
      row.baseline_median = floor->second;
    } else {
      row.baseline = "baseline udp_connect";
      row.baseline_median = baseline_udp_connect;
    }
    if (per_run[hook].empty()) row.note = "the program did not run";
    report_->Add(std::move(row));
  }
  return medians;
}

absl::Status ConnectSuite::Run() {
  if (absl::Status s = SetUp(); !s.ok()) return s;
  for (size_t sandboxes : o_.connect_sandboxes) {
    if (absl::Status s = GrowFillers(sandboxes); !s.ok()) return s;
    for (size_t rules : o_.connect_rules) {
      if (g_interrupted) return absl::CancelledError("interrupted");
      absl::Status s =
          controller_
              ->SwitchPhase(sb_->id(),
                            AllowlistPhase(rules, listeners_.tcp_port,
                                           listeners_.udp_port))
              .status();
      if (!s.ok()) return s;
      if (nft_) {
        s = nft_->ReplaceAddresses(0, AllowlistAddresses(rules));
        if (!s.ok()) return s;
      }
      std::fprintf(stderr, "connect: %zu sandboxes x %zu rules\n", sandboxes,
                   rules);
      if (s = Measure(sandboxes, rules); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunConnectSuite(const BenchOptions& options, Report* report) {
  ConnectSuite suite(options, report);
  absl::Status s = suite.Run();
  // The suite's destructor detaches every sandbox and removes the cgroups
  // and the nftables table.
  return s;
}

}  // namespace sandfence::bench
