// The FilterServer's private state shared by its two source files:
// filter_server.cc (judging queries) and filter_io.cc (sockets).
#ifndef SANDFENCE_DNS_FILTER_SERVER_INTERNAL_H_
#define SANDFENCE_DNS_FILTER_SERVER_INTERNAL_H_

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "dns/filter_server.h"

namespace sandfence::dns {

inline constexpr uint32_t kIn = EPOLLIN;
inline constexpr uint32_t kOut = EPOLLOUT;

struct FilterServer::Listener {
  UniqueFd fd;
  Transport transport = Transport::kUdp;
  HostPort bound;
};

struct FilterServer::TcpConn {
  UniqueFd fd;
  QueryOrigin origin;
  std::string in;
  std::string out;
  size_t in_flight = 0;
  bool reading = true;
  bool eof = false;  // the client closed its side: answer, then close
  EventLoop::TimerId idle_timer = 0;
};

// Where and how to send one query's answer, and what to report.
struct FilterServer::Reply {
  Transport transport = Transport::kUdp;
  // UDP: the listener and the addresses; TCP: the connection.
  int udp_fd = -1;
  sockaddr_storage client = {};
  socklen_t client_len = 0;
  HostPort local;
  uint64_t conn = 0;
  size_t max_size = 65535;
  absl::Time start;
  QueryOutcome outcome;
  bool sent = false;
};

}  // namespace sandfence::dns

#endif  // SANDFENCE_DNS_FILTER_SERVER_INTERNAL_H_
