#!/usr/bin/python3
"""What a rollout framework does with the sandfence daemon.

Starts a rollout in a sandbox the daemon creates, in phase "setup"
(model_only), switches to "agent" (model and tools), runs a command inside
the sandbox, switches to "verify" (model_only again), ends the rollout and
prints its record.

    ./generate.sh                       # once: the stubs, into ./gen
    sudo ./rollout_example.py --model http://127.0.0.2:8000/v1 \
        --tool http://127.0.0.3:8001 -- curl -s http://127.0.0.3:8001/

Needs root: the daemon's socket is root-only, and the command is moved into
the sandbox cgroup.
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("SANDFENCE_PY_GEN", os.path.join(HERE, "gen")))

import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from sandfence.v1 import daemon_pb2, daemon_pb2_grpc  # noqa: E402

POLICY = """
name: "example"
phase { name: "setup"  network_access: MODEL_ONLY      dns { mode: NONE } }
phase { name: "agent"  network_access: MODEL_AND_TOOLS dns { mode: NONE } }
phase { name: "verify" network_access: MODEL_ONLY      dns { mode: NONE } }
"""


def run_in_sandbox(cgroup_path, argv):
    """Runs argv inside the sandbox: the child joins the cgroup before exec,
    so nothing of the command ever runs unenforced."""

    def join():
        with open(os.path.join(cgroup_path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    return subprocess.run(argv, preexec_fn=join, check=False).returncode


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", default="/run/sandfence/sandfence.sock")
    p.add_argument("--rollout", default="example-%d" % os.getpid())
    p.add_argument("--model", required=True, help="the model server's URL")
    p.add_argument("--tool", action="append", default=[],
                   help="an optional tool grant (URL), repeatable")
    p.add_argument("command", nargs="+", help="what to run in the agent phase")
    args = p.parse_args()

    channel = grpc.insecure_channel("unix:" + args.socket)
    api = daemon_pb2_grpc.SandfenceStub(channel)

    req = daemon_pb2.StartRolloutRequest(rollout_id=args.rollout,
                                         policy_text=POLICY,
                                         initial_phase="setup")
    req.sandbox.create = True
    req.endpoints.model.append(args.model)
    for url in args.tool:
        req.endpoints.tool.add(url=url, required=False)
    try:
        started = api.StartRollout(req)
    except grpc.RpcError as e:
        # FAILED_PRECONDITION: rejected, never retry; INVALID_ARGUMENT: fix
        # the request; UNAVAILABLE: retry later.
        print("refused (%s): %s" % (e.code().name, e.details()), file=sys.stderr)
        return 1
    print("started %s in %s, phase %s" % (started.rollout_id,
                                         started.cgroup_path, started.phase))
    for phase in started.phase_policy:
        print("  %-7s %d rules, %d dropped grants" % (phase.name, len(phase.rule),
                                                    len(phase.dropped)))

    api.SetPhase(daemon_pb2.SetPhaseRequest(rollout_id=args.rollout, phase="agent"))
    status = run_in_sandbox(started.cgroup_path, args.command)
    print("command exited with %d" % status)
    api.SetPhase(daemon_pb2.SetPhaseRequest(rollout_id=args.rollout, phase="verify"))

    ended = api.EndRollout(daemon_pb2.EndRolloutRequest(rollout_id=args.rollout))
    print(json_format.MessageToJson(ended.record, preserving_proto_field_name=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
