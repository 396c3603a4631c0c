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

The daemon names the phase, field and value in its message
(`phase "agent": tool "grader" (http://127.0.0.5:9000) is required, but
model_only allows only the model server`); `Rejected` and `Malformed` parse
them into attributes (None where the message names none).
"""

from __future__ import annotations

import re
from typing import Optional

import grpc

__all__ = [
    "SandfenceError", "Rejected", "Malformed", "Unavailable", "NotFound",
    "AlreadyExists", "PermissionDenied", "InternalError", "from_rpc_error",
    "parse_refusal",
]

# `phase "NAME": ` at the start of a compiler message.
_PHASE = re.compile(r'^phase "((?:[^"\\]|\\.)*)": ')
# What follows it: a field and its value, quoted (`tool "grader" (url)`,
# `model "http://..."`, `sandbox.cgroup_path "/x"`) or bare
# (`network_access model_only`), then the reason.
_FIELD_QUOTED = re.compile(
    r'^([a-z_][a-z0-9_.]*) "((?:[^"\\]|\\.)*)"(?: \(([^)]*)\))?:? ?(.*)$', re.S)
_FIELD_BARE = re.compile(
    r'^(?:(network_access) (inherit|model_only|model_and_tools|unspecified)'
    r'|(sandbox) (/\S*)) (.*)$', re.S)
# `rollout_id is empty`, `network_access is unset or unknown`: a field, no value.
_FIELD_ONLY = re.compile(r'^([a-z_][a-z0-9_.]*) (is .*)$', re.S)


def parse_refusal(message: str) -> tuple:
    """(phase, field, value, reason) from a daemon message; None for the
    parts it does not name. A tool's value is its URL when the message
    gives both name and URL."""
    phase = None
    rest = message
    m = _PHASE.match(rest)
    if m:
        phase = m.group(1)
        rest = rest[m.end():]
    m = _FIELD_QUOTED.match(rest)
    if m:
        field, value, extra, reason = m.group(1), m.group(2), m.group(3), m.group(4)
        if field == "tool" and extra:
            value = extra  # `tool "name" (url)`: the URL is the value
        return phase, field, value, reason or message
    m = _FIELD_BARE.match(rest)
    if m:
        field = m.group(1) or m.group(3)
        value = m.group(2) or m.group(4)
        return phase, field, value, m.group(5)
    m = _FIELD_ONLY.match(rest)
    if m:
        return phase, m.group(1), None, m.group(2)
    return phase, None, None, rest


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
    AgentSeedRejectedError is), never retryable."""

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None, *,
                 phase: Optional[str] = None, field: Optional[str] = None,
                 value: Optional[str] = None, reason: Optional[str] = None):
        super().__init__(message, code)
        p, f, v, r = parse_refusal(message)
        self.phase = phase if phase is not None else p
        self.field = field if field is not None else f
        self.value = value if value is not None else v
        self.reason = reason if reason is not None else r


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
                 backoff: float = 1.0, transport: bool = False):
        super().__init__(message, code)
        self.backoff = backoff
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
# gRPC core's texts for a call that no daemon answered: nothing listens, or
# the connection broke under the call (the daemon died).
_TRANSPORT_TEXTS = (
    "failed to connect", "Socket closed", "Connection refused", "Connection reset",
    "Broken pipe", "No such file", "connections to all backends failing",
    "GOAWAY", "Transport closed", "Connection timed out")


def from_rpc_error(e: grpc.RpcError) -> SandfenceError:
    """The typed error for a failed call."""
    code = e.code() if hasattr(e, "code") else None
    details = (e.details() if hasattr(e, "details") else None) or str(e)
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return Rejected(details, code)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return Malformed(details, code)
    if code == grpc.StatusCode.UNAVAILABLE:
        # gRPC's own texts for a socket nobody serves.
        transport = any(s in details for s in _TRANSPORT_TEXTS)
        return Unavailable(details, code,
                           _TRANSPORT_BACKOFF if transport else _DAEMON_BACKOFF,
                           transport=transport)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Unavailable(f"no answer in time: {details}", code, _TRANSPORT_BACKOFF)
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFound(details, code)
    if code == grpc.StatusCode.ALREADY_EXISTS:
        return AlreadyExists(details, code)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied(details, code)
    return InternalError(details, code)
