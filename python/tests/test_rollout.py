"""A rollout through the package against a real daemon: phases, a denied
and an allowed connection from rollout.run, the record, watch, listing."""

import os
import subprocess
import threading

import pytest

from conftest import cgroup2_mount, probe_argv, rollout_id

PHASED = """
name: "phased"
phase { name: "setup"  network_access: INHERIT }
phase { name: "agent"  network_access: MODEL_ONLY dns { mode: NONE } }
phase { name: "verify" network_access: MODEL_AND_TOOLS dns { mode: NONE } }
"""


def test_health_and_listing(client):
    h = client.health()
    assert h.egress == "cgroup-bpf" and h.version and h.pin_dir
    assert isinstance(client.rollouts(), list)


def test_phases_connections_and_the_record(client, sf, listeners):
    rid = rollout_id("phases")
    with client.start_rollout(rid, policy=PHASED, models=[listeners.model_url],
                              tools=[listeners.tool_url]) as r:
        assert r.phase == "setup" and os.path.isdir(r.cgroup_path)
        listed = {s.rollout_id: s for s in client.rollouts()}
        assert listed[rid].phase == "setup"
        # setup (inherit): anything on loopback.
        assert r.run(probe_argv("127.0.0.4", listeners.forbidden)).returncode == 0
        r.set_phase("agent")
        assert r.phase == "agent"
        assert client.rollout(rid).phase == "agent"
        # agent (model_only): the model, not the tool, not the forbidden host.
        model = r.run(probe_argv("127.0.0.2", listeners.model), capture_output=True, text=True)
        assert model.returncode == 0, model.stdout
        denied = r.run(probe_argv("127.0.0.4", listeners.forbidden),
                       capture_output=True, text=True)
        assert (denied.returncode, denied.stdout.strip()) == (1, "EPERM")
        assert r.run(probe_argv("127.0.0.3", listeners.tool)).returncode == 1
        r.set_phase("verify")
        # verify (model_and_tools): the tool now.
        assert r.run(probe_argv("127.0.0.3", listeners.tool)).returncode == 0
        so_far = r.record(as_dict=True)
        assert so_far["rollout_id"] == rid
    record = r.final_record
    assert record is not None and record.complete and not record.lossy
    assert record.rollout_id == rid and record.policy.name == "phased"
    assert record.enforcement.egress == "cgroup-bpf"
    assert record.sandbox.cgroup_path == r.cgroup_path
    assert [s.name for s in record.timeline] == ["setup", "agent", "verify"]
    from sandfence.v1 import record_pb2
    attempts = {(a.phase, a.address, a.port, a.verdict) for a in record.net_attempt}
    assert ("agent", "127.0.0.4", listeners.forbidden, record_pb2.VERDICT_DENY) in attempts
    assert ("agent", "127.0.0.3", listeners.tool, record_pb2.VERDICT_DENY) in attempts
    assert ("agent", "127.0.0.2", listeners.model, record_pb2.VERDICT_ALLOW) in attempts
    assert not any(a.verdict == record_pb2.VERDICT_DENY and a.phase != "agent"
                   for a in record.net_attempt)
    # The created sandbox is gone with the rollout.
    assert not os.path.exists(r.cgroup_path)
    assert rid not in {s.rollout_id for s in client.rollouts()}


def test_popen_is_in_the_sandbox_before_it_runs(client, listeners):
    with client.start_rollout(rollout_id("popen"), network_access="model_only",
                              models=[listeners.model_url]) as r:
        p = r.popen(["/bin/cat", "/proc/self/cgroup"], stdout=subprocess.PIPE, text=True)
        out, _ = p.communicate(timeout=10)
        assert p.returncode == 0
        v2 = [line[3:] for line in out.splitlines() if line.startswith("0::")]
        assert v2 == [os.path.relpath(r.cgroup_path, cgroup2_mount()).join(["/", ""])], out

def test_a_callers_preexec_fn_still_runs(client, tmp_path):
    flag = tmp_path / "preexec"
    with client.start_rollout(rollout_id("pre"), network_access="inherit") as r:
        p = r.run(["/bin/true"], preexec_fn=lambda: open(flag, "w").close())
    assert p.returncode == 0 and flag.exists()


def test_run_as_another_user_joins_first(client, listeners):
    with client.start_rollout(rollout_id("user"), network_access="model_only",
                              models=[listeners.model_url]) as r:
        p = r.run(["/bin/sh", "-c", "id -u; id -g; cat /proc/self/cgroup"], user=65534,
                  group=65534, extra_groups=[], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert lines[:2] == ["65534", "65534"]
        assert "0::/" + os.path.relpath(r.cgroup_path, cgroup2_mount()) in lines
        # and still judged: the forbidden host is refused
        assert r.run(probe_argv("127.0.0.4", listeners.forbidden), user=65534).returncode == 1


def test_a_failed_join_never_runs_the_command(client, sf, tmp_path):
    with client.start_rollout(rollout_id("join"), network_access="inherit") as r:
        r.cgroup_path = str(tmp_path)  # no cgroup.procs there
        flag = tmp_path / "ran"
        with pytest.raises(OSError):
            r.run(["/bin/touch", str(flag)])
        assert not flag.exists()


def test_watch_yields_the_decisions(client, sf, listeners):
    from sandfence.v1 import record_pb2
    with client.start_rollout(rollout_id("watch"), network_access="model_only",
                              models=[listeners.model_url]) as r:
        events = r.watch()
        assert r.run(probe_argv("127.0.0.4", listeners.forbidden)).returncode == 1
        seen = None
        # The stream ends with the rollout; a missing event must not hang
        # the test: give up after 15 s.
        timer = threading.Timer(15, events.cancel)
        timer.start()
        for e in events:
            if e.address == "127.0.0.4" and e.port == listeners.forbidden:
                seen = e
                break
        timer.cancel()
        events.cancel()
    assert seen is not None and seen.verdict == record_pb2.VERDICT_DENY
    assert seen.rollout_id == r.id and seen.protocol == "tcp"


def test_own_netns_run_joins_it(client, sf, netns):
    net = sf.restrict_network("model_only", "http://192.0.2.1:8000/v1",
                              own_netns=True, netns_path=netns.path, client=client)
    with client.start_rollout(rollout_id("netns"), **net) as r:
        p = r.run(["/usr/bin/readlink", "/proc/self/ns/net"], capture_output=True, text=True)
        assert p.returncode == 0
        assert p.stdout.strip() == os.readlink(netns.path)
        assert p.stdout.strip() != os.readlink("/proc/self/ns/net")
