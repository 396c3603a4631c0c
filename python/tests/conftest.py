"""Fixtures: the package under test, a real `sandfence daemon` on a
temporary socket, pin directory and cgroup parent, and loopback listeners.

The package: $SANDFENCE_PY_PATH (a directory holding an installed or built
`sandfence`), else one built from this checkout into a temporary directory
by generate.py (the modules generated from proto/ as the package build
does). The daemon: $SANDFENCE_BIN (ctest passes the built binary).

Tests that need root, the binary, protoc or cgroup v2 skip with the reason.
Network: loopback listeners only (127.0.0.0/8, ::1).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Iterator, List, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
sys.path.insert(0, PYDIR)
import generate  # noqa: E402

_pkg_error: Optional[str] = None
_pkg_tmp: Optional[str] = None
if os.environ.get("SANDFENCE_PY_PATH"):
    sys.path.insert(0, os.environ["SANDFENCE_PY_PATH"])
else:
    _pkg_tmp = tempfile.mkdtemp(prefix="sandfence-pypkg-")
    try:
        generate.build_package(_pkg_tmp)
        sys.path.insert(0, _pkg_tmp)
    except generate.GenerateError as e:
        _pkg_error = str(e)
# generate.py's directory must not shadow the package under test.
sys.path.remove(PYDIR)


def pytest_sessionfinish(session, exitstatus):
    if _pkg_tmp:
        shutil.rmtree(_pkg_tmp, ignore_errors=True)


def need_package() -> None:
    if _pkg_error:
        pytest.skip(f"cannot build the package: {_pkg_error}")


@pytest.fixture(scope="session")
def sf():
    """The sandfence package under test."""
    need_package()
    import sandfence
    return sandfence


def cgroup2_mount() -> Optional[str]:
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                return parts[1]
    return None


def need_root_and_binary() -> str:
    need_package()
    if os.geteuid() != 0:
        pytest.skip("needs root (the daemon loads BPF programs and makes cgroups)")
    binary = os.environ.get("SANDFENCE_BIN", "")
    if not binary or not os.access(binary, os.X_OK):
        pytest.skip("needs the sandfence binary in $SANDFENCE_BIN (ctest passes it)")
    if cgroup2_mount() is None:
        pytest.skip("needs a cgroup v2 mount")
    return binary


class ClosedUdpPort:
    """A loopback UDP port where nothing answers, held by a socket bound to
    it and connected elsewhere: the daemon's resolver, so that names fail
    fast and retryably and nothing ever leaves the machine."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.connect(("127.0.0.1", 9))


class Daemon:
    """A `sandfence daemon` child with directories of its own."""

    def __init__(self, binary: str, tag: str, resolver_port: int):
        self.binary = binary
        self.root = tempfile.mkdtemp(prefix="sandfence-pytest-")
        unique = f"{tag}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.pin_dir = f"/sys/fs/bpf/sandfence-pytest-{unique}"
        self.cgroups = os.path.join(cgroup2_mount() or "/sys/fs/cgroup",
                                    f"sandfence-pytest-{unique}")
        os.mkdir(self.cgroups)
        self.socket = os.path.join(self.root, "sandfence.sock")
        self.resolver_port = resolver_port
        self.proc: Optional[subprocess.Popen] = None

    @property
    def log(self) -> str:
        return os.path.join(self.root, "daemon.log")

    def log_text(self) -> str:
        try:
            with open(self.log) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def start(self) -> None:
        # A socket left by a killed daemon would look like a ready one.
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                [self.binary, "daemon", "--socket", self.socket,
                 "--records-dir", os.path.join(self.root, "records"),
                 "--state-dir", os.path.join(self.root, "state"),
                 "--pin-dir", self.pin_dir, "--cgroup-parent", self.cgroups,
                 "--resolver", f"127.0.0.1:{self.resolver_port}"],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the daemon exited at start ({self.proc.returncode}); "
                            f"its log:\n{self.log_text()}")
            if os.path.exists(self.socket):
                return
            time.sleep(0.02)
        pytest.fail(f"the daemon made no socket in 30 s; its log:\n{self.log_text()}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def cleanup(self) -> None:
        """Leaves nothing behind: the daemon stopped, its pins detached and
        removed, created sandboxes killed, directories gone."""
        self.stop()
        subprocess.run([self.binary, "daemon", "--cleanup", "--pin-dir", self.pin_dir,
                        "--state-dir", os.path.join(self.root, "state")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        try:
            os.rmdir(self.cgroups)
        except OSError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def resolver_port() -> Iterator[int]:
    held = ClosedUdpPort()
    yield held.port
    held.sock.close()


def _start_daemon(tag: str, resolver_port: int) -> Daemon:
    binary = need_root_and_binary()
    d = Daemon(binary, tag, resolver_port)
    try:
        d.start()
    except BaseException:
        d.cleanup()
        raise
    return d


@pytest.fixture(scope="session")
def daemon(resolver_port) -> Iterator[Daemon]:
    """One daemon for the session's tests."""
    d = _start_daemon("s", resolver_port)
    yield d
    d.cleanup()


@pytest.fixture
def own_daemon(resolver_port) -> Iterator[Daemon]:
    """A daemon of the test's own (one the test may kill and restart)."""
    d = _start_daemon("f", resolver_port)
    yield d
    d.cleanup()


@pytest.fixture
def client(sf, daemon):
    c = sf.Client(daemon.socket, connect_timeout=15)
    c.health()  # ready when it answers
    yield c
    c.close()


class Listeners:
    """TCP listeners on loopback: the "model" on 127.0.0.2, a "tool" on
    127.0.0.3, a forbidden host on 127.0.0.4. The kernel completes a
    connect to a listening socket without an accept."""

    def __init__(self) -> None:
        self.socks: List[socket.socket] = []
        self.model = self._listen("127.0.0.2")
        self.tool = self._listen("127.0.0.3")
        self.forbidden = self._listen("127.0.0.4")

    def _listen(self, host: str) -> int:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((host, 0))
        s.listen(64)
        self.socks.append(s)
        return s.getsockname()[1]

    @property
    def model_url(self) -> str:
        return f"http://127.0.0.2:{self.model}/v1"

    @property
    def tool_url(self) -> str:
        return f"http://127.0.0.3:{self.tool}/"

    def close(self) -> None:
        for s in self.socks:
            s.close()


@pytest.fixture(scope="session")
def listeners() -> Iterator[Listeners]:
    ls = Listeners()
    yield ls
    ls.close()


# A TCP connect from inside the sandbox: exit 0 connected, 1 EPERM (the
# sandbox refused it), 2 anything else (printed).
PROBE_CODE = r"""
import errno, socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.settimeout(5)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno), flush=True)
    sys.exit(1 if e.errno == errno.EPERM else 2)
print("connected", flush=True)
"""


def probe_argv(host: str, port: int) -> List[str]:
    return ["/usr/bin/python3", "-c", PROBE_CODE, host, str(port)]


def rollout_id(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class NetNs:
    """A network namespace the test makes (a `sleep` in it holds it);
    `path` is /proc/PID/ns/net."""

    def __init__(self) -> None:
        unshare = shutil.which("unshare")
        if unshare is None:
            pytest.skip("needs unshare (util-linux) to make a network namespace")
        self.proc = subprocess.Popen([unshare, "--net", "sleep", "600"])
        self.path = f"/proc/{self.proc.pid}/ns/net"
        deadline = time.monotonic() + 5
        while os.readlink(self.path) == os.readlink("/proc/self/ns/net"):
            if time.monotonic() > deadline:
                pytest.fail("unshare --net made no namespace")
            time.sleep(0.01)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def netns() -> Iterator[NetNs]:
    n = NetNs()
    yield n
    n.close()


_DAEMON_FIXTURES = {"daemon", "own_daemon", "client"}


def pytest_configure(config):
    config.addinivalue_line("markers", "daemon: needs root and a real sandfence daemon")


def pytest_collection_modifyitems(config, items):
    # ctest runs the daemon tests and the rest as two entries (run.sh), so
    # that a host without root shows the daemon entry as skipped.
    for item in items:
        if _DAEMON_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.daemon)
