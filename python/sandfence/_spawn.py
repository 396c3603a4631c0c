"""Starting a process inside a sandbox before it executes anything.

The child (after fork, before exec) writes its pid to the sandbox's
`cgroup.procs` and, when the rollout has a network namespace of its own
(`netns_path`), joins it with setns(2). If either fails, the child never
executes the command and Popen raises. The files are opened in the parent,
so the child only writes and calls setns.

`user`, `group` and `extra_groups` are applied here, after the join
(subprocess would apply them before preexec_fn, and an unprivileged child
could then neither join the cgroup nor the namespace), in subprocess's
order: supplementary groups, gid, uid.
"""

from __future__ import annotations

import ctypes
import grp
import os
import pwd
import subprocess
from typing import Any, Callable, Optional

CLONE_NEWNET = 0x40000000

_libc: Optional[ctypes.CDLL] = None


def _setns_fn() -> Callable[[int, int], int]:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)  # the process's own libc
    fn = _libc.setns
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


class _Joiner:
    """Holds the fds the child needs; closes them in the parent after the
    spawn (they are O_CLOEXEC: the command inherits neither)."""

    def __init__(self, cgroup_path: str, netns_path: Optional[str],
                 user_preexec: Optional[Callable[[], Any]], ids: "_Ids"):
        self.ids = ids
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
        if self.ids.groups is not None:
            os.setgroups(self.ids.groups)
        if self.ids.gid is not None:
            os.setregid(self.ids.gid, self.ids.gid)
        if self.ids.uid is not None:
            os.setreuid(self.ids.uid, self.ids.uid)
        if self.user_preexec is not None:
            self.user_preexec()

    def close(self) -> None:
        for fd in (self.procs_fd, self.netns_fd):
            if fd >= 0:
                os.close(fd)
        self.procs_fd = self.netns_fd = -1


class _Ids:
    """subprocess's user/group/extra_groups, resolved in the parent."""

    def __init__(self, kwargs: dict):
        user = kwargs.pop("user", None)
        group = kwargs.pop("group", None)
        extra = kwargs.pop("extra_groups", None)
        self.uid = pwd.getpwnam(user).pw_uid if isinstance(user, str) else user
        self.gid = grp.getgrnam(group).gr_gid if isinstance(group, str) else group
        self.groups = None if extra is None else [
            grp.getgrnam(g).gr_gid if isinstance(g, str) else g for g in extra]


def popen(cgroup_path: str, netns_path: Optional[str], args: Any,
          **kwargs: Any) -> subprocess.Popen:
    ids = _Ids(kwargs)
    joiner = _Joiner(cgroup_path, netns_path, kwargs.pop("preexec_fn", None), ids)
    try:
        return subprocess.Popen(args, preexec_fn=joiner, **kwargs)
    finally:
        joiner.close()


def run(cgroup_path: str, netns_path: Optional[str], args: Any,
        **kwargs: Any) -> subprocess.CompletedProcess:
    ids = _Ids(kwargs)
    joiner = _Joiner(cgroup_path, netns_path, kwargs.pop("preexec_fn", None), ids)
    try:
        return subprocess.run(args, preexec_fn=joiner, **kwargs)
    finally:
        joiner.close()
