"""restrict_network against the real daemon, row by row: every refusal
cause and every accepted combination. The helper asks the daemon's dry run
(CheckRollout); for each row its answer (accepted / Rejected / Malformed,
and the phase, field and value the Refusal names) must be StartRollout's
answer to the same request, and the dry run must leave nothing."""

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import pytest

from conftest import rollout_id

# Port numbers in the rows are placeholders: nothing connects in this test
# (192.0.2.1 is TEST-NET-1, only ever written into a rule).
MODEL = "http://127.0.0.2:8000/v1"
TOOL = "http://127.0.0.3:8001/"
FAR_MODEL = "http://192.0.2.1:8000/v1"  # reachable from a private netns by rule


@dataclass
class Row:
    case: str
    access: object
    model: object = None
    tools: List[Tuple[str, bool]] = field(default_factory=list)
    borrowed: bool = False
    own_netns: bool = False
    netns: bool = False  # give netns_path (a namespace the test makes)
    expect: Optional[str] = None  # None: accepted; "Rejected"; "Malformed"


ROWS = [
    # Accepted.
    Row("inherit with nothing", "inherit"),
    Row("inherit does not judge the model's reach", "inherit", "http://0.0.0.0:80/"),
    Row("inherit keeps a required tool, borrowed", "inherit", MODEL, [(TOOL, True)], borrowed=True),
    Row("inherit with its own netns needs no netns_path", "inherit", MODEL, own_netns=True),
    Row("model_only with the model", "model_only", MODEL),
    Row("model_only drops an optional tool", "model_only", MODEL, [(TOOL, False)]),
    Row("model_only, model on localhost", "model_only", "http://localhost:8000/"),
    Row("model_only, IPv6 loopback model", "model_only", "http://[::1]:8000/"),
    Row("model_only in its own netns, model by rule", "model_only", FAR_MODEL,
        own_netns=True, netns=True),
    Row("model_and_tools keeps a required tool", "model_and_tools", MODEL, [(TOOL, True)]),
    Row("model_and_tools drops an unreachable optional tool", "model_and_tools", MODEL,
        [("http://0.0.0.0:8001/", False)]),
    Row("model_and_tools drops a loopback optional tool in its own netns", "model_and_tools",
        FAR_MODEL, [(TOOL, False)], own_netns=True, netns=True),
    Row("model_and_tools with a wildcard tool", "model_and_tools", MODEL,
        [("https://*.tools.sandfence.test/", True)]),
    Row("MODEL_ONLY in capitals", "MODEL_ONLY", MODEL),
    # Rejected: never retry.
    Row("borrowed model_only", "model_only", MODEL, borrowed=True, expect="Rejected"),
    Row("borrowed model_and_tools", "model_and_tools", MODEL, borrowed=True, expect="Rejected"),
    Row("model_only without a model", "model_only", expect="Rejected"),
    Row("model_and_tools without a model", "model_and_tools", None, [(TOOL, True)],
        expect="Rejected"),
    Row("model_only with a required tool", "model_only", MODEL, [(TOOL, True)],
        expect="Rejected"),
    Row("model at 0.0.0.0", "model_only", "http://0.0.0.0:8000/", expect="Rejected"),
    Row("model at ::", "model_and_tools", "http://[::]:8000/", expect="Rejected"),
    Row("model at ::ffff:0.0.0.0", "model_only", "http://[::ffff:0.0.0.0]:8000/",
        expect="Rejected"),
    Row("loopback model from its own netns", "model_only", MODEL, own_netns=True, netns=True,
        expect="Rejected"),
    Row("IPv6 loopback model from its own netns", "model_and_tools", "http://[::1]:8000/",
        own_netns=True, netns=True, expect="Rejected"),
    Row("localhost model from its own netns", "model_only", "http://localhost:8000/",
        own_netns=True, netns=True, expect="Rejected"),
    Row("required tool at 0.0.0.0", "model_and_tools", MODEL, [("http://0.0.0.0:8001/", True)],
        expect="Rejected"),
    Row("required loopback tool from its own netns", "model_and_tools", FAR_MODEL,
        [(TOOL, True)], own_netns=True, netns=True, expect="Rejected"),
    Row("own netns without netns_path (DNS filtered)", "model_only", FAR_MODEL,
        own_netns=True, expect="Rejected"),
    # Malformed: fix the request.
    Row("model URL without a scheme", "model_only", "127.0.0.2:8000", expect="Malformed"),
    Row("model URL with another scheme", "model_only", "ftp://127.0.0.2/", expect="Malformed"),
    Row("model URL with port 0", "model_only", "http://127.0.0.2:0/", expect="Malformed"),
    Row("model URL with a wildcard", "model_only", "http://*.model.test/", expect="Malformed"),
    Row("unbracketed IPv6 model", "model_only", "http://2001:db8::1:80/", expect="Malformed"),
    Row("malformed URL even under inherit", "inherit", "http://127.0.0.2:99999/",
        expect="Malformed"),
    Row("wildcard tool under inherit", "inherit", None, [("https://*.tools.test/", False)],
        expect="Malformed"),
    Row("netns_path without own_netns", "inherit", MODEL, netns=True, expect="Malformed"),
    Row("bad tool URL", "model_and_tools", MODEL, [("http://[::1/", True)], expect="Malformed"),
]


def _outcome(fn, sf):
    try:
        fn()
        return (None, None, None, None)
    except (sf.Rejected, sf.Malformed) as e:
        return (type(e).__name__, e.phase, e.field, e.value)


@pytest.fixture
def owner(client):
    """An open rollout whose sandbox the borrowed rows borrow."""
    r = client.start_rollout(rollout_id("owner"), network_access="inherit")
    yield r
    r.end()


def test_restrict_network_matches_the_daemon_row_by_row(client, sf, owner, netns):
    mismatches = []
    for row in ROWS:
        tools = [sf.Tool(u, required=req) for u, req in row.tools]
        args = dict(tool_grants=tools, borrowed=row.borrowed, own_netns=row.own_netns,
                    netns_path=netns.path if row.netns else None)
        kwargs = {}

        def helper():
            kwargs.update(sf.restrict_network(row.access, row.model, client=client,
                                              **args))

        mine = _outcome(helper, sf)
        # The daemon gets the same request, built without the helper.
        models = [] if row.model is None else [row.model]

        def daemon():
            r = client.start_rollout(
                rollout_id("table"), network_access=row.access, models=models, tools=tools,
                borrowed=row.borrowed, own_netns=row.own_netns,
                netns_path=args["netns_path"],
                cgroup_path=owner.cgroup_path if row.borrowed else None)
            r.end()

        theirs = _outcome(daemon, sf)
        if mine[0] != theirs[0]:
            mismatches.append(f"{row.case}: helper {mine}, daemon {theirs}")
        elif theirs[0] is not None and theirs[2] is None:
            mismatches.append(f"{row.case}: the daemon's Refusal names no field: {theirs}")
        elif mine[1:] != theirs[1:]:
            mismatches.append(f"{row.case}: helper names {mine[1:]}, daemon {theirs[1:]}")
        if mine[0] != row.expect:
            mismatches.append(f"{row.case}: expected {row.expect}, helper said {mine}")
        if mine[0] is None:
            assert kwargs["network_access"] == row.access.lower()
    assert not mismatches, "\n".join(mismatches)


def test_every_cause_has_a_row():
    # The refusal causes the daemon knows for this contract, each covered.
    cases = " ".join(r.case for r in ROWS if r.expect == "Rejected")
    for cause in ("borrowed", "without a model", "required tool", "0.0.0.0", "::",
                  "own netns", "netns_path"):
        assert cause in cases, cause


def test_unknown_mode_is_malformed_on_both_sides(client, sf):
    with pytest.raises(sf.Malformed) as mine:
        sf.restrict_network("everything", MODEL, client=client)
    assert mine.value.field == "network_access"
    from sandfence.v1 import daemon_pb2
    req = daemon_pb2.StartRolloutRequest(rollout_id=rollout_id("unset"))
    req.sandbox.create = True
    req.network_access = 0  # unset: what an unknown name would become
    with pytest.raises(sf.Malformed) as theirs:
        client._call(client._stub.StartRollout, req)
    assert theirs.value.field == "network_access"


def test_nothing_is_left_by_refusals(client):
    # Every refused row above created nothing: only rollouts that a test
    # still holds are open.
    assert not [s.rollout_id for s in client.rollouts() if s.rollout_id.startswith("table-")]
