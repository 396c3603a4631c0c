// What the socket-family supervisor (confine/socket_supervisor.h) decides
// in a sandbox's phase, and the record entry it makes: the same NetEvent a
// kernel hook would have sent, with hook "socket" (the family named as its
// protocol) or "io_uring_setup".
#ifndef SANDFENCE_SANDBOX_SOCKET_ATTEMPTS_H_
#define SANDFENCE_SANDBOX_SOCKET_ATTEMPTS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "compile/compiled_policy.h"
#include "confine/socket_supervisor.h"
#include "egress/net_event.h"

namespace sandfence {

// nullopt: the phase is inherit (carried on, nothing recorded);
// SF_VERDICT_DENY: refused; SF_VERDICT_AUDIT_DENY: an audit-only phase
// carries it on and records that it would have refused it.
std::optional<sf_verdict> SocketFamilyVerdict(const CompiledPhase& phase);

// Whether the phase lists a Unix path (confine::UnixBrokerHooks::listed).
std::function<bool(const std::string& path)> ListedUnixPaths(
    const CompiledPhase& phase);

// The event for an attempt the supervisor answered with `verdict`. The
// caller's process id, credentials and command are read from /proc at
// once (the thread may be gone: then they stay 0 and empty).
NetEvent SocketAttemptEvent(const confine::SocketAttempt& attempt,
                            sf_verdict verdict, uint64_t sandbox,
                            uint32_t generation);

}  // namespace sandfence

#endif  // SANDFENCE_SANDBOX_SOCKET_ATTEMPTS_H_
