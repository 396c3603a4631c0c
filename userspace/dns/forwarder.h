// Asks the upstream resolvers on behalf of the DNS filter, asynchronously,
// on the filter's event loop.
//
// Each query gets a fresh random id and its own socket (so a fresh source
// port, and a connected socket that takes datagrams from the server it
// asked only); an answer counts only if it is a response with that id and
// the same question. A truncated (TC) answer is asked again over TCP, to the
// same server, with 2-byte length framing. No answer in `attempt_timeout`
// moves on to the next server; SERVFAIL, REFUSED and NOTIMP too while
// other servers remain. When the attempts or `query_timeout` run out the
// query fails (DeadlineExceeded for silence, Unavailable for network
// errors); the filter answers SERVFAIL then, never an allow.
//
// Memory is bounded: at most `max_in_flight` queries in all and
// `max_in_flight_per_client` per client key (the filter's sandbox
// identity). Forward() refuses the excess at once with ResourceExhausted,
// so a flooding sandbox loses its own excess and nobody else's share.
#ifndef SANDFENCE_DNS_FORWARDER_H_
#define SANDFENCE_DNS_FORWARDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/ip.h"
#include "common/unique_fd.h"
#include "dns/event_loop.h"
#include "dns/message.h"

namespace sandfence::dns {

struct ForwarderOptions {
  std::vector<HostPort> servers;
  absl::Duration attempt_timeout = absl::Seconds(1);
  absl::Duration query_timeout = absl::Seconds(4);
  size_t max_in_flight = 4096;
  size_t max_in_flight_per_client = 128;
};

struct UpstreamAnswer {
  std::string wire;
  Message message;
  HostPort server;
  bool tcp = false;
};

class Forwarder {
 public:
  using Done = std::function<void(absl::StatusOr<UpstreamAnswer>)>;

  // InvalidArgument without servers.
  static absl::StatusOr<std::unique_ptr<Forwarder>> Create(
      EventLoop* loop, ForwarderOptions options);
  ~Forwarder();

  // Sends `query` (a client's query that passed CheckQuery) upstream;
  // `done` runs on the loop exactly once, later (never inside Forward).
  // ResourceExhausted, without calling `done`, over the in-flight limits.
  absl::Status Forward(uint64_t client, const Message& query, Done done);

  size_t in_flight() const { return pending_.size(); }
  size_t in_flight(uint64_t client) const;

 private:
  struct Pending {
    uint64_t client = 0;
    Message query;  // the client's
    Done done;
    uint16_t id = 0;
    std::string sent;  // the upstream query of the current attempt
    size_t attempts = 0;
    size_t server = 0;  // index into options_.servers
    UniqueFd fd;
    bool tcp = false;
    std::string tcp_out;  // framed query still to write
    std::string tcp_in;   // framed answer read so far
    EventLoop::TimerId attempt_timer = 0;
    EventLoop::TimerId deadline_timer = 0;
    // A SERVFAIL/REFUSED kept while other servers are asked.
    std::optional<UpstreamAnswer> fallback;
    absl::Status last_error;
  };
  Forwarder(EventLoop* loop, ForwarderOptions options)
      : loop_(loop), options_(std::move(options)) {}

  void StartAttempt(uint64_t key);
  void StartTcp(uint64_t key);
  void OnUdp(uint64_t key);
  void OnTcp(uint64_t key, uint32_t events);
  // The answer arrived over either transport: checks and hands it on.
  void OnAnswer(uint64_t key, std::string wire, bool tcp);
  void NextServer(uint64_t key, absl::Status why);
  void Finish(uint64_t key, absl::StatusOr<UpstreamAnswer> result);
  void CloseAttempt(Pending* p);

  EventLoop* loop_;
  ForwarderOptions options_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Pending>> pending_;
  absl::flat_hash_map<uint64_t, size_t> per_client_;
  uint64_t next_key_ = 1;
  absl::BitGen random_;
  std::string buffer_;  // one 64 KiB receive buffer for every UDP socket
};

}  // namespace sandfence::dns

#endif  // SANDFENCE_DNS_FORWARDER_H_
