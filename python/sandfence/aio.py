"""The sandfence daemon's asyncio client (grpc.aio), for async rollout
frameworks such as NeMo Gym's sandbox code. The same calls, errors and
retry rules as `sandfence.Client`, awaited:

    async with sandfence.aio.AsyncClient() as client:
        net = await sandfence.aio.restrict_sandbox_network(
            "model_only", model_url, client=client)
        async with await client.start_rollout("r-1", **net) as rollout:
            await rollout.run(["python3", "agent.py"])
        print(rollout.final_record)
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any, AsyncIterator, Callable, Dict, Iterable, List, Optional, Union

import grpc
import grpc.aio

from sandfence import _spawn
from sandfence.client import (_CHANNEL_OPTIONS, CHECK_ID, DEFAULT_SOCKET, _add_note,
                              _no_daemon, _response_of, _RolloutState, _to_dict,
                              start_request)
from sandfence.errors import NotFound, SandfenceError, Unavailable, from_rpc_error
from sandfence.network import gym_grants, network_request
from sandfence.v1 import daemon_pb2, daemon_pb2_grpc, record_pb2

__all__ = ["AsyncClient", "AsyncRollout", "restrict_sandbox_network"]


class AsyncClient:
    """A connection to one sandfence daemon, for asyncio.

    As `sandfence.Client`: a call made while the daemon is away waits up to
    `connect_timeout` seconds for it, then raises `Unavailable` (retryable,
    with a backoff); a call the transport lost is made once more (every call
    is idempotent on the daemon's side); a refusal raises `Rejected`, a
    `ValueError`, and is never retried.
    """

    def __init__(self, socket: str = DEFAULT_SOCKET, *, timeout: float = 60.0,
                 connect_timeout: float = 10.0):
        self.socket = socket
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._channel = grpc.aio.insecure_channel("unix:" + socket, options=_CHANNEL_OPTIONS)
        self._stub = daemon_pb2_grpc.SandfenceStub(self._channel)
        self._connected = False

    async def close(self) -> None:
        """Closes the channel (open rollouts are not ended)."""
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # --- plumbing ---

    async def _wait_connected(self) -> None:
        """Waits until something accepts on the socket (a plain connect, as
        the sync client), up to connect_timeout; Unavailable otherwise."""
        deadline = time.monotonic() + self.connect_timeout
        last = ""
        while True:
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_unix_connection(self.socket),
                    max(0.05, deadline - time.monotonic()))
                writer.close()
                return
            except (OSError, asyncio.TimeoutError) as e:
                last = getattr(e, "strerror", None) or str(e) or type(e).__name__
            if time.monotonic() >= deadline:
                raise _no_daemon(self.socket, self.connect_timeout, last)
            await asyncio.sleep(0.05)

    async def _call(self, method: Callable[..., Any], request: Any) -> Any:
        for attempt in (0, 1):
            if not self._connected:
                await self._wait_connected()
            try:
                result = await method(request, timeout=self.timeout, wait_for_ready=True)
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

    # --- the API (sandfence.Client's, awaited) ---

    async def health(self) -> daemon_pb2.HealthResponse:
        return await self._call(self._stub.Health, daemon_pb2.HealthRequest())

    async def rollouts(self) -> List[daemon_pb2.RolloutSummary]:
        return list((await self._call(self._stub.ListRollouts,
                                      daemon_pb2.ListRolloutsRequest())).rollout)

    async def rollout(self, rollout_id: str) -> "AsyncRollout":
        for s in await self.rollouts():
            if s.rollout_id == rollout_id:
                return AsyncRollout(self, _response_of(s), None)
        raise NotFound(f'no open rollout "{rollout_id}"')

    async def start_rollout(self, rollout_id: str, **kwargs: Any) -> "AsyncRollout":
        """`Client.start_rollout`'s arguments; nothing is created or
        attached when it raises."""
        req = start_request(rollout_id, **kwargs)
        resp = await self._call(self._stub.StartRollout, req)
        return AsyncRollout(self, resp, kwargs.get("netns_path"))

    async def check(self, rollout_id: str = CHECK_ID,
                    **kwargs: Any) -> daemon_pb2.CheckRolloutResponse:
        """`Client.check`: a dry run of start_rollout, awaited."""
        req = start_request(rollout_id, **kwargs)
        return await self._call(self._stub.CheckRollout, req)


async def restrict_sandbox_network(network_access: Any, model_base_url: Optional[str],
                                   tool_urls: Iterable[str] = (),
                                   required_tool_urls: Iterable[str] = (), *,
                                   client: AsyncClient, any_port: bool = False,
                                   **options: Any) -> Dict[str, Any]:
    """`sandfence.restrict_sandbox_network`, awaited on `client`: the
    start_rollout arguments, once the daemon's dry run accepted them;
    Rejected (a ValueError, never retried) when it refuses them."""
    kwargs = network_request(network_access, model_base_url,
                             gym_grants(tool_urls, required_tool_urls, any_port),
                             **options)
    await client.check(**kwargs)
    return kwargs


class AsyncRollout(_RolloutState):
    """One open rollout; `async with` ends it on exit and keeps the record
    in `final_record`. `popen` is Rollout's (it returns at once)."""

    async def set_phase(self, name: str) -> daemon_pb2.SetPhaseResponse:
        resp = await self.client._call(
            self.client._stub.SetPhase,
            daemon_pb2.SetPhaseRequest(rollout_id=self.id, phase=name))
        self.phase = resp.phase
        return resp

    async def run(self, args: Any, **kwargs: Any) -> subprocess.CompletedProcess:
        """subprocess.run inside the sandbox, in a worker thread so that the
        event loop goes on."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, lambda: _spawn.run(self.cgroup_path, self.netns_path, args, **kwargs))

    async def record(self, as_dict: bool = False
                     ) -> Union[record_pb2.RolloutRecord, Dict[str, Any]]:
        resp = await self.client._call(self.client._stub.GetRecord,
                                       daemon_pb2.GetRecordRequest(rollout_id=self.id))
        return _to_dict(resp.record) if as_dict else resp.record

    async def watch(self) -> AsyncIterator[daemon_pb2.RolloutEvent]:
        """Every network decision for the sandbox; ends with the rollout."""
        await self.client._wait_connected()
        call = self.client._stub.WatchEvents(
            daemon_pb2.WatchEventsRequest(rollout_id=self.id), wait_for_ready=True)
        try:
            async for event in call:
                yield event
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                raise from_rpc_error(e) from None
        finally:
            call.cancel()

    async def end(self) -> record_pb2.RolloutRecord:
        resp = await self.client._call(self.client._stub.EndRollout,
                                       daemon_pb2.EndRolloutRequest(rollout_id=self.id))
        self.final_record = resp.record
        return resp.record

    async def __aenter__(self) -> "AsyncRollout":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            await self.end()
        except SandfenceError as e:
            if exc is None:
                raise
            _add_note(exc, f"sandfence: ending rollout {self.id} failed too: {e}")
