"""The daemon dies in the middle of a rollout (SIGKILL) and comes back: the
kernel keeps enforcing meanwhile (pinned), and the same Client carries on
once the daemon is back (the channel reconnects)."""

import signal
import time

import pytest

from conftest import probe_argv, rollout_id


def test_restart_mid_rollout(sf, own_daemon, listeners):
    client = sf.Client(own_daemon.socket, connect_timeout=15)
    client.health()
    rid = rollout_id("restart")
    r = client.start_rollout(rid, policy="""
        name: "p"
        phase { name: "agent"  network_access: MODEL_ONLY dns { mode: NONE } }
        phase { name: "verify" network_access: MODEL_AND_TOOLS dns { mode: NONE } }
        """, models=[listeners.model_url], tools=[listeners.tool_url])
    try:
        assert r.run(probe_argv("127.0.0.4", listeners.forbidden)).returncode == 1
        # The journal is written every 200 ms and a crash loses at most that
        # (README): let the first denial reach it before the kill.
        time.sleep(0.5)
        own_daemon.stop(signal.SIGKILL)
        # No daemon: enforcement held by the pinned programs.
        assert r.run(probe_argv("127.0.0.4", listeners.forbidden)).returncode == 1
        assert r.run(probe_argv("127.0.0.2", listeners.model)).returncode == 0
        impatient = sf.Client(own_daemon.socket, connect_timeout=0.3)
        with pytest.raises(sf.Unavailable):
            impatient.rollouts()
        impatient.close()
        own_daemon.start()
        # The same client, the same rollout: adopted by the new daemon.
        summary = {s.rollout_id: s for s in client.rollouts()}[rid]
        assert summary.adopted and summary.phase == "agent"
        r.set_phase("verify")
        assert r.run(probe_argv("127.0.0.3", listeners.tool)).returncode == 0
        assert r.run(probe_argv("127.0.0.4", listeners.forbidden)).returncode == 1
    finally:
        record = r.end()
        client.close()
    assert [s.name for s in record.timeline][-1] == "verify"
    from sandfence.v1 import record_pb2
    denied = [a for a in record.net_attempt
              if a.verdict == record_pb2.VERDICT_DENY and a.address == "127.0.0.4"]
    # Denied before, during (read from the dead daemon's ring by its
    # successor) and after the restart.
    assert sum(a.count for a in denied) == 3, record
    assert record.loss.events_recorded == record.loss.kernel_denied + record.loss.kernel_allowed
    assert record.lossy  # a handover is always marked
    assert record_pb2.WARNING_HANDOVER in [w.kind for w in record.warning]
