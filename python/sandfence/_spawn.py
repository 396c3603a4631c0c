"""Starting a process inside a sandbox before it executes anything.

The child (after fork, before exec) writes its pid to the sandbox's
`cgroup.procs` and, when the rollout has a network namespace of its own
(`netns_path`), joins it with setns(2). If either fails, the child never
executes the command and Popen raises. The files are opened in the parent,
so the child only writes and calls setns.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
from typing import Any, Callable, Optional

CLONE_NEWNET = 0x40000000

_libc: Optional[ctypes.CDLL] = None


def _setns_fn() -> Callable[[int, int], int]:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                            use_errno=True)
    fn = _libc.setns
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


class _Joiner:
    """Holds the fds the child needs; closes them in the parent after the
    spawn (they are O_CLOEXEC: the command inherits neither)."""

    def __init__(self, cgroup_path: str, netns_path: Optional[str],
                 user_preexec: Optional[Callable[[], Any]]):
        self.procs_fd = os.open(os.path.join(cgroup_path, "cgroup.procs"),
                                os.O_WRONLY | os.O_CLOEXEC)
        self.netns_fd = -1
        try:
            if netns_path:
                self.netns_fd = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
            self.setns = _setns_fn() if netns_path else None
        except BaseException:
            self.close()
            raise
        self.user_preexec = user_preexec

    def __call__(self) -> None:  # in the child, before exec
        os.write(self.procs_fd, str(os.getpid()).encode())
        if self.setns is not None:
            if self.setns(self.netns_fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, "setns(netns of the sandbox): " + os.strerror(err))
        if self.user_preexec is not None:
            self.user_preexec()

    def close(self) -> None:
        for fd in (self.procs_fd, self.netns_fd):
            if fd >= 0:
                os.close(fd)
        self.procs_fd = self.netns_fd = -1


def popen(cgroup_path: str, netns_path: Optional[str], args: Any,
          **kwargs: Any) -> subprocess.Popen:
    joiner = _Joiner(cgroup_path, netns_path, kwargs.pop("preexec_fn", None))
    try:
        return subprocess.Popen(args, preexec_fn=joiner, **kwargs)
    finally:
        joiner.close()


def run(cgroup_path: str, netns_path: Optional[str], args: Any,
        **kwargs: Any) -> subprocess.CompletedProcess:
    joiner = _Joiner(cgroup_path, netns_path, kwargs.pop("preexec_fn", None))
    try:
        return subprocess.run(args, preexec_fn=joiner, **kwargs)
    finally:
        joiner.close()
