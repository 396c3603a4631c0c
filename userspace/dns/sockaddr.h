// HostPort <-> sockaddr for the DNS filter's sockets.
#ifndef SANDFENCE_DNS_SOCKADDR_H_
#define SANDFENCE_DNS_SOCKADDR_H_

#include <sys/socket.h>

#include "absl/status/statusor.h"
#include "common/ip.h"

namespace sandfence::dns {

HostPort FromSockaddr(const sockaddr_storage& ss);
// Fills `ss` and returns the length to pass to bind/connect/sendto.
socklen_t ToSockaddr(const HostPort& hp, sockaddr_storage* ss);
absl::StatusOr<HostPort> SockName(int fd);  // getsockname
absl::Status SetNonBlocking(int fd);

}  // namespace sandfence::dns

#endif  // SANDFENCE_DNS_SOCKADDR_H_
