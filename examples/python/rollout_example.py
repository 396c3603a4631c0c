#!/usr/bin/python3
"""What a rollout framework does with the sandfence daemon, through the
`sandfence` package (python/).

Starts a rollout in a sandbox the daemon creates, in phase "setup"
(model_only), switches to "agent" (model and tools), runs a command inside
the sandbox, switches to "verify" (model_only again), ends the rollout and
prints its record.

    ./generate.sh                       # once, unless the package is installed
    sudo ./rollout_example.py --model http://127.0.0.2:8000/v1 \\
        --tool http://127.0.0.3:8001 -- curl -s http://127.0.0.3:8001/

Needs root: the daemon's socket is root-only, and the command is moved into
the sandbox cgroup.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The package as generate.sh built it; an installed one works as well.
sys.path.insert(0, os.environ.get("SANDFENCE_PY_GEN", os.path.join(HERE, "gen")))

import sandfence  # noqa: E402
from google.protobuf import json_format  # noqa: E402

POLICY = """
name: "example"
phase { name: "setup"  network_access: MODEL_ONLY      dns { mode: NONE } }
phase { name: "agent"  network_access: MODEL_AND_TOOLS dns { mode: NONE } }
phase { name: "verify" network_access: MODEL_ONLY      dns { mode: NONE } }
"""


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", default=sandfence.DEFAULT_SOCKET)
    p.add_argument("--rollout", default="example-%d" % os.getpid())
    p.add_argument("--model", required=True, help="the model server's URL")
    p.add_argument("--tool", action="append", default=[],
                   help="an optional tool grant (URL), repeatable")
    p.add_argument("command", nargs="+", help="what to run in the agent phase")
    args = p.parse_args()

    client = sandfence.Client(args.socket)
    try:
        rollout = client.start_rollout(args.rollout, policy=POLICY,
                                       initial_phase="setup", models=[args.model],
                                       tools=[sandfence.Tool(u) for u in args.tool])
    except sandfence.Rejected as e:  # never retry
        print("rejected: %s" % e, file=sys.stderr)
        return 1
    except sandfence.Malformed as e:  # fix the request
        print("malformed: %s" % e, file=sys.stderr)
        return 1
    except sandfence.Unavailable as e:  # retry after e.backoff seconds
        print("unavailable (retry in %gs): %s" % (e.backoff, e), file=sys.stderr)
        return 1
    with rollout:
        print("started %s in %s, phase %s" % (rollout.id, rollout.cgroup_path,
                                             rollout.phase))
        for phase in rollout.response.phase_policy:
            print("  %-7s %d rules, %d dropped grants" % (phase.name, len(phase.rule),
                                                        len(phase.dropped)))
        rollout.set_phase("agent")
        status = rollout.run(args.command).returncode
        print("command exited with %d" % status)
        rollout.set_phase("verify")
    print(json.dumps(json_format.MessageToDict(rollout.final_record,
                                               preserving_proto_field_name=True),
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
