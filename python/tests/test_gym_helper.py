"""restrict_sandbox_network: NeMo Gym's helper call, answered by the same
rules as restrict_network (whose rows test_restrict_network.py checks
against the real daemon). No daemon here: what the call shape adds."""

import pytest

MODEL = "http://127.0.0.2:8000/v1"
TOOL = "http://127.0.0.3:8001/"
REQUIRED = "http://127.0.0.3:8002/"


def urls(net):
    return [(t["url"] if isinstance(t, dict) else t.url,
             t["required"] if isinstance(t, dict) else t.required) for t in net["tools"]]


def test_inherit_takes_everything(sf):
    net = sf.restrict_sandbox_network("inherit", None)
    assert net["network_access"] == "inherit" and net["models"] == []


# Optional grants go to the daemon as optional: it drops what the mode
# cannot honour and says so in the record (its rows are in
# test_restrict_network.py); required ones it cannot honour are refused here.
def test_model_only_passes_optional_tools_and_refuses_required_ones(sf):
    net = sf.restrict_sandbox_network("model_only", MODEL, tool_urls=[TOOL])
    assert net["models"] == [MODEL]
    assert urls(net) == [(TOOL, False)]
    with pytest.raises(ValueError) as e:
        sf.restrict_sandbox_network("model_only", MODEL, required_tool_urls=[REQUIRED])
    assert isinstance(e.value, sf.Rejected) and not e.value.retryable
    assert (e.value.field, e.value.value) == ("tool", REQUIRED)


def test_model_and_tools_keeps_both_kinds_and_refuses_an_unreachable_required_one(sf):
    net = sf.restrict_sandbox_network(
        "model_and_tools", MODEL, tool_urls=[TOOL, "http://0.0.0.0:8003/"],
        required_tool_urls=[REQUIRED])
    assert urls(net) == [(TOOL, False), ("http://0.0.0.0:8003/", False),
                         (REQUIRED, True)]
    with pytest.raises(sf.Rejected):
        sf.restrict_sandbox_network("model_and_tools", MODEL,
                                    required_tool_urls=["http://0.0.0.0:8003/"])


def test_a_restricted_mode_without_a_model_is_refused(sf):
    with pytest.raises(ValueError):
        sf.restrict_sandbox_network("model_only", None)
    with pytest.raises(sf.Malformed):
        sf.restrict_sandbox_network("model_only", "127.0.0.2:8000")  # no scheme
