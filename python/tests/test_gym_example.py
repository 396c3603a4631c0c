"""examples/python/gym_helper.py against the real daemon: Gym's helper call
drives a rollout end to end, and a seed it cannot enforce is refused once,
as a ValueError, before any sandbox exists."""

import importlib.util
import json
import os

from conftest import probe_argv, rollout_id

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python",
                       "gym_helper.py")


def load_example():
    spec = importlib.util.spec_from_file_location("gym_helper", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_runs_a_model_and_tools_rollout(daemon, client, listeners, capsys):
    example = load_example()
    rid = rollout_id("gym")
    # One allowed connect (the tool), one denied (a host no grant names).
    script = ("import subprocess, sys\n"
              f"a = subprocess.run({probe_argv('127.0.0.3', listeners.tool)!r})\n"
              f"b = subprocess.run({probe_argv('127.0.0.4', listeners.forbidden)!r})\n"
              "sys.exit(0 if (a.returncode, b.returncode) == (0, 1) else 3)\n")
    code = example.main(["--socket", daemon.socket, "--rollout", rid,
                         "--access", "model_and_tools", "--model", listeners.model_url,
                         "--required-tool", listeners.tool_url,
                         "--", "/usr/bin/python3", "-c", script])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rollout"] == rid
    assert out["exit"] == 0, "the tool was not reached, or the other host was"
    assert f"tcp 127.0.0.4:{listeners.forbidden}" in out["denied"]


def test_the_example_refuses_an_unenforceable_seed_once(daemon, client, listeners, capsys):
    example = load_example()
    rid = rollout_id("gym-rej")
    code = example.main(["--socket", daemon.socket, "--rollout", rid,
                         "--access", "model_only", "--model", listeners.model_url,
                         "--required-tool", listeners.tool_url])
    assert code == 78
    assert "required" in capsys.readouterr().err
    assert rid not in [r.rollout_id for r in client.rollouts()]
