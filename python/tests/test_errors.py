"""Every typed error, from the real daemon; never a bare grpc.RpcError."""

import grpc
import pytest

from conftest import rollout_id


def test_the_refusal_is_data_in_the_status_details(client, sf, listeners):
    # A raw gRPC caller reads the same typed Refusal the errors are made of.
    from sandfence.errors import refusal_of
    from sandfence.v1 import daemon_pb2
    req = daemon_pb2.StartRolloutRequest(rollout_id=rollout_id("raw"))
    req.sandbox.create = True
    req.network_access = 2  # MODEL_ONLY
    req.endpoints.model.append(listeners.model_url)
    req.endpoints.tool.add(url=listeners.tool_url, required=True, name="grader")
    with pytest.raises(grpc.RpcError) as e:
        client._stub.StartRollout(req, timeout=30)
    refusal = refusal_of(e.value)
    assert refusal is not None, e.value.trailing_metadata()
    assert refusal.cause == daemon_pb2.Refusal.REJECTED and not refusal.retryable
    assert (refusal.phase, refusal.field, refusal.value) == (
        "default", "tool", listeners.tool_url)
    assert refusal.reason in e.value.details()
    # The message alone, without the details, says nothing typed.
    assert sf.Rejected("phase \"x\": tool \"y\" is required").field is None


def test_rejected_carries_phase_field_value_reason(client, sf, listeners):
    with pytest.raises(sf.Rejected) as e:
        client.start_rollout(rollout_id("rej"), network_access="model_only",
                             models=[listeners.model_url],
                             tools=[sf.Tool(listeners.tool_url, required=True, name="grader")])
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert (e.value.phase, e.value.field, e.value.value) == ("default", "tool", listeners.tool_url)
    assert "model_only allows only the model server" in e.value.reason
    assert not e.value.retryable
    assert not isinstance(e.value, grpc.RpcError)


def test_malformed_names_the_field(client, sf):
    with pytest.raises(sf.Malformed) as e:
        client.start_rollout(rollout_id("mal"), network_access="model_only",
                             models=["127.0.0.2:8000"])  # no scheme
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert (e.value.phase, e.value.field, e.value.value) == ("default", "model", "127.0.0.2:8000")
    with pytest.raises(sf.Malformed) as e:
        client.start_rollout(".bad id", network_access="inherit")
    assert e.value.field == "rollout_id"


def test_unavailable_from_the_daemon_suggests_a_backoff(client, sf):
    # The daemon's resolver is a loopback port where nothing answers: a
    # name fails retryably, before anything is created.
    with pytest.raises(sf.Unavailable) as e:
        client.start_rollout(rollout_id("unav"), network_access="model_only",
                             models=["http://model.sandfence.test:8000/v1"])
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert e.value.retryable and e.value.backoff > 0
    assert "model.sandfence.test" in e.value.message


def test_unavailable_when_no_daemon_answers(sf, tmp_path):
    c = sf.Client(str(tmp_path / "nobody.sock"), connect_timeout=0.3)
    with pytest.raises(sf.Unavailable) as e:
        c.health()
    assert e.value.backoff > 0 and "nobody.sock" in e.value.message
    c.close()


def test_not_found(client, sf):
    with pytest.raises(sf.NotFound):
        client.rollout(rollout_id("none"))
    from sandfence.v1 import daemon_pb2
    with pytest.raises(sf.NotFound) as e:  # straight from the daemon
        client._call(client._stub.SetPhase,
                     daemon_pb2.SetPhaseRequest(rollout_id=rollout_id("none"), phase="x"))
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_already_exists(client, sf):
    rid = rollout_id("dup")
    with client.start_rollout(rid, network_access="inherit") as r:
        # The same request again is the same rollout (idempotent) ...
        assert client.start_rollout(rid, network_access="inherit").cgroup_path == r.cgroup_path
        # ... another one with its id is a mistake.
        with pytest.raises(sf.AlreadyExists):
            client.start_rollout(rid, network_access="inherit", models=["http://127.0.0.2/"])
    with pytest.raises(sf.AlreadyExists):  # ids are never reused
        client.start_rollout(rid, network_access="inherit")


def test_permission_denied_inside_a_sandbox(client, sf, daemon):
    # Guard off, so the call reaches the daemon (a guard would kill the
    # caller first); the daemon refuses it by the caller's cgroup.
    policy = 'name: "p" phase { name: "a" network_access: INHERIT guard { mode: OFF } }'
    import sandfence
    pkg = sandfence.__path__[0].rsplit("/", 1)[0]
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import sandfence\n"
            "try:\n    sandfence.Client(sys.argv[2], connect_timeout=5).health()\n"
            "except sandfence.PermissionDenied:\n    sys.exit(42)\n")
    with client.start_rollout(rollout_id("perm"), policy=policy) as r:
        p = r.run(["/usr/bin/python3", "-c", code, pkg, daemon.socket])
    assert p.returncode == 42


def test_an_unknown_request_field_is_malformed_before_any_call(client, sf):
    with pytest.raises(sf.Malformed) as e:
        client.start_rollout(rollout_id("field"), network_access="inherit", no_such_field=1)
    assert e.value.field == "no_such_field" and e.value.code is None


def test_refusals_are_value_errors_and_nothing_else_is(sf):
    # Gym's seed refuses with AgentSeedRejectedError, a ValueError: code
    # written for it catches sandfence's refusals unchanged.
    for cls in (sf.Rejected, sf.Malformed):
        assert issubclass(cls, ValueError) and issubclass(cls, sf.SandfenceError)
        assert not cls("x").retryable
    for cls in (sf.Unavailable, sf.NotFound, sf.InternalError):
        assert not issubclass(cls, ValueError)
    try:
        raise sf.Rejected('phase "agent": tool "t" (http://127.0.0.5:9) is required',
                          phase="agent", field="tool", value="http://127.0.0.5:9")
    except ValueError as e:
        assert e.field == "tool"


def test_a_failed_end_is_noted_on_the_error_that_ended_the_block(sf):
    from sandfence.client import Rollout
    from sandfence.v1 import daemon_pb2

    class EndFails:
        _stub = type("Stub", (), {"EndRollout": None})()

        def _call(self, *_):
            raise sf.Unavailable("no daemon answers", transport=True)

    r = Rollout(EndFails(), daemon_pb2.StartRolloutResponse(rollout_id="r-1"), None)
    with pytest.raises(KeyError) as e:
        with r:
            raise KeyError("the agent's own error")
    assert e.value.__notes__ == [
        "sandfence: ending rollout r-1 failed too: no daemon answers"]
