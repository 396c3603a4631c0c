"""sandfence.aio against a real daemon: the three modes from Gym's helper
call, a refusal that is a ValueError and never retried, a daemon that is
away at first and then answers, and an async watch. asyncio.run in plain
tests (no pytest plugin needed)."""

import asyncio
import threading
import time

import pytest

from conftest import probe_argv, rollout_id


def aio(sf):
    import sandfence.aio
    return sandfence.aio


def probe(rollout, host, port):
    return rollout.run(probe_argv(host, port), capture_output=True, text=True,
                       timeout=30)


@pytest.mark.parametrize("mode,model,tool,forbidden", [
    ("inherit", 0, 0, 0),
    ("model_only", 0, 1, 1),
    ("model_and_tools", 0, 0, 1),
])
def test_each_mode_from_gyms_helper(sf, daemon, listeners, mode, model, tool,
                                    forbidden):
    async def main():
        async with aio(sf).AsyncClient(daemon.socket, connect_timeout=15) as client:
            net = await aio(sf).restrict_sandbox_network(
                mode, listeners.model_url if mode != "inherit" else None,
                tool_urls=[listeners.tool_url] if mode != "inherit" else (),
                client=client)
            rollout = await client.start_rollout(rollout_id("aio-" + mode), **net)
            async with rollout:
                got = []
                for host, port in (("127.0.0.2", listeners.model),
                                   ("127.0.0.3", listeners.tool),
                                   ("127.0.0.4", listeners.forbidden)):
                    got.append((await probe(rollout, host, port)).returncode)
                assert (await rollout.record()).rollout_id == rollout.id
            return got, rollout.final_record

    got, record = asyncio.run(main())
    assert got == [model, tool, forbidden], f"{mode}: exits {got}"
    assert record is not None and record.complete and not record.lossy
    from sandfence.v1 import record_pb2
    verdicts = {(a.address, a.port): a.verdict for a in record.net_attempt}
    if forbidden:
        assert verdicts.get(("127.0.0.4", listeners.forbidden)) == record_pb2.VERDICT_DENY
    assert not any(v == record_pb2.VERDICT_DENY for (addr, _), v in verdicts.items()
                   if addr == "127.0.0.2"), "the model is never denied"


def test_a_refusal_is_a_value_error_and_is_not_retried(sf, daemon, listeners):
    async def main():
        async with aio(sf).AsyncClient(daemon.socket, connect_timeout=15) as client:
            calls = 0
            real = client._stub.StartRollout

            def counting(*args, **kwargs):
                nonlocal calls
                calls += 1
                return real(*args, **kwargs)

            client._stub.StartRollout = counting
            with pytest.raises(ValueError) as e:
                await client.start_rollout(
                    rollout_id("aio-rej"), network_access="model_only",
                    models=[listeners.model_url],
                    tools=[sf.Tool(listeners.tool_url, required=True)])
            return e.value, calls

    err, calls = asyncio.run(main())
    assert isinstance(err, sf.Rejected) and not err.retryable
    assert (err.field, err.value) == ("tool", listeners.tool_url)
    assert calls == 1, "a refusal is asked once"


def test_no_daemon_is_unavailable_with_a_backoff(sf, tmp_path):
    async def main():
        client = aio(sf).AsyncClient(str(tmp_path / "nobody.sock"), connect_timeout=0.3)
        try:
            with pytest.raises(sf.Unavailable) as e:
                await client.health()
            return e.value
        finally:
            await client.close()

    err = asyncio.run(main())
    assert err.retryable and err.backoff > 0 and "nobody.sock" in err.message


def test_a_daemon_that_comes_back_is_waited_for(sf, own_daemon):
    own_daemon.stop()
    import os
    if os.path.exists(own_daemon.socket):
        os.unlink(own_daemon.socket)
    starter = threading.Timer(1.0, own_daemon.start)
    starter.start()
    began = time.monotonic()

    async def main():
        async with aio(sf).AsyncClient(own_daemon.socket, connect_timeout=30) as client:
            return await client.health()

    try:
        health = asyncio.run(main())
    finally:
        starter.join()
    assert health.version
    assert time.monotonic() - began >= 0.9, "it answered before the daemon was back?"


def test_watch_yields_a_denied_connect(sf, daemon, listeners):
    async def main():
        async with aio(sf).AsyncClient(daemon.socket, connect_timeout=15) as client:
            rollout = await client.start_rollout(
                rollout_id("aio-watch"), network_access="model_only",
                models=[listeners.model_url])
            async with rollout:
                events = []

                async def collect():
                    async for ev in rollout.watch():
                        events.append(ev)
                        if ev.port == listeners.forbidden:
                            return

                task = asyncio.ensure_future(collect())
                await asyncio.sleep(0.3)  # the watch is registered
                done = await probe(rollout, "127.0.0.4", listeners.forbidden)
                assert done.returncode == 1, done.stdout + done.stderr
                await asyncio.wait_for(task, 20)
                return events

    events = asyncio.run(main())
    assert events and events[-1].port == listeners.forbidden
    assert events[-1].address == "127.0.0.4"
