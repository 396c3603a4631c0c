"""The sandfence daemon's client: rollouts, phases, processes in sandboxes,
records and decisions, with typed errors (sandfence.errors)."""

from __future__ import annotations

import socket as _socket
import subprocess
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import grpc
from google.protobuf import json_format

from sandfence import _spawn
from sandfence.errors import Malformed, SandfenceError, Unavailable, from_rpc_error
from sandfence.network import ToolLike, access_name, as_tool
from sandfence.v1 import daemon_pb2, daemon_pb2_grpc, policy_pb2, record_pb2

__all__ = ["Client", "Rollout", "EventStream", "DEFAULT_SOCKET"]

# The daemon's default (userspace/daemon: kDefaultSocketPath).
DEFAULT_SOCKET = "/run/sandfence/sandfence.sock"
# The rollout id a dry run gives when it is given none (checked for form only).
CHECK_ID = "check"

_ACCESS_ENUM = {"inherit": policy_pb2.INHERIT, "model_only": policy_pb2.MODEL_ONLY,
                "model_and_tools": policy_pb2.MODEL_AND_TOOLS}


def _to_dict(message: Any) -> Dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


# Short reconnect backoff: a restarted daemon is found within ~1 s.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def _no_daemon(socket: str, connect_timeout: float, last: str) -> Unavailable:
    return Unavailable(f"no sandfence daemon answers on unix:{socket} "
                       f"within {connect_timeout:g} s ({last})", None,
                       backoff=2.0, transport=True)


def _response_of(summary: daemon_pb2.RolloutSummary) -> daemon_pb2.StartRolloutResponse:
    """What StartRollout answered, as far as a listed rollout tells it."""
    return daemon_pb2.StartRolloutResponse(
        rollout_id=summary.rollout_id, cgroup_path=summary.cgroup_path,
        cgroup_id=summary.cgroup_id, phase=summary.phase,
        borrowed_from=summary.borrowed_from, generation=summary.generation)


def start_request(rollout_id: str, *, network_access: Any = None,
                  policy: Union[None, str, policy_pb2.PolicySet] = None,
                  policy_file: Optional[str] = None,
                  models: Union[str, Sequence[str]] = (),
                  tools: Iterable[ToolLike] = (),
                  allow: Iterable[Union[policy_pb2.AllowRule, Dict[str, Any]]] = (),
                  cgroup_path: Optional[str] = None, own_netns: bool = False,
                  netns_path: Optional[str] = None, borrowed: bool = False,
                  initial_phase: Optional[str] = None,
                  **request_fields: Any) -> daemon_pb2.StartRolloutRequest:
    """The StartRolloutRequest for Client.start_rollout's arguments (and
    AsyncClient's): one place that spells the request."""
    req = daemon_pb2.StartRolloutRequest(rollout_id=rollout_id)
    given = [n for n, v in (("network_access", network_access), ("policy", policy),
                            ("policy_file", policy_file)) if v is not None]
    if len(given) != 1:
        raise Malformed("give exactly one of network_access, policy, policy_file "
                        f"(given: {', '.join(given) or 'none'})", field="policy")
    if network_access is not None:
        req.network_access = _ACCESS_ENUM[access_name(network_access)]
    elif isinstance(policy, policy_pb2.PolicySet):
        req.policy_set.CopyFrom(policy)
    elif isinstance(policy, str):
        req.policy_text = policy
    elif policy_file is not None:
        req.policy_file = policy_file
    else:
        raise TypeError("policy must be a PolicySet or its text format")
    if cgroup_path is None:
        req.sandbox.create = True
    else:
        req.sandbox.cgroup_path = cgroup_path
    for url in ([models] if isinstance(models, str) else models):
        req.endpoints.model.append(url)
    for t in tools:
        tool = as_tool(t)
        req.endpoints.tool.add(url=tool.url, required=tool.required, name=tool.name,
                               any_port=tool.any_port)
    for a in allow:
        if isinstance(a, dict):
            rule = req.endpoints.allow.add()
            json_format.ParseDict(a, rule)
        else:
            req.endpoints.allow.add().CopyFrom(a)
    req.own_netns = own_netns
    req.borrowed = borrowed
    if netns_path:
        req.netns_path = netns_path
    if initial_phase:
        req.initial_phase = initial_phase
    for name, value in request_fields.items():
        try:
            setattr(req, name, value)
        except (AttributeError, TypeError, ValueError) as e:
            raise Malformed(f"StartRolloutRequest.{name} = {value!r}: {e}",
                            field=name, value=str(value)) from None
    return req


class Client:
    """A connection to one sandfence daemon (gRPC over its Unix socket).

    The channel reconnects by itself: a call made while the daemon is away
    (restarting, say) waits up to `connect_timeout` seconds for it, then
    raises `Unavailable`. Every call is idempotent on the daemon's side, so
    retrying after `Unavailable` is safe.

    Args:
      socket: the daemon's socket (default /run/sandfence/sandfence.sock).
      timeout: seconds a call may take once connected (a start compiles,
        resolves names and attaches: seconds, not milliseconds).
      connect_timeout: seconds to wait for the daemon to answer at all.
    """

    def __init__(self, socket: str = DEFAULT_SOCKET, *, timeout: float = 60.0,
                 connect_timeout: float = 10.0):
        self.socket = socket
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._channel = grpc.insecure_channel("unix:" + socket, options=_CHANNEL_OPTIONS)
        self._stub = daemon_pb2_grpc.SandfenceStub(self._channel)
        self._connected = False

    def close(self) -> None:
        """Closes the channel (open rollouts are not ended)."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- plumbing ---

    def _wait_connected(self) -> None:
        """Waits until something accepts on the socket, up to
        connect_timeout; Unavailable otherwise. A plain connect, not gRPC's
        connectivity watch (whose polling thread outlives the wait)."""
        deadline = time.monotonic() + self.connect_timeout
        last = ""
        while True:
            s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
            try:
                s.settimeout(max(0.05, deadline - time.monotonic()))
                s.connect(self.socket)
                return
            except OSError as e:
                last = e.strerror or str(e)
            finally:
                s.close()
            if time.monotonic() >= deadline:
                raise _no_daemon(self.socket, self.connect_timeout, last)
            time.sleep(0.05)

    def _call(self, method: Callable[..., Any], request: Any) -> Any:
        # Every call of the API is idempotent, so one that the transport
        # lost (the daemon died under it) is made again once the daemon is
        # back; the daemon's own "retry later" answers are raised as they are.
        for attempt in (0, 1):
            if not self._connected:
                self._wait_connected()
            try:
                result = method(request, timeout=self.timeout, wait_for_ready=True)
                self._connected = True
                return result
            except grpc.RpcError as e:
                err = from_rpc_error(e)
            if isinstance(err, Unavailable) and err.transport:
                self._connected = False
                if attempt == 0:
                    continue
            raise err
        raise AssertionError("unreachable")

    # --- the API ---

    def health(self) -> daemon_pb2.HealthResponse:
        """The daemon's version, kernel, egress and guard enforcers, pin dir
        and rollout counts."""
        return self._call(self._stub.Health, daemon_pb2.HealthRequest())

    def rollouts(self) -> List[daemon_pb2.RolloutSummary]:
        """The open rollouts (id, cgroup, phase, counts, adopted)."""
        return list(self._call(self._stub.ListRollouts,
                               daemon_pb2.ListRolloutsRequest()).rollout)

    def rollout(self, rollout_id: str) -> "Rollout":
        """A handle on an open rollout started earlier (by this process or
        another); NotFound if it is not open."""
        from sandfence.errors import NotFound
        for s in self.rollouts():
            if s.rollout_id == rollout_id:
                return Rollout(self, _response_of(s), None)
        raise NotFound(f'no open rollout "{rollout_id}"')

    def start_rollout(self, rollout_id: str, *,
                      network_access: Any = None,
                      policy: Union[None, str, policy_pb2.PolicySet] = None,
                      policy_file: Optional[str] = None,
                      models: Union[str, Sequence[str]] = (),
                      tools: Iterable[ToolLike] = (),
                      allow: Iterable[Union[policy_pb2.AllowRule, Dict[str, Any]]] = (),
                      cgroup_path: Optional[str] = None,
                      own_netns: bool = False,
                      netns_path: Optional[str] = None,
                      borrowed: bool = False,
                      initial_phase: Optional[str] = None,
                      **request_fields: Any) -> "Rollout":
        """Starts a rollout: compiles its policy, then programs and attaches
        it to the sandbox. Nothing is created or attached when it raises.

        Exactly one of: `network_access` (a one-phase policy, phase
        "default"), `policy` (a PolicySet, or its text format) or
        `policy_file` (a name under the daemon's --policy-dir).

        Args:
          rollout_id: 1..128 of [A-Za-z0-9_.-], not starting with '.'.
          models, tools, allow: per-rollout endpoints laid over every phase
            (tools: `Tool`, URL or dict; allow: AllowRule or dict).
          cgroup_path: an existing cgroup v2 directory; default: the daemon
            creates one (and kills what runs in it at the end).
          own_netns, netns_path: the sandbox's own network namespace;
            `Rollout.run` joins netns_path.
          borrowed: the sandbox belongs to another owner (inherit only).
          initial_phase: default: the policy's first phase.
          request_fields: other StartRolloutRequest fields by name (those a
            newer daemon knows and this client does not name).

        Returns: a `Rollout` (a context manager that ends it on exit).
        Raises: Rejected, Malformed, Unavailable, AlreadyExists, ...
        """
        req = start_request(
            rollout_id, network_access=network_access, policy=policy,
            policy_file=policy_file, models=models, tools=tools, allow=allow,
            cgroup_path=cgroup_path, own_netns=own_netns, netns_path=netns_path,
            borrowed=borrowed, initial_phase=initial_phase, **request_fields)
        resp = self._call(self._stub.StartRollout, req)
        return Rollout(self, resp, netns_path)

    def check(self, rollout_id: str = CHECK_ID, **start_rollout_kwargs: Any
              ) -> daemon_pb2.CheckRolloutResponse:
        """A dry run of `start_rollout` with the same arguments: the daemon
        refuses it (Rejected, Malformed, Unavailable: raised as by
        start_rollout) or answers what it would compile (`phase_policy`:
        every phase's rules and dropped grants; `guard`), creating,
        reserving and recording nothing."""
        req = start_request(rollout_id, **start_rollout_kwargs)
        return self._call(self._stub.CheckRollout, req)


class EventStream(Iterator[daemon_pb2.RolloutEvent]):
    """The rollout's decisions as the daemon reads them (RolloutEvent:
    verdict, reason, protocol, address, port, pid, command, missed). Ends
    when the rollout ends; `cancel()` (or leaving a `with` block) stops it
    earlier."""

    def __init__(self, call: Any):
        self._call = call

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> daemon_pb2.RolloutEvent:
        try:
            return next(self._call)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.CANCELLED:
                raise StopIteration from None
            raise from_rpc_error(e) from None

    def cancel(self) -> None:
        self._call.cancel()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cancel()


def _add_note(exc: BaseException, note: str) -> None:
    """BaseException.add_note from 3.11; before, the same __notes__ list
    (which traceback prints from 3.11 on, and callers can read)."""
    add = getattr(exc, "add_note", None)
    if add is not None:
        add(note)
    else:
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]


class _RolloutState:
    """What Rollout and sandfence.aio's AsyncRollout both hold."""

    def __init__(self, client: Any, response: daemon_pb2.StartRolloutResponse,
                 netns_path: Optional[str]):
        self.client = client
        self.response = response
        self.id: str = response.rollout_id
        self.cgroup_path: str = response.cgroup_path
        self.cgroup_id: int = response.cgroup_id
        self.phase: str = response.phase
        self.netns_path = netns_path
        self.final_record: Optional[record_pb2.RolloutRecord] = None

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.id!r}, phase={self.phase!r}, "
                f"cgroup={self.cgroup_path!r})")

    def popen(self, args: Any, **kwargs: Any) -> subprocess.Popen:
        """subprocess.Popen(args, **kwargs), with the child inside the
        sandbox before it executes anything: it joins the sandbox's cgroup
        and (with netns_path) its network namespace, or never executes."""
        return _spawn.popen(self.cgroup_path, self.netns_path, args, **kwargs)


class Rollout(_RolloutState):
    """One open rollout: its sandbox (`cgroup_path`), phase and record.

    As a context manager it ends the rollout on exit; `final_record` then
    holds the record that `end()` returned.
    """

    def set_phase(self, name: str) -> daemon_pb2.SetPhaseResponse:
        """Switches the sandbox to phase `name`, atomically in the kernel;
        the reply says what the switch cut (`cut`) or why not (`not_cut`)."""
        resp = self.client._call(self.client._stub.SetPhase,
                                 daemon_pb2.SetPhaseRequest(rollout_id=self.id, phase=name))
        self.phase = resp.phase
        return resp

    def run(self, args: Any, **kwargs: Any) -> subprocess.CompletedProcess:
        """subprocess.run(args, **kwargs) inside the sandbox (as popen)."""
        return _spawn.run(self.cgroup_path, self.netns_path, args, **kwargs)

    def record(self, as_dict: bool = False) -> Union[record_pb2.RolloutRecord, Dict[str, Any]]:
        """The record so far (or the final one after the end): the protobuf
        RolloutRecord, or with as_dict its JSON form as a dict."""
        resp = self.client._call(self.client._stub.GetRecord,
                                 daemon_pb2.GetRecordRequest(rollout_id=self.id))
        return _to_dict(resp.record) if as_dict else resp.record

    def watch(self) -> EventStream:
        """Every network decision for the sandbox, as the daemon reads it."""
        self.client._wait_connected()
        try:
            call = self.client._stub.WatchEvents(
                daemon_pb2.WatchEventsRequest(rollout_id=self.id), wait_for_ready=True)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        return EventStream(call)

    def end(self) -> record_pb2.RolloutRecord:
        """Ends the rollout (kills what runs in a sandbox the daemon created,
        detaches) and returns its record. Safe to call again."""
        resp = self.client._call(self.client._stub.EndRollout,
                                 daemon_pb2.EndRolloutRequest(rollout_id=self.id))
        self.final_record = resp.record
        return resp.record

    def __enter__(self) -> "Rollout":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.end()
        except SandfenceError as e:
            if exc is None:
                raise
            _add_note(exc, f"sandfence: ending rollout {self.id} failed too: {e}")
