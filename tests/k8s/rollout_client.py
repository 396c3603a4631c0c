#!/usr/bin/env python3
"""A minimal rollout framework for image_test.sh: talks to a containerized
daemon over its socket.

usage: rollout_client.py GEN_DIR SOCKET start ROLLOUT MODEL_URL   (prints the cgroup)
       rollout_client.py GEN_DIR SOCKET end ROLLOUT               (prints complete/lossy)
"""
import sys

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
from sandfence.v1 import daemon_pb2, daemon_pb2_grpc  # noqa: E402

POLICY = 'name: "k8s-image-test" phase { name: "agent" network_access: MODEL_ONLY dns { mode: NONE } }'


def main():
    sock, cmd, rollout = sys.argv[2], sys.argv[3], sys.argv[4]
    api = daemon_pb2_grpc.SandfenceStub(grpc.insecure_channel("unix:" + sock))
    try:
        if cmd == "start":
            req = daemon_pb2.StartRolloutRequest(rollout_id=rollout, policy_text=POLICY)
            req.sandbox.create = True
            req.endpoints.model.append(sys.argv[5])
            print(api.StartRollout(req, timeout=60).cgroup_path)
        elif cmd == "end":
            rec = api.EndRollout(daemon_pb2.EndRolloutRequest(rollout_id=rollout), timeout=60).record
            print("complete" if rec.complete else "incomplete")
        else:
            print("unknown command " + cmd, file=sys.stderr)
            return 64
    except grpc.RpcError as e:
        print("%s: %s %s" % (cmd, e.code().name, e.details()), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
