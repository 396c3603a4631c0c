#!/usr/bin/python3
"""NeMo Gym's sandbox-network helper, answered by sandfence: a drop-in.

Gym's seed turns a rollout's `network_access`, the model's base URL and
the tools' URLs into an egress policy, and refuses an unenforceable seed
with a ValueError (HTTP 422) before any sandbox exists. The same call here:

    from sandfence import restrict_sandbox_network
    net = restrict_sandbox_network(network_access, model_base_url,
                                   tool_urls, required_tool_urls, client=client)
    rollout = client.start_rollout(rollout_id, **net)

The daemon answers the seed (a dry run, CheckRollout): the refusal is its
own, with the phase, field and value it names.

`sandfence.Rejected` and `sandfence.Malformed` are ValueErrors (never
retried); `sandfence.Unavailable` is retryable and carries a backoff.

    ./generate.sh                       # once, unless the package is installed
    sudo ./gym_helper.py --access model_and_tools \\
        --model http://127.0.0.2:8000/v1 --tool http://127.0.0.3:8001/ \\
        -- curl -s http://127.0.0.3:8001/

Prints the command's exit status and the rollout's verdicts (allowed and
denied destinations) as JSON.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("SANDFENCE_PY_GEN", os.path.join(HERE, "gen")))

import sandfence  # noqa: E402
from sandfence.v1 import record_pb2  # noqa: E402


def start(client, rollout_id, network_access, model_base_url, tool_urls=(),
          required_tool_urls=(), attempts=5):
    """Gym's sequence: the seed's policy checked by the daemon (a refusal
    is final), then the sandbox; an unavailable daemon is retried with its
    backoff."""
    for attempt in range(attempts):
        try:
            net = sandfence.restrict_sandbox_network(
                network_access, model_base_url, tool_urls, required_tool_urls,
                client=client)
            return client.start_rollout(rollout_id, **net)
        except sandfence.Unavailable as e:
            if attempt + 1 == attempts:
                raise
            time.sleep(e.backoff or sandfence.Unavailable.next_backoff(attempt))
    raise AssertionError("unreachable")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", default=sandfence.DEFAULT_SOCKET)
    p.add_argument("--rollout", default="gym-%d" % os.getpid())
    p.add_argument("--access", default="model_only",
                   choices=["inherit", "model_only", "model_and_tools"])
    p.add_argument("--model", help="the model server's base URL")
    p.add_argument("--tool", action="append", default=[], help="optional tool URL")
    p.add_argument("--required-tool", action="append", default=[],
                   help="required tool URL")
    p.add_argument("command", nargs="*", help="what to run in the sandbox")
    args = p.parse_args(argv)

    client = sandfence.Client(args.socket)
    try:
        rollout = start(client, args.rollout, args.access, args.model,
                        args.tool, args.required_tool)
    except ValueError as e:  # Gym answers 422: the seed is refused, once
        print("refused: %s" % e, file=sys.stderr)
        return 78
    except sandfence.Unavailable as e:
        print("unavailable, retry later: %s" % e, file=sys.stderr)
        return 75
    exit_code = None
    with rollout:
        if args.command:
            exit_code = rollout.run(args.command).returncode
    out = {"rollout": rollout.id, "exit": exit_code, "allowed": [], "denied": []}
    for a in rollout.final_record.net_attempt:
        key = "denied" if "DENY" in record_pb2.Verdict.Name(a.verdict) else "allowed"
        out[key].append("%s %s:%d" % (a.protocol, a.address, a.port))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
