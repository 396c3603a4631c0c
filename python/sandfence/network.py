"""The rollout framework's network contract as one helper.

`restrict_network(network_access, model_url, tool_grants, ...)` returns the
keyword arguments of `Client.start_rollout` for a one-phase policy, and
raises `Rejected` (never retry) for exactly the requests the daemon refuses,
before any sandbox exists: it asks the daemon (CheckRollout, a dry run of
StartRollout that creates nothing), so the answer is the daemon's own,
names resolved with its resolver. No rule of the compiler is copied here.
The refusal's phase, field, value and reason come from the daemon's typed
Refusal, not from its message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from sandfence.errors import Malformed

__all__ = ["Tool", "restrict_network", "restrict_sandbox_network", "ACCESS_MODES",
           "INLINE_PHASE", "network_request"]

ACCESS_MODES = ("inherit", "model_only", "model_and_tools")
# The daemon names the one phase of a `network_access` policy so.
INLINE_PHASE = "default"


@dataclass(frozen=True)
class Tool:
    """A tool grant: its URL pins host, port and protocol (TCP). A required
    grant that cannot be honoured is refused; an optional one is dropped.
    `any_port` opens every TCP port of the URL's host (Gym's seed's host
    rule), which the record and `check` show as wider."""

    url: str
    required: bool = False
    name: str = ""
    any_port: bool = False


ToolLike = Union[Tool, str, Dict[str, Any], Any]


def as_tool(t: ToolLike) -> Tool:
    """A Tool from a Tool, a URL (optional), a dict (url, required, name) or
    a ToolGrant message."""
    if isinstance(t, Tool):
        return t
    if isinstance(t, str):
        return Tool(t)
    if isinstance(t, dict):
        return Tool(t["url"], bool(t.get("required", False)), t.get("name", ""),
                    bool(t.get("any_port", False)))
    if hasattr(t, "url") and hasattr(t, "required"):
        return Tool(t.url, bool(t.required), getattr(t, "name", ""),
                    bool(getattr(t, "any_port", False)))
    raise TypeError(f"not a tool grant: {t!r}")


def access_name(network_access: Any) -> str:
    """'inherit' / 'model_only' / 'model_and_tools' from a name (any case)
    or the NetworkAccess enum value; Malformed otherwise."""
    if isinstance(network_access, str):
        name = network_access.strip().lower()
        if name in ACCESS_MODES:
            return name
    elif isinstance(network_access, int) and 1 <= network_access <= 3:
        return ACCESS_MODES[network_access - 1]
    raise Malformed(f"network_access {network_access!r} is unset or unknown; "
                    f"one of {', '.join(ACCESS_MODES)}",
                    field="network_access", value=str(network_access))


def network_request(network_access: Any,
                    model_url: Union[None, str, Sequence[str]] = None,
                    tool_grants: Iterable[ToolLike] = (),
                    borrowed: bool = False,
                    own_netns: bool = False,
                    netns_path: Optional[str] = None) -> Dict[str, Any]:
    """The keyword arguments of `Client.start_rollout` (and `check`) for
    this network contract, unchecked: only the mode's name is read here."""
    mode = access_name(network_access)
    if model_url is None:
        models: List[str] = []
    elif isinstance(model_url, str):
        models = [model_url]
    else:
        models = list(model_url)
    return {"network_access": mode, "models": models,
            "tools": [as_tool(t) for t in tool_grants], "borrowed": borrowed,
            "own_netns": own_netns, "netns_path": netns_path}


def restrict_network(network_access: Any,
                     model_url: Union[None, str, Sequence[str]] = None,
                     tool_grants: Iterable[ToolLike] = (),
                     borrowed: bool = False,
                     own_netns: bool = False,
                     netns_path: Optional[str] = None,
                     *, client: Any = None) -> Dict[str, Any]:
    """What to pass to `Client.start_rollout` for this network contract,
    once the daemon said it would start it.

    Args:
      network_access: "inherit", "model_only" or "model_and_tools".
      model_url: the model server's URL (or several); required unless inherit.
      tool_grants: `Tool`s, URLs (optional grants) or dicts
        `{"url", "required", "name", "any_port"}`.
      borrowed: the sandbox belongs to another owner (only inherit).
      own_netns: the sandbox has its own network namespace.
      netns_path: that namespace (`/proc/PID/ns/net`, `/run/netns/NAME`);
        needed with own_netns in a DNS-filtered mode (the filter listens
        there); processes started with `Rollout.run` join it.
      client: the `Client` that asks the daemon; default: a `Client()` on
        the default socket, for this call only.

    Returns: a dict with `network_access`, `models`, `tools`, `borrowed`,
      `own_netns` and `netns_path`, for `client.start_rollout(id, **it)`
      (add `cgroup_path=` for an existing sandbox).

    Raises:
      Rejected: the daemon refuses it (never retry); `phase`, `field`,
        `value` and `reason` say why, from the daemon's typed Refusal.
      Malformed: a URL or the mode does not parse.
      Unavailable: no daemon answered, or it could not decide now (a DNS
        timeout): retry after `backoff`.
    """
    kwargs = network_request(network_access, model_url, tool_grants, borrowed,
                             own_netns, netns_path)
    if client is not None:
        client.check(**kwargs)
        return kwargs
    from sandfence.client import Client  # here: client.py imports this module
    with Client() as own:
        own.check(**kwargs)
    return kwargs


def gym_grants(tool_urls: Iterable[str], required_tool_urls: Iterable[str],
               any_port: bool) -> List[Tool]:
    """Gym's two URL lists as tool grants: optional, then required."""
    grants = [Tool(u, required=False, any_port=any_port) for u in tool_urls]
    grants += [Tool(u, required=True, any_port=any_port) for u in required_tool_urls]
    return grants


def restrict_sandbox_network(network_access: Any,
                             model_base_url: Optional[str],
                             tool_urls: Iterable[str] = (),
                             required_tool_urls: Iterable[str] = (),
                             *, any_port: bool = False, client: Any = None,
                             **options: Any) -> Dict[str, Any]:
    """NeMo Gym's helper, by its call: `restrict_network` with optional
    grants from `tool_urls` and required ones from `required_tool_urls`.

    A required grant the mode cannot honour is refused here (`Rejected`, a
    `ValueError`, never retried), before any sandbox exists; an optional one
    is dropped by the daemon, and the record says so. By default each URL
    opens its own port only, which is stricter than Gym's seed; `any_port`
    opens every port of each tool's host, as the seed does, and the record
    says "any port" for those rules. `client` and `options` are
    `restrict_network`'s (`borrowed`, `own_netns`, `netns_path`); async
    code awaits `sandfence.aio.restrict_sandbox_network` instead.
    """
    return restrict_network(network_access, model_base_url,
                            gym_grants(tool_urls, required_tool_urls, any_port),
                            client=client, **options)
