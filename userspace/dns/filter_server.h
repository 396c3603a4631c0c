// The per-sandbox DNS filter's server: listens for the queries that the
// kernel redirects to it, answers the names a sandbox's phase allows by
// asking upstream, and NXDOMAIN (with an Extended DNS Error "Blocked" whose
// text names the sandbox policy) for every other name, without asking
// anyone.
//
// Who asks is decided by the `identify` hook from where the query arrived
// (the listener, and the local address and port it was sent to: read with
// IP_PKTINFO/IPV6_RECVPKTINFO for UDP, getsockname for TCP), never from
// anything inside the packet. The client's own address is passed for
// records only: a sandbox may choose its source address.
//
// Before an allowed answer is released, its addresses (CNAME chain
// followed) are handed to the `learn` hook with the grants of the rules the
// name matched and their expiry; if that fails the client gets SERVFAIL, so
// no answer is ever released whose addresses are not open. Every query ends
// in one call of the `outcome` hook (records, metrics).
//
// UDP replies leave from the address the query was sent to, as every
// client checks. Listeners are bound here (ListenUdp/ListenTcp) or handed
// in already bound (AdoptUdp/AdoptTcp), e.g. sockets created inside a
// sandbox's network namespace and served from the controller.
//
// Threads: Run() drives everything on the calling thread; hooks run there.
// SetPolicy/RemovePolicy and Stop may be called from any thread.
#ifndef SANDFENCE_DNS_FILTER_SERVER_H_
#define SANDFENCE_DNS_FILTER_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/ip.h"
#include "common/unique_fd.h"
#include "dns/answer.h"
#include "dns/event_loop.h"
#include "dns/forwarder.h"
#include "dns/message.h"
#include "dns/name_rules.h"
#include "dns/rebinding.h"

namespace sandfence::dns {

// The filter's key for a sandbox (the lead's choice: a cgroup id, ...).
using SandboxId = uint64_t;
using ListenerId = int;
using ::sandfence::DnsBudget;

enum class Transport : uint8_t { kUdp, kTcp };

// Where a query came from and arrived at.
struct QueryOrigin {
  ListenerId listener = 0;
  Transport transport = Transport::kUdp;
  HostPort local;   // the address and port the query was sent to
  HostPort client;  // the sender (not to be trusted for identity)
};

// What one phase of one sandbox may resolve.
struct SandboxDnsPolicy {
  PhaseNameRules rules;
  TtlPolicy ttl;
  std::string phase;        // for records and the block message
  uint64_t generation = 0;  // passed back to `learn`, opaque here
  // Audit only (enforce: AUDIT): a name the rules do not allow is
  // forwarded and answered like an allowed one, its addresses reported but
  // not learned (opened), and its outcome is kWouldBlock. The budget is not
  // applied: an audit phase denies nothing.
  bool audit_only = false;
  // What names only a wildcard allows may carry out: counted per sandbox
  // across its phases, judged by the limits of the phase in force.
  DnsBudget budget;
  // The protected ranges (dns/rebinding.h; private ones too for a name
  // only a wildcard allows) an answer may still open. An answer with any
  // other protected address is refused whole.
  std::vector<IpPrefix> answers_may_point_at;
};

struct LearnedAddress {
  IpAddress addr;
  uint32_t ttl = 0;    // from the answer, min along the CNAME chain
  absl::Time expires;  // now + LearnedLifetime(ttl)
};

struct LearnRequest {
  SandboxId sandbox = 0;
  uint64_t generation = 0;  // of the policy the query was judged by
  std::string phase;
  std::string name;                // the question's name
  std::vector<std::string> chain;  // name first, then CNAME targets
  std::vector<NameGrant> grants;   // what every address opens
  std::vector<LearnedAddress> addresses;
};

enum class Verdict : uint8_t {
  kAllowed,         // forwarded, answered (the upstream's rcode)
  kBlocked,         // NXDOMAIN from the filter, never asked upstream
  kRefused,         // unknown sandbox, no policy, or over its limits
  kMalformed,       // FORMERR (or dropped: no header to echo)
  kNotServed,       // a well-formed message the filter does not serve
                    // (another opcode or class, a transfer, EDNS version)
  kUpstreamFailed,  // SERVFAIL: no upstream answer in time
  kLearnFailed,     // SERVFAIL: the addresses could not be opened
  kRateLimited,     // over the sandbox's query rate: dropped unanswered
  kWouldBlock,      // audit only: a name the phase would block, answered
                    // by the upstream (or SERVFAIL when it failed); its
                    // addresses are not opened
  kOverBudget,      // REFUSED: a name only a wildcard allows, past the
                    // sandbox's DNS budget; never asked upstream
  kRebinding,       // REFUSED: the answer points at the host or its link
                    // (dns/rebinding.h), which the phase does not grant;
                    // nothing of it opened
};
const char* VerdictName(Verdict v);

struct QueryOutcome {
  std::optional<SandboxId> sandbox;
  std::string phase;
  uint64_t generation = 0;
  QueryOrigin origin;
  std::string name;  // text form; "" when the question did not parse
  uint16_t type = 0;
  Verdict verdict = Verdict::kMalformed;
  uint16_t rcode = 0;  // what the client got (see `replied`)
  bool replied = true;
  std::vector<IpAddress> addresses;  // learned from the answer
  std::vector<std::string> matched;  // the name rules' patterns that matched
  absl::Duration latency;            // first byte read to reply sent
  std::string detail;                // why, for a person
};

struct FilterServerOptions {
  // No servers: allowed names are answered SERVFAIL.
  ForwarderOptions forwarder;
  size_t max_tcp_connections = 512;
  size_t max_tcp_queries_per_connection = 16;  // pipelined, in flight
  absl::Duration tcp_idle_timeout = absl::Seconds(10);
  // Datagrams read from one UDP listener per round, so that one busy
  // listener cannot keep the loop from the others.
  int udp_batch = 64;
  // Queries per second each sandbox identity may send (a token bucket of
  // `query_burst`); the excess is dropped before it is parsed, so that a
  // flooding sandbox costs the filter little. 0: no limit. Queries from
  // unidentified origins share one bucket.
  double max_queries_per_second = 2000;
  double query_burst = 4000;
};

struct FilterHooks {
  std::function<std::optional<SandboxId>(const QueryOrigin&)> identify;
  std::function<absl::Status(const LearnRequest&)> learn;
  std::function<void(const QueryOutcome&)> outcome;  // may be empty
};

class FilterServer {
 public:
  static absl::StatusOr<std::unique_ptr<FilterServer>> Create(
      FilterServerOptions options, FilterHooks hooks);
  ~FilterServer();

  // Binds a listener (IPv4 or IPv6; port 0 picks one: see local_address).
  absl::StatusOr<ListenerId> ListenUdp(const HostPort& addr);
  absl::StatusOr<ListenerId> ListenTcp(const HostPort& addr);
  // Serves an already bound UDP socket / listening TCP socket (made
  // non-blocking here; packet-info options are set here).
  absl::StatusOr<ListenerId> AdoptUdp(UniqueFd fd);
  absl::StatusOr<ListenerId> AdoptTcp(UniqueFd fd);
  absl::StatusOr<HostPort> local_address(ListenerId id) const;
  // Stops serving a listener (and its TCP connections) and closes it; a
  // reply still owed on it is not sent. On the loop's thread (before Run,
  // or through loop()->Post while it runs), like the Listen/Adopt calls.
  void CloseListener(ListenerId id);

  // The phase's rules for a sandbox; replaces what was there. Queries
  // already in flight finish under the policy they were judged by (and its
  // generation goes to `learn`).
  void SetPolicy(SandboxId sandbox, std::shared_ptr<const SandboxDnsPolicy> p);
  void RemovePolicy(SandboxId sandbox);

  absl::Status Run();  // until Stop()
  void Stop();
  EventLoop* loop() { return loop_.get(); }

 private:
  struct Listener;
  struct TcpConn;
  struct Reply;
  FilterServer(FilterServerOptions options, FilterHooks hooks);

  absl::StatusOr<ListenerId> AddListener(UniqueFd fd, Transport transport);
  void OnUdpReadable(ListenerId id);
  void OnAccept(ListenerId id);
  void OnTcpEvent(uint64_t conn, uint32_t events);
  void CloseConn(uint64_t conn);
  // A TCP query of `conn` is done (answered or dropped): its slot frees.
  void ReleaseTcpSlot(uint64_t conn);
  // Reports a query that gets no reply.
  void Drop(Reply& reply);
  bool OverRate(std::optional<SandboxId> sandbox, double rate);
  void TouchConn(uint64_t conn);
  void HandleQuery(const QueryOrigin& origin, absl::string_view wire,
                   std::shared_ptr<Reply> reply);
  void OnUpstream(std::shared_ptr<Reply> reply,
                  std::shared_ptr<const SandboxDnsPolicy> policy,
                  std::shared_ptr<const Message> query, NameMatch match,
                  absl::StatusOr<UpstreamAnswer> answer);
  // Sends and reports the outcome; `rcode` when the header's 4 bits are not
  // all of it.
  void Send(Reply& reply, std::string wire,
            std::optional<uint16_t> rcode = std::nullopt);
  std::shared_ptr<const SandboxDnsPolicy> PolicyFor(SandboxId id);

  FilterServerOptions options_;
  FilterHooks hooks_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Forwarder> forwarder_;
  HostAddresses host_addresses_;  // the loop's only
  absl::flat_hash_map<ListenerId, std::unique_ptr<Listener>> listeners_;
  ListenerId next_listener_ = 1;
  absl::flat_hash_map<uint64_t, std::unique_ptr<TcpConn>> conns_;
  uint64_t next_conn_ = 1;

  struct Bucket {
    double tokens = 0;
    absl::Time last;
  };
  absl::flat_hash_map<SandboxId, Bucket> buckets_;
  uint64_t queries_ = 0;

  // A sandbox's use of its DNS budget in the current window. Names are
  // kept only while under budget, so a sandbox costs at most its budget.
  struct BudgetUse {
    absl::Time window_start;
    absl::Duration window;
    absl::flat_hash_set<std::string> names;
    uint64_t bytes = 0;
  };
  absl::flat_hash_map<SandboxId, BudgetUse> budget_use_;
  uint64_t budget_checks_ = 0;
  // Why `name` (which only a wildcard allows) is past the sandbox's budget,
  // or nullopt: within it, and now counted.
  std::optional<std::string> OverBudget(SandboxId sandbox,
                                        const DnsBudget& budget,
                                        absl::string_view name, uint16_t type);
  // Why the answer may not be released (an address in a protected range
  // the phase does not grant: dns/rebinding.h), or "" when it may.
  absl::StatusOr<std::string> Rebinding(const SandboxDnsPolicy& policy,
                                        const NameMatch& match,
                                        const ChainAddresses& chain);

  absl::Mutex mu_;
  absl::flat_hash_map<SandboxId, std::shared_ptr<const SandboxDnsPolicy>>
      policies_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandfence::dns

#endif  // SANDFENCE_DNS_FILTER_SERVER_H_
