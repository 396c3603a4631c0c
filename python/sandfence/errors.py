"""Typed errors of the sandfence client.

Every failure the public API raises is a `SandfenceError`; a bare
`grpc.RpcError` never escapes. The class says what to do:

| class              | gRPC code            | what to do                          |
|--------------------|----------------------|-------------------------------------|
| `Rejected`         | FAILED_PRECONDITION  | never retry: it can never be enforced |
| `Malformed`        | INVALID_ARGUMENT     | fix the request                     |
| `Unavailable`      | UNAVAILABLE, DEADLINE_EXCEEDED | retry after `backoff` seconds |
| `NotFound`         | NOT_FOUND            | no such rollout                     |
| `AlreadyExists`    | ALREADY_EXISTS       | the id is taken (ids are never reused) |
| `PermissionDenied` | PERMISSION_DENIED    | never retry (a caller inside a sandbox, or not root) |
| `InternalError`    | anything else        |                                     |

Every refusal from the daemon carries a typed `Refusal` in its status
details (daemon.proto): `Rejected`, `Malformed` and `Unavailable` take its
`phase`, `field`, `value` and `reason` from there (None where it names
none), and `Unavailable.backoff` from its `retry_after_ms`. An UNAVAILABLE
without one is gRPC's own (no daemon answered): `transport` is True.
Nothing is read out of the message text, which is for people.
"""

from __future__ import annotations

from typing import Any, Optional

import grpc

__all__ = [
    "SandfenceError", "Rejected", "Malformed", "Unavailable", "NotFound",
    "AlreadyExists", "PermissionDenied", "InternalError", "from_rpc_error",
    "refusal_of",
]

# Where gRPC carries a google.rpc.Status (sandfence's RpcStatus).
_DETAILS_KEY = "grpc-status-details-bin"
_REFUSAL_TYPE = "type.googleapis.com/sandfence.v1.Refusal"


def refusal_of(e: Any) -> Optional[Any]:
    """The daemon's typed Refusal (sandfence.v1.Refusal) in a failed call's
    status details, or None (a transport error, an older daemon)."""
    trailing = e.trailing_metadata() if hasattr(e, "trailing_metadata") else None
    for key, value in (trailing or ()):
        if key != _DETAILS_KEY:
            continue
        from sandfence.v1 import daemon_pb2  # generated; imported when needed
        status = daemon_pb2.RpcStatus()
        try:
            status.ParseFromString(value)
        except Exception:  # noqa: BLE001 - a foreign or damaged trailer
            return None
        for any_msg in status.details:
            if any_msg.type_url == _REFUSAL_TYPE:
                refusal = daemon_pb2.Refusal()
                if any_msg.Unpack(refusal):
                    return refusal
    return None


class SandfenceError(Exception):
    """Base of every error the client raises.

    Attributes: `message` (the daemon's text, or the client's), `code` (the
    gRPC status code, None when the client itself refused).
    """

    retryable = False

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None):
        super().__init__(message)
        self.message = message
        self.code = code


class _Refusal(SandfenceError, ValueError):
    """A request the daemon refuses as it is: a ValueError (as NeMo Gym's
    AgentSeedRejectedError is), never retryable. `phase`, `field`, `value`
    and `reason` are the daemon's Refusal's (None where it names none)."""

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None, *,
                 phase: Optional[str] = None, field: Optional[str] = None,
                 value: Optional[str] = None, reason: Optional[str] = None):
        super().__init__(message, code)
        self.phase = phase
        self.field = field
        self.value = value
        self.reason = reason if reason is not None else message


class Rejected(_Refusal):
    """The request can never be enforced (FAILED_PRECONDITION): never retry.
    `phase`, `field`, `value`, `reason` say which part and why."""


class Malformed(_Refusal):
    """The request is malformed (INVALID_ARGUMENT): fix it. `field` and
    `value` name the offending part where the message says."""


class Unavailable(SandfenceError):
    """A transient fault (no daemon answers, a DNS timeout, a full map):
    the same request may succeed later. `backoff` is the suggested wait in
    seconds before the next try (see `Unavailable.next_backoff`)."""

    retryable = True

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None,
                 backoff: float = 1.0, transport: bool = False, *,
                 phase: Optional[str] = None, field: Optional[str] = None,
                 value: Optional[str] = None, reason: Optional[str] = None):
        super().__init__(message, code)
        self.backoff = backoff
        self.phase = phase
        self.field = field
        self.value = value
        self.reason = reason if reason is not None else message
        # True when no daemon took part (nothing listens, the connection
        # broke): the request may not have reached it.
        self.transport = transport

    @staticmethod
    def next_backoff(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
        """Exponential backoff for the attempt-th retry (0-based), capped."""
        return min(cap, base * (2 ** max(0, attempt)))


class NotFound(SandfenceError):
    """No such rollout (NOT_FOUND)."""


class AlreadyExists(SandfenceError):
    """The rollout id is open with another request, or has ended
    (ALREADY_EXISTS): ids are never reused."""


class PermissionDenied(SandfenceError):
    """The daemon refuses the caller (PERMISSION_DENIED): a process inside a
    sandbox, or one that may not open the socket. Never retry."""


class InternalError(SandfenceError):
    """Anything else the daemon or gRPC reported."""


# Transport failures (no daemon on the socket) suggest a longer wait than
# a daemon's own "retry" answer.
_TRANSPORT_BACKOFF = 2.0
_DAEMON_BACKOFF = 1.0
def _named(refusal: Any) -> dict:
    """The Refusal's parts as keyword arguments; "" (proto3's unset) is None."""
    if refusal is None:
        return {}
    return {name: (getattr(refusal, name) or None)
            for name in ("phase", "field", "value", "reason")}


def from_rpc_error(e: grpc.RpcError) -> SandfenceError:
    """The typed error for a failed call."""
    code = e.code() if hasattr(e, "code") else None
    details = (e.details() if hasattr(e, "details") else None) or str(e)
    refusal = refusal_of(e)
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return Rejected(details, code, **_named(refusal))
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return Malformed(details, code, **_named(refusal))
    if code == grpc.StatusCode.UNAVAILABLE:
        if refusal is not None:
            # The daemon itself said "later": it names the wait.
            backoff = (refusal.retry_after_ms / 1000.0) or _DAEMON_BACKOFF
            return Unavailable(details, code, backoff, transport=False,
                               **_named(refusal))
        # No Refusal: gRPC's own answer (nothing serves the socket, the
        # connection broke under the call): the daemon may not have seen it.
        return Unavailable(details, code, _TRANSPORT_BACKOFF, transport=True)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Unavailable(f"no answer in time: {details}", code, _TRANSPORT_BACKOFF)
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFound(details, code)
    if code == grpc.StatusCode.ALREADY_EXISTS:
        return AlreadyExists(details, code)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied(details, code)
    return InternalError(details, code)
