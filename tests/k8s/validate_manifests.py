#!/usr/bin/env python3
"""Checks packaging/k8s against what the daemon, the CLI and the image need.

usage: validate_manifests.py SOURCE_DIR SANDFENCE_BINARY

Structure (every manifest parses, has apiVersion/kind/metadata.name, the
kustomization lists every manifest and nothing else, one namespace, no RBAC),
the DaemonSet (selector matches the template, every volumeMount has a volume,
resources, update strategy, host PID, privileged), what the daemon needs
(its flags exist in `sandfence daemon --help` and equal the systemd unit's,
every path it writes is a host path mounted at the same path, bpffs with
Bidirectional propagation, the whole cgroup hierarchy), the probes (the
command is a CLI subcommand with those flags, on the daemon's socket), the
hook installer (the entrypoint's hooks.d directories, mounted from the host)
and the image name (what packaging/image/build-image.sh tags).

Prints every problem found and exits 1, else prints what it checked and
exits 0. Needs python3-yaml.
"""

import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("SKIPPED: python3-yaml is missing (./scripts/install-deps.sh --test installs it)")
    sys.exit(77)

RBAC_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
# Daemon flags that name a place the daemon writes and a later daemon (or the
# OCI hook on the host) must find: each must be a host path, mounted at the
# same path. The socket's directory stands for the socket.
HOST_PATH_FLAGS = ("--socket", "--records-dir", "--state-dir", "--pin-dir",
                   "--cgroup-parent")


class Checker:
    def __init__(self):
        self.errors = []
        self.checked = 0

    def check(self, ok, message):
        self.checked += 1
        if not ok:
            self.errors.append(message)
        return ok


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True, check=False)
    return p.returncode, p.stdout + p.stderr


def under(path, mount):
    path = posixpath.normpath(path)
    mount = posixpath.normpath(mount)
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def flag_pairs(args):
    """--flag VALUE / --flag=VALUE / --switch, in order."""
    out = []
    i = 0
    while i < len(args):
        a = str(args[i])
        if a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            out.append((k, v))
        elif a.startswith("--") and i + 1 < len(args) and not str(args[i + 1]).startswith("--"):
            out.append((a, str(args[i + 1])))
            i += 1
        elif a.startswith("--"):
            out.append((a, None))
        i += 1
    return out


def help_flags(text):
    return set(re.findall(r"^\s*(--[a-z][a-z0-9-]*)", text, re.M))


def unit_exec_start(unit_path):
    """packaging/sandfence.service's ExecStart: the binary and the daemon's flags."""
    with open(unit_path) as f:
        text = f.read().replace("\\\n", " ")
    m = re.search(r"^ExecStart=(.*)$", text, re.M)
    argv = shlex.split(m.group(1)) if m else [None]
    return argv[0], dict((k, v) for k, v in flag_pairs(argv[2:]))


def image_name_of_build_script(path):
    with open(path) as f:
        m = re.search(r"^name=\$\{SANDFENCE_IMAGE_NAME:-([^}]+)\}", f.read(), re.M)
    return m.group(1) if m else None


def hooks_dirs_of_entrypoint(path):
    with open(path) as f:
        m = re.search(r'^readonly HOOKS_DIRS="([^"]*)"', f.read(), re.M)
    return m.group(1).split() if m else None


def image_repo(image):
    """localhost/sandfence:tag -> localhost/sandfence (a port's colon stays)."""
    image = image.split("@", 1)[0]
    slash = image.rfind("/")
    colon = image.rfind(":")
    return image[:colon] if colon > slash else image


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 64
    source, binary = sys.argv[1], sys.argv[2]
    k8s = os.path.join(source, "packaging", "k8s")
    c = Checker()

    # 1. Every file parses; every object has what the API server requires.
    files = sorted(f for f in os.listdir(k8s) if f.endswith((".yaml", ".yml")))
    objects = {}  # file -> [docs]
    for name in files:
        try:
            with open(os.path.join(k8s, name)) as f:
                docs = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            c.check(False, "%s: does not parse: %s" % (name, e))
            continue
        objects[name] = docs
        for i, d in enumerate(docs):
            where = "%s[%d]" % (name, i)
            if not c.check(isinstance(d, dict), "%s: not a mapping" % where):
                continue
            for field in ("apiVersion", "kind"):
                c.check(bool(d.get(field)), "%s: no %s" % (where, field))
            if d.get("kind") != "Kustomization":
                c.check(bool((d.get("metadata") or {}).get("name")),
                        "%s: no metadata.name" % where)
            c.check(d.get("kind") not in RBAC_KINDS,
                    "%s: %s: the agent needs no cluster API, so no RBAC" % (where, d.get("kind")))

    kust = (objects.get("kustomization.yaml") or [None])[0]
    if not c.check(isinstance(kust, dict), "kustomization.yaml: missing or empty"):
        return report(c)
    manifests = [f for f in files if f != "kustomization.yaml"]
    resources = kust.get("resources") or []
    c.check(sorted(resources) == sorted(manifests),
            "kustomization.yaml: resources %s, but the manifests are %s"
            % (sorted(resources), sorted(manifests)))
    for r in resources:
        c.check(os.path.isfile(os.path.join(k8s, r)),
                "kustomization.yaml: resource %s does not exist" % r)

    by_kind = {}
    for name in manifests:
        for d in objects.get(name, []):
            if isinstance(d, dict):
                by_kind.setdefault(d.get("kind"), []).append((name, d))

    # 2. One namespace: the kustomization's, created by namespace.yaml, and
    #    every namespaced object in it.
    ns = kust.get("namespace")
    namespaces = [d["metadata"]["name"] for _, d in by_kind.get("Namespace", [])]
    c.check(ns and namespaces == [ns],
            "namespace: kustomization says %r, Namespace objects %s" % (ns, namespaces))
    for kind, items in by_kind.items():
        if kind == "Namespace":
            continue
        for name, d in items:
            got = (d.get("metadata") or {}).get("namespace")
            c.check(got in (None, ns), "%s: %s %s is in namespace %r, not %r"
                    % (name, kind, d["metadata"].get("name"), got, ns))

    dss = by_kind.get("DaemonSet", [])
    if not c.check(len(dss) == 1, "expected one DaemonSet, found %d" % len(dss)):
        return report(c)
    ds_file, ds = dss[0]
    where = "%s: DaemonSet %s" % (ds_file, ds["metadata"]["name"])
    spec = ds.get("spec") or {}
    tmpl = spec.get("template") or {}
    pod = tmpl.get("spec") or {}

    # 3. The DaemonSet's own structure.
    sel = (spec.get("selector") or {}).get("matchLabels") or {}
    labels = (tmpl.get("metadata") or {}).get("labels") or {}
    c.check(sel and all(labels.get(k) == v for k, v in sel.items()),
            "%s: selector %s does not match the template's labels %s" % (where, sel, labels))
    us = spec.get("updateStrategy") or {}
    if us.get("type") == "RollingUpdate":
        c.check(str((us.get("rollingUpdate") or {}).get("maxUnavailable")) == "1",
                "%s: RollingUpdate must replace one node's agent at a time (maxUnavailable 1), got %r"
                % (where, (us.get("rollingUpdate") or {}).get("maxUnavailable")))
        c.check("maxSurge" not in (us.get("rollingUpdate") or {}),
                "%s: maxSurge would run two daemons on a node (one state dir, one lock)" % where)
    else:
        c.check(us.get("type") == "OnDelete",
                "%s: updateStrategy %r: use RollingUpdate (maxUnavailable 1) or OnDelete" % (where, us.get("type")))
    c.check(pod.get("hostPID") is True,
            "%s: hostPID must be true (peer credentials, pods' netns, the host's cgroup namespace)" % where)
    c.check(pod.get("automountServiceAccountToken") is False,
            "%s: automountServiceAccountToken should be false (no cluster API)" % where)

    volumes = {}
    for v in pod.get("volumes") or []:
        c.check(v.get("name") not in volumes, "%s: volume %s defined twice" % (where, v.get("name")))
        volumes[v.get("name")] = v
    containers = pod.get("containers") or []
    inits = pod.get("initContainers") or []
    build_script = os.path.join(source, "packaging", "image", "build-image.sh")
    image_name = image_name_of_build_script(build_script)
    c.check(bool(image_name), "%s: no name=${SANDFENCE_IMAGE_NAME:-...} line" % build_script)
    kust_images = [i.get("name") for i in kust.get("images") or []]
    c.check(kust_images == [image_name],
            "kustomization.yaml: images %s, but build-image.sh builds %s" % (kust_images, image_name))

    for ctr in containers + inits:
        cw = "%s container %s" % (where, ctr.get("name"))
        c.check(image_repo(ctr.get("image", "")) == image_name,
                "%s: image %r is not what build-image.sh builds (%s)" % (cw, ctr.get("image"), image_name))
        c.check(ctr.get("imagePullPolicy") in ("Never", "IfNotPresent"),
                "%s: imagePullPolicy %r: the image is loaded onto nodes, never pulled"
                % (cw, ctr.get("imagePullPolicy")))
        res = ctr.get("resources") or {}
        for part in ("requests", "limits"):
            for r in ("cpu", "memory"):
                c.check(r in (res.get(part) or {}), "%s: no resources.%s.%s" % (cw, part, r))
        seen = set()
        for m in ctr.get("volumeMounts") or []:
            c.check(m.get("name") in volumes,
                    "%s: volumeMount %s (%s) has no volume" % (cw, m.get("name"), m.get("mountPath")))
            c.check(m.get("mountPath") not in seen,
                    "%s: two mounts at %s" % (cw, m.get("mountPath")))
            seen.add(m.get("mountPath"))

    def host_mount(ctr, path):
        """The deepest mount of ctr that holds path, with its hostPath."""
        best = None
        for m in ctr.get("volumeMounts") or []:
            if under(path, m.get("mountPath", "")) and (
                    best is None or len(m["mountPath"]) > len(best["mountPath"])):
                best = m
        if best is None:
            return None, None
        return best, (volumes.get(best.get("name")) or {}).get("hostPath")

    # 4. The daemon container: flags, mounts, privileges.
    daemons = [x for x in containers if (x.get("args") or [None])[0] == "daemon"]
    if not c.check(len(daemons) == 1, "%s: expected one container with args [daemon, ...]" % where):
        return report(c)
    d = daemons[0]
    dw = "%s container %s" % (where, d.get("name"))
    c.check(not d.get("command"),
            "%s: command overrides the image's entrypoint (which joins the host's cgroup namespace)" % dw)
    c.check((d.get("securityContext") or {}).get("privileged") is True,
            "%s: must be privileged (BPF, setns, Bidirectional bpffs mount)" % dw)
    code, daemon_help = run([binary, "daemon", "--help"])
    c.check(code == 0, "%s daemon --help exited %d" % (binary, code))
    known = help_flags(daemon_help)
    flags = dict(flag_pairs(d["args"][1:]))
    for k in flags:
        c.check(k in known, "%s: sandfence daemon has no flag %s (see sandfence daemon --help)" % (dw, k))
    c.check("--no-pin" not in flags and "--cleanup" not in flags,
            "%s: --no-pin/--cleanup: enforcement must outlive the pod" % dw)
    unit_binary, unit = unit_exec_start(os.path.join(source, "packaging", "sandfence.service"))
    c.check(flags == unit, "%s: flags %s differ from packaging/sandfence.service's %s" % (dw, flags, unit))
    for k in HOST_PATH_FLAGS:
        if k not in flags:
            continue
        path = posixpath.dirname(flags[k]) if k == "--socket" else flags[k]
        m, hp = host_mount(d, path)
        if not c.check(m is not None, "%s: %s %s is not on any mount (lost with the pod)" % (dw, k, flags[k])):
            continue
        c.check(hp is not None and posixpath.normpath(hp.get("path", "")) == posixpath.normpath(m["mountPath"]),
                "%s: %s %s is on %s, which must be a hostPath of the same path (got %s)"
                % (dw, k, flags[k], m["mountPath"], hp))
    if "--socket" in flags:
        c.check(posixpath.dirname(flags["--socket"]) == "/run/sandfence",
                "%s: the OCI hook on the host connects to /run/sandfence/sandfence.sock; --socket is %s"
                % (dw, flags["--socket"]))
    pin = flags.get("--pin-dir", "/sys/fs/bpf/sandfence")
    m, hp = host_mount(d, pin)
    c.check(m is not None and m["mountPath"] == "/sys/fs/bpf" and hp and hp.get("path") == "/sys/fs/bpf",
            "%s: the pin dir %s must be on the host's /sys/fs/bpf mounted at /sys/fs/bpf" % (dw, pin))
    c.check(m is not None and m.get("mountPropagation") == "Bidirectional",
            "%s: /sys/fs/bpf needs mountPropagation Bidirectional (a bpffs the daemon mounts must reach the host)" % dw)
    m, hp = host_mount(d, "/sys/fs/cgroup")
    c.check(m is not None and m["mountPath"] == "/sys/fs/cgroup" and hp and hp.get("path") == "/sys/fs/cgroup",
            "%s: the host's /sys/fs/cgroup must be mounted at /sys/fs/cgroup (the whole hierarchy)" % dw)
    c.check(not any(m.get("readOnly") for m in d.get("volumeMounts") or []
                    if m.get("mountPath") in ("/sys/fs/bpf", "/sys/fs/cgroup", "/run/sandfence", "/var/lib/sandfence")),
            "%s: the daemon writes pins, cgroups, its socket, state and records: no readOnly there" % dw)

    # 5. Probes: a CLI client command on the daemon's socket.
    code, top_help = run([binary, "help"])
    commands = set(re.findall(r"^\s{2}([a-z][a-z-]*)", top_help, re.M))
    c.check(bool(d.get("livenessProbe")), "%s: no livenessProbe" % dw)
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        p = d.get(probe)
        if not p:
            continue
        pw = "%s %s" % (dw, probe)
        argv = ((p.get("exec") or {}).get("command")) or []
        # Absolute, where the .deb installs it (the unit's ExecStart): the
        # probe must not depend on the runtime's PATH.
        if not c.check(len(argv) >= 2 and argv[0] == unit_binary,
                       "%s: expected exec [%s, COMMAND, ...], got %s" % (pw, unit_binary, argv)):
            continue
        c.check(argv[1] in commands, "%s: %r is not a sandfence command (sandfence help lists %s)"
                % (pw, argv[1], sorted(commands)))
        code, sub_help = run([binary, argv[1], "--help"])
        c.check(code == 0, "%s: sandfence %s --help exited %d" % (pw, argv[1], code))
        for k, v in flag_pairs(argv[2:]):
            c.check(k in help_flags(sub_help), "%s: sandfence %s has no flag %s" % (pw, argv[1], k))
        c.check(dict(flag_pairs(argv[2:])).get("--socket") == flags.get("--socket"),
                "%s: probes --socket %s, the daemon serves %s"
                % (pw, dict(flag_pairs(argv[2:])).get("--socket"), flags.get("--socket")))
        c.check(int(p.get("timeoutSeconds", 1)) >= 5,
                "%s: timeoutSeconds %s: a busy daemon needs more than the default 1 s" % (pw, p.get("timeoutSeconds", 1)))

    # 6. The hook installer: host paths the entrypoint writes.
    entry = os.path.join(source, "packaging", "image", "entrypoint.sh")
    hooks_dirs = hooks_dirs_of_entrypoint(entry)
    c.check(bool(hooks_dirs), "%s: no readonly HOOKS_DIRS=\"...\" line" % entry)
    installers = [x for x in inits if (x.get("args") or [None])[0] == "install-hook"]
    if c.check(len(installers) == 1, "%s: expected one initContainer with args [install-hook, DIR]" % where):
        ih = installers[0]
        iw = "%s initContainer %s" % (where, ih.get("name"))
        args = ih.get("args")
        if c.check(len(args) == 2, "%s: args %s: expected [install-hook, DIR]" % (iw, args)):
            m, hp = host_mount(ih, args[1])
            c.check(m is not None and m["mountPath"] == args[1] and hp and hp.get("path") == args[1],
                    "%s: %s must be a hostPath mounted at the same path (the hook files name it)" % (iw, args[1]))
        for hd in hooks_dirs or []:
            m, hp = host_mount(ih, "/host" + hd)
            c.check(m is not None and m["mountPath"] == "/host" + hd and hp and hp.get("path") == hd,
                    "%s: the host's %s must be mounted at /host%s" % (iw, hd, hd))

    # 7. The kustomization builds (kubectl's built-in kustomize; offline).
    kubectl = shutil.which("kubectl")
    if kubectl:
        code, out = run([kubectl, "kustomize", k8s])
        if c.check(code == 0, "kubectl kustomize %s failed: %s" % (k8s, out.strip())):
            built = [x for x in yaml.safe_load_all(out) if x]
            c.check(sorted(x.get("kind") for x in built) == sorted(
                x.get("kind") for docs in (objects.get(f, []) for f in manifests) for x in docs),
                "kubectl kustomize: the build's objects differ from the manifests")
    else:
        print("note: kubectl is not installed: `kubectl kustomize` not tried")
    return report(c)


def report(c):
    for e in c.errors:
        print("FAIL: " + e)
    if c.errors:
        print("%d of %d checks failed" % (len(c.errors), c.checked))
        return 1
    print("ok: %d checks on packaging/k8s" % c.checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
