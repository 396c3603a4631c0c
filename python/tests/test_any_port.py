"""`any_port`: Gym's seed opens every port of a tool's host; sandfence opens
the URL's port unless asked. Against the real daemon: without it, another
port of the tool's host is denied; with it, reached, and the record's rule
says "any port" (wider than the URL)."""

import socket

import pytest

from conftest import probe_argv, rollout_id


@pytest.fixture
def second_tool_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.3", 0))
    s.listen(8)
    yield s.getsockname()[1]
    s.close()


@pytest.mark.parametrize("any_port", [False, True])
def test_any_port_opens_the_tools_host(client, sf, listeners, second_tool_port, any_port):
    net = sf.restrict_sandbox_network("model_and_tools", listeners.model_url,
                                      tool_urls=[listeners.tool_url], any_port=any_port,
                                      client=client)
    with client.start_rollout(rollout_id("anyport"), **net) as r:
        assert r.run(probe_argv("127.0.0.3", listeners.tool)).returncode == 0
        other = r.run(probe_argv("127.0.0.3", second_tool_port),
                      capture_output=True, text=True)
        assert other.returncode == (0 if any_port else 1), other.stdout + other.stderr
        # Another host stays closed either way.
        assert r.run(probe_argv("127.0.0.4", listeners.forbidden)).returncode == 1
    rules = [rule for p in r.final_record.phase_policy for rule in p.rule
             if rule.destination == "127.0.0.3"]
    assert len(rules) == 1, rules
    if any_port:
        assert (rules[0].port_first, rules[0].port_last) == (1, 65535)
        assert "any port" in rules[0].origin
    else:
        assert rules[0].port_first == rules[0].port_last == listeners.tool
        assert "any port" not in rules[0].origin
