"""sandfence: a client for the sandfence daemon, for rollout frameworks.

    import sandfence
    client = sandfence.Client()                     # /run/sandfence/sandfence.sock
    net = sandfence.restrict_network("model_only", "http://127.0.0.2:8000/v1",
                                     client=client)  # the daemon's dry run
    with client.start_rollout("r-1", **net) as rollout:
        rollout.run(["curl", "-s", "http://127.0.0.2:8000/v1/models"])
    print(rollout.final_record)

See python/README.md.
"""

from sandfence.client import DEFAULT_SOCKET, Client, EventStream, Rollout
from sandfence.errors import (AlreadyExists, InternalError, Malformed, NotFound,
                              PermissionDenied, Rejected, SandfenceError, Unavailable)
from sandfence.network import Tool, restrict_network, restrict_sandbox_network

__all__ = [
    "Client", "Rollout", "EventStream", "DEFAULT_SOCKET", "Tool", "restrict_network",
    "restrict_sandbox_network",
    "SandfenceError", "Rejected", "Malformed", "Unavailable", "NotFound",
    "AlreadyExists", "PermissionDenied", "InternalError",
]
