"""restrict_sandbox_network: NeMo Gym's helper call, answered by the real
daemon's dry run (CheckRollout), as restrict_network is (whose rows
test_restrict_network.py checks against StartRollout): what the call
shape adds, and that a refusal creates nothing."""

import pytest

MODEL = "http://127.0.0.2:8000/v1"
TOOL = "http://127.0.0.3:8001/"
REQUIRED = "http://127.0.0.3:8002/"


def urls(net):
    return [(t["url"] if isinstance(t, dict) else t.url,
             t["required"] if isinstance(t, dict) else t.required) for t in net["tools"]]


def test_inherit_takes_everything(sf, client):
    net = sf.restrict_sandbox_network("inherit", None, client=client)
    assert net["network_access"] == "inherit" and net["models"] == []


# Optional grants go to the daemon as optional: it drops what the mode
# cannot honour and says so in the record (its rows are in
# test_restrict_network.py); required ones it cannot honour are refused here.
def test_model_only_passes_optional_tools_and_refuses_required_ones(sf, client):
    net = sf.restrict_sandbox_network("model_only", MODEL, tool_urls=[TOOL], client=client)
    assert net["models"] == [MODEL]
    assert urls(net) == [(TOOL, False)]
    with pytest.raises(ValueError) as e:
        sf.restrict_sandbox_network("model_only", MODEL, required_tool_urls=[REQUIRED], client=client)
    assert isinstance(e.value, sf.Rejected) and not e.value.retryable
    assert (e.value.field, e.value.value) == ("tool", REQUIRED)


def test_model_and_tools_keeps_both_kinds_and_refuses_an_unreachable_required_one(sf, client):
    net = sf.restrict_sandbox_network(
        "model_and_tools", MODEL, tool_urls=[TOOL, "http://0.0.0.0:8003/"],
        required_tool_urls=[REQUIRED], client=client)
    assert urls(net) == [(TOOL, False), ("http://0.0.0.0:8003/", False),
                         (REQUIRED, True)]
    with pytest.raises(sf.Rejected):
        sf.restrict_sandbox_network("model_and_tools", MODEL,
                                    required_tool_urls=["http://0.0.0.0:8003/"], client=client)


def test_a_restricted_mode_without_a_model_is_refused(sf, client):
    with pytest.raises(ValueError):
        sf.restrict_sandbox_network("model_only", None, client=client)
    with pytest.raises(sf.Malformed):
        sf.restrict_sandbox_network("model_only", "127.0.0.2:8000", client=client)  # no scheme


def test_the_check_refuses_before_anything_exists_and_names_the_field(sf, client):
    before = {r.rollout_id for r in client.rollouts()}
    with pytest.raises(sf.Rejected) as e:
        sf.restrict_sandbox_network("model_and_tools", "http://[::]:8000/v1",
                                    client=client)
    assert (e.value.phase, e.value.field, e.value.value) == (
        "default", "model", "http://[::]:8000/v1")
    assert "cannot be reached" in e.value.reason
    assert {r.rollout_id for r in client.rollouts()} == before


def test_the_async_call_is_the_same_check(sf, client, daemon):
    import asyncio
    from sandfence import aio

    async def go():
        async with aio.AsyncClient(daemon.socket) as ac:
            net = await aio.restrict_sandbox_network(
                "model_only", MODEL, tool_urls=[TOOL], client=ac)
            assert urls(net) == [(TOOL, False)]
            with pytest.raises(sf.Rejected) as e:
                await aio.restrict_sandbox_network(
                    "model_only", MODEL, required_tool_urls=[REQUIRED], client=ac)
            return e.value

    err = asyncio.run(go())
    assert (err.field, err.value) == ("tool", REQUIRED) and not err.retryable
