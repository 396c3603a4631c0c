// The DNS filter of this process's sandboxes (issue 14).
//
// One dns::FilterServer, on a thread of its own, per set of upstream
// resolvers (most hosts have one), and per DNS-filtered sandbox one filter
// target: an address in the filters' range (SF_DNS_FILTER_NET,
// 127.83.0.0/16), port 53, served over UDP and TCP. The kernel sends the
// sandbox's port-53 queries there (EgressController::SetDnsTarget). The
// filter knows which sandbox asks by the listener the query arrived on, and
// the egress hooks deny every sandbox any other way into the range, so no
// sandbox can pass for another.
//
// Targets are 127.83.0.0 | slot << 10 | k (k = 1..1023), slot being this
// process's driver slot, so that sandfence processes on one host do not
// reach for the same ones; bind() has the last word (EADDRINUSE: the next).
//
// Addresses an allowed answer carries are handed to `learn` before the
// answer is released (an address that can never be opened -- unspecified,
// or in the filters' range -- is left out); every query's outcome goes to
// the sandbox's `outcome` callback, on the filter's thread.
//
// Thread-safe.
#ifndef SANDFENCE_SANDBOX_DNS_FILTER_HOST_H_
#define SANDFENCE_SANDBOX_DNS_FILTER_HOST_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/ip.h"
#include "compile/compiled_policy.h"
#include "dns/filter_server.h"
#include "egress/learned_entries.h"

namespace sandfence {

class DnsFilterHost {
 public:
  using LearnFn = std::function<absl::Status(
      uint64_t cgroup_id, uint32_t generation, std::vector<LearnedEntry>)>;
  using OutcomeFn = std::function<void(const dns::QueryOutcome&)>;

  DnsFilterHost(uint32_t slot, LearnFn learn, dns::FilterServerOptions options = {})
      : slot_(slot), learn_(std::move(learn)), options_(std::move(options)) {}
  // Stops every filter thread.
  ~DnsFilterHost();

  DnsFilterHost(const DnsFilterHost&) = delete;
  DnsFilterHost& operator=(const DnsFilterHost&) = delete;

  // Binds a filter target for the sandbox on the filter that asks
  // `upstreams` (started if none does) and returns it. Until SetPhase, its
  // queries are refused. AlreadyExists for a sandbox already added;
  // ResourceExhausted when this process's 1023 targets are taken.
  // netns_fd: the sandbox's own network namespace, where the target's
  // sockets are made (its loopback brought up if down); -1: this
  // process's.
  absl::StatusOr<HostPort> AddSandbox(uint64_t cgroup_id,
                                      const std::vector<HostPort>& upstreams,
                                      OutcomeFn outcome, int netns_fd = -1);
  // The names `phase` allows from now on, learning into `generation`. A
  // phase that does not filter DNS refuses every query (its queries do not
  // come here: the kernel redirects only filtered phases').
  absl::Status SetPhase(uint64_t cgroup_id, const CompiledPhase& phase,
                        uint32_t generation);
  // Closes the sandbox's target; queries in flight get no answer.
  void RemoveSandbox(uint64_t cgroup_id);

  size_t sandboxes() const;

 private:
  struct Server {
    std::vector<HostPort> upstreams;
    std::unique_ptr<dns::FilterServer> filter;
    std::thread thread;
    // Listener -> sandbox (the identity the filter trusts).
    absl::flat_hash_map<dns::ListenerId, uint64_t> owner;
  };
  struct Member {
    Server* server = nullptr;
    dns::ListenerId udp = 0, tcp = 0;
    HostPort target;
    OutcomeFn outcome;
  };

  absl::StatusOr<Server*> ServerFor(const std::vector<HostPort>& upstreams)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs fn on the server's loop thread and waits for it.
  static void OnLoop(Server* server, const std::function<void()>& fn);
  absl::Status Learn(const dns::LearnRequest& req);
  void Outcome(const dns::QueryOutcome& outcome);

  const uint32_t slot_;
  const LearnFn learn_;
  const dns::FilterServerOptions options_;

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Server>> servers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Member> members_ ABSL_GUARDED_BY(mu_);
  uint32_t next_k_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace sandfence

#endif  // SANDFENCE_SANDBOX_DNS_FILTER_HOST_H_
