"""The rollout framework's network contract as one helper.

`restrict_network(network_access, model_url, tool_grants, ...)` returns the
keyword arguments of `Client.start_rollout` for a one-phase policy, and
raises `Rejected` (never retry) for exactly the requests the daemon refuses,
before any sandbox exists. It applies the daemon's own rules
(userspace/compile/compiler.cc, endpoint.cc; userspace/sandbox/sandbox.cc):

- `inherit` restricts nothing: accepted with any endpoints (URLs must
  still parse), borrowed or not.
- A borrowed sandbox keeps its owner's network: any other mode is refused.
- `model_only` and `model_and_tools` need a model URL.
- `model_only` refuses a *required* tool (optional ones are dropped).
- A model host the sandbox cannot reach is refused: the unspecified address
  (`0.0.0.0`, `::`, `::ffff:0.0.0.0`) always; loopback (`127.0.0.0/8`,
  `::1`, `localhost`) when the sandbox has its own network namespace.
- Under `model_and_tools` a required tool whose host cannot be reached is
  refused the same way (an optional one is dropped, not refused).
- A restricted phase filters DNS (the default), which the daemon serves in
  the sandbox's network namespace: `own_netns` without `netns_path` is
  refused.

Host names other than `localhost` are not resolved here: what they resolve
to is the daemon's to find out (with its resolver), and it refuses a name
that reaches nothing the same way, still before anything is created.
Malformed URLs raise `Malformed`, as the daemon would.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from sandfence.errors import Malformed, Rejected

__all__ = ["Tool", "restrict_network", "ACCESS_MODES", "INLINE_PHASE"]

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


# --- URLs, as userspace/compile/endpoint.cc parses them -----------------

@dataclass(frozen=True)
class _Host:
    name: str = ""  # a normalized DNS name, or "" for an address
    address: Optional[Union[ipaddress.IPv4Address, ipaddress.IPv6Address]] = None
    pattern: bool = False  # "*.suffix"


_LABEL = re.compile(r"^[a-z0-9_-]+$")


def _host_name(text: str) -> str:
    if not text:
        raise Malformed("the host is empty")
    if "*" in text:
        raise Malformed(f'host "{text}" has a wildcard where none is allowed')
    if text.endswith(".."):
        raise Malformed(f'host "{text}" ends with two dots (one is allowed)')
    name = text[:-1] if text.endswith(".") else text
    if not name:
        raise Malformed("the host is empty")
    name = name.lower()
    if not name.isascii() or name.startswith("xn--") or ".xn--" in name:
        return name  # IDN: the daemon's libidn2 judges it
    if len(name) > 253:
        raise Malformed(f'host "{text}" is longer than 253 characters')
    for label in name.split("."):
        if not label:
            raise Malformed(f'host "{text}" has an empty label ("..")')
        if len(label) > 63:
            raise Malformed(f'host "{text}": label "{label}" is longer than 63 characters')
        if not _LABEL.match(label):
            raise Malformed(f'host "{text}" contains a character not allowed in a host name')
        if label[0] == "-" or label[-1] == "-":
            raise Malformed(f'host "{text}": label "{label}" starts or ends with \'-\'')
    last = name.rsplit(".", 1)[-1]
    if last.isdigit() or re.fullmatch(r"0x[0-9a-f]*", last):
        raise Malformed(f'host "{text}" looks like an IPv4 address in a numeric '
                        "form that sandfence does not accept; write a.b.c.d")
    return name


def _parse_address(text: str):
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _unmapped(addr):
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def _host(text: str) -> _Host:
    inner, bracketed = text, False
    if inner.startswith("["):
        if not inner.endswith("]"):
            raise Malformed(f'host "{text}" is missing \']\'')
        inner, bracketed = inner[1:-1], True
    addr = _parse_address(inner)
    if addr is not None and "%" not in inner:
        if bracketed and addr.version == 4:
            raise Malformed(f'host "{text}": brackets are for IPv6 addresses')
        return _Host(address=_unmapped(addr))
    if bracketed or ":" in inner:
        raise Malformed(f'host "{text}" is not a valid IPv6 address')
    if inner.endswith(".") and not inner.endswith(".."):
        addr = _parse_address(inner[:-1])
        if addr is not None:
            return _Host(address=_unmapped(addr))
    return _Host(name=_host_name(inner))


def _parse_url(url: str, allow_pattern: bool) -> _Host:
    sep = url.find("://")
    if sep < 0:
        raise Malformed(f'"{url}" is not a URL; write http://HOST[:PORT][/PATH] or https://...')
    scheme = url[:sep].lower()
    if scheme not in ("http", "https"):
        raise Malformed(f'scheme "{scheme}" is not supported; endpoint URLs are '
                        "http:// or https://")
    rest = url[sep + 3:]
    authority = re.split(r"[/?#\\]", rest, maxsplit=1)[0]
    authority = authority[authority.rfind("@") + 1:]
    host_text, port_text, has_port = authority, "", False
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            raise Malformed(f'host in "{url}" is missing \']\'')
        host_text, after = authority[:close + 1], authority[close + 1:]
        if after:
            if after[0] != ":":
                raise Malformed(f'"{url}": expected \':\' after \']\'')
            has_port, port_text = True, after[1:]
    elif ":" in authority:
        if authority.count(":") > 1:
            raise Malformed(f'"{url}": an IPv6 address in a URL is written in '
                            "brackets, as in http://[2001:db8::1]:8000/")
        host_text, port_text = authority.split(":", 1)
        has_port = True
    if not host_text:
        raise Malformed(f'"{url}" has no host')
    if has_port and port_text:
        if not (len(port_text) <= 5 and port_text.isascii() and port_text.isdigit()
                and 1 <= int(port_text) <= 65535):
            raise Malformed(f'"{url}": port "{port_text}" is not in 1..65535')
    if host_text.startswith("*"):
        if not allow_pattern:
            raise Malformed(f'host "{host_text}" is a wildcard; this URL must name one host')
        if host_text in ("*", "*.") or "*" in host_text[2:] or not host_text.startswith("*."):
            raise Malformed(f'host "{host_text}" is not a valid wildcard ("*.example.com")')
        return _Host(name=_host_name(host_text[2:]), pattern=True)
    return _host(host_text)


def _unreachable(host: _Host, own_netns: bool) -> Optional[str]:
    """Why the sandbox can never reach `host`, or None (names other than
    localhost are the daemon's to resolve)."""
    if host.pattern:
        return None
    if host.address is not None:
        addrs = [host.address]
    elif host.name == "localhost" or host.name.endswith(".localhost"):
        addrs = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    else:
        return None
    reasons = []
    for a in addrs:
        if a.is_unspecified:
            reasons.append(f"{a} is the unspecified address: it names no server "
                           "(a connection to it reaches the local host)")
        elif own_netns and a.is_loopback:
            reasons.append(f"{a} is a loopback address, and a sandbox with its own "
                           "network namespace cannot reach the host's loopback")
        else:
            return None  # one reachable address is enough
    return reasons[0]


def restrict_network(network_access: Any,
                     model_url: Union[None, str, Sequence[str]] = None,
                     tool_grants: Iterable[ToolLike] = (),
                     borrowed: bool = False,
                     own_netns: bool = False,
                     netns_path: Optional[str] = None) -> Dict[str, Any]:
    """What to pass to `Client.start_rollout` for this network contract.

    Args:
      network_access: "inherit", "model_only" or "model_and_tools".
      model_url: the model server's URL (or several); required unless inherit.
      tool_grants: `Tool`s, URLs (optional grants) or dicts
        `{"url", "required", "name"}`.
      borrowed: the sandbox belongs to another owner (only inherit).
      own_netns: the sandbox has its own network namespace.
      netns_path: that namespace (`/proc/PID/ns/net`, `/run/netns/NAME`);
        needed with own_netns in a restricted mode (the DNS filter listens
        there); processes started with `Rollout.run` join it.

    Returns: a dict with `network_access`, `models`, `tools`, `borrowed`,
      `own_netns` and `netns_path`, for `client.start_rollout(id, **it)`
      (add `cgroup_path=` for an existing sandbox).

    Raises:
      Rejected: the daemon would refuse it (never retry); `phase`, `field`,
        `value` and `reason` say why, as the daemon's error would.
      Malformed: a URL or the mode does not parse.
    """
    mode = access_name(network_access)
    if model_url is None:
        models: List[str] = []
    elif isinstance(model_url, str):
        models = [model_url]
    else:
        models = list(model_url)
    tools = [as_tool(t) for t in tool_grants]
    label = f'phase "{INLINE_PHASE}"'
    restricted = mode != "inherit"

    def malformed(e: Malformed, field: str, value: str) -> Malformed:
        return Malformed(f'{label}: {field} "{value}": {e.message}',
                         phase=INLINE_PHASE, field=field, value=value, reason=e.message)

    # Everything parses first, whatever the mode (as the daemon does).
    model_hosts = []
    for url in models:
        try:
            model_hosts.append(_parse_url(url, allow_pattern=False))
        except Malformed as e:
            raise malformed(e, "model", url) from None
    tool_hosts = []
    for t in tools:
        try:
            h = _parse_url(t.url, allow_pattern=True)
        except Malformed as e:
            raise malformed(e, "tool", t.url) from None
        if h.pattern and not restricted:
            # inherit's DNS is the host's, and a wildcard needs the filter
            raise Malformed(f'{label}: tool "{t.url}": a wildcard needs dns '
                            "{ mode: FILTERED }", phase=INLINE_PHASE,
                            field="tool", value=t.url)
        tool_hosts.append(h)

    kwargs: Dict[str, Any] = {
        "network_access": mode, "models": models, "tools": tools,
        "borrowed": borrowed, "own_netns": own_netns, "netns_path": netns_path,
    }
    if netns_path and not own_netns:
        raise Malformed(f'netns_path "{netns_path}" is given, but own_netns is not set',
                        field="netns_path", value=netns_path)
    if not restricted:
        return kwargs

    def reject(field: str, value: str, reason: str, text: str) -> Rejected:
        return Rejected(f"{label}: {text}", phase=INLINE_PHASE, field=field,
                        value=value, reason=reason)

    if borrowed:
        reason = ("cannot be enforced on a borrowed sandbox: it keeps its owner's "
                  "network, so only inherit is allowed")
        raise reject("network_access", mode, reason, f"network_access {mode} {reason}")
    if not models:
        reason = "needs the model server's endpoint, and none is given"
        raise reject("network_access", mode, reason, f"network_access {mode} {reason}")
    if mode == "model_only":
        for t in tools:
            if t.required:
                reason = "is required, but model_only allows only the model server"
                raise reject("tool", t.url, reason, f'tool "{t.url}" {reason}')
    for url, h in zip(models, model_hosts):
        why = _unreachable(h, own_netns)
        if why:
            reason = f"cannot be reached: {why}; the model server is always required"
            raise reject("model", url, reason, f'model "{url}" {reason}')
    if mode == "model_and_tools":
        for t, h in zip(tools, tool_hosts):
            why = _unreachable(h, own_netns)
            if why and t.required:
                reason = f"is required, but it cannot be reached: {why}"
                raise reject("tool", t.url, reason, f'tool "{t.url}" {reason}')
    if own_netns and not netns_path:
        raise Rejected(
            "a DNS-filtered phase cannot be served to this sandbox: it has its own "
            "network namespace, and which one is not known (give netns_path)",
            phase=INLINE_PHASE, field="netns_path", value="",
            reason="own_netns without netns_path in a DNS-filtered phase")
    return kwargs


def restrict_sandbox_network(network_access: Any,
                             model_base_url: Optional[str],
                             tool_urls: Iterable[str] = (),
                             required_tool_urls: Iterable[str] = (),
                             *, any_port: bool = False,
                             **options: Any) -> Dict[str, Any]:
    """NeMo Gym's helper, by its call: `restrict_network` with optional
    grants from `tool_urls` and required ones from `required_tool_urls`.

    A required grant the mode cannot honour is refused here (`Rejected`, a
    `ValueError`, never retried), before any sandbox exists; an optional one
    is dropped by the daemon, and the record says so. By default each URL
    opens its own port only, which is stricter than Gym's seed; `any_port`
    opens every port of each tool's host, as the seed does, and the record
    says "any port" for those rules. `options` are `restrict_network`'s
    (`borrowed`, `own_netns`, `netns_path`).
    """
    grants = [Tool(u, required=False, any_port=any_port) for u in tool_urls]
    grants += [Tool(u, required=True, any_port=any_port) for u in required_tool_urls]
    return restrict_network(network_access, model_base_url, grants, **options)
