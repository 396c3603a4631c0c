"""The four ways issue 33 found to reach a host Unix socket a phase denies,
tried from inside `sandfence run` as an unprivileged agent would.

    unix_attacks.py DIR HOST LISTED HOST_ABSTRACT

DIR: a directory the agent may write; HOST: a stream socket outside the
sandbox that answers each byte; LISTED: a path the phase lists. Prints one
line per attack, "<attack> <code>": 0 means the outside service answered
(the attack worked), anything else is the errno (or 128 + signal) that
stopped it. Touches only the sockets named.
"""
import ctypes
import os
import select
import signal
import socket
import sys

libc = ctypes.CDLL(None, use_errno=True)
NR_IO_URING_SETUP = 425
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 4096


def answered(s):
    """Whether the service at the other end of s answers a byte."""
    try:
        s.send(b"p")
        if not select.select([s], [], [], 2)[0]:
            return False
        return s.recv(1) == b"p"
    except OSError:
        return False


def io_uring():
    """Attack 1 needs a ring: IORING_OP_CONNECT skips connect(2)'s exit."""
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(NR_IO_URING_SETUP, 1, params)
    if fd < 0:
        return ctypes.get_errno()
    os.close(fd)
    return 0


def userns_mount():
    """Attacks 2 and 4 need a user and mount namespace of the agent's own
    (to mount over the host socket's directory, or over a listed path)."""
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        return ctypes.get_errno()
    return 0


def in_child(attack):
    """Runs attack in a child (it may be killed); its code."""
    pid = os.fork()
    if pid == 0:
        try:
            code = attack()
        except OSError as e:
            code = e.errno
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def own_then_swap(name, host):
    """Binds name (the sandbox's own), swaps it for a link to host."""
    own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    own.bind(name)
    own.listen(1)
    os.unlink(name)
    os.symlink(host, name)
    return own


def swap_plain(d, host):
    name = os.path.join(d, "own-plain.sock")
    own = own_then_swap(name, host)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(name)
    finally:
        os.unlink(name)
        own.close()
    return 0 if answered(c) else 254


def fork_swap(d, host):
    """Attack 3: the socket is made before a fork; the child connects to
    the swapped name; the parent holds the same socket."""
    name = os.path.join(d, "own-fork.sock")
    own = own_then_swap(name, host)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    child = in_child(lambda: c.connect(name) or 0)
    os.unlink(name)
    own.close()
    if answered(c):
        return 0
    return child if child != 0 else 254


def relative_swap(d, host):
    """A relative name is a name in the working directory: the agent binds
    its own "host.sock" elsewhere, then connects to "host.sock" from the
    directory where the host's socket has that name."""
    own_dir = os.path.join(d, "rel")
    os.mkdir(own_dir)
    own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    own.bind(os.path.join(own_dir, os.path.basename(host)))
    own.listen(1)
    os.chdir(os.path.dirname(host))
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(os.path.basename(host))
    finally:
        own.close()
        os.unlink(os.path.join(own_dir, os.path.basename(host)))
        os.rmdir(own_dir)
    return 0 if answered(c) else 254


def short_address(d):
    """A connect whose address is as long as an inet one (16 bytes) is not
    handed to the supervisor: its own path must not be reached that way,
    by name (it would be a way round the check of the socket reached)."""
    os.chdir(d)
    name = b"o16.sock"
    own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    own.bind(name.decode())
    own.listen(1)
    addr = ctypes.create_string_buffer(2 + 14)
    addr[0:2] = socket.AF_UNIX.to_bytes(2, "little")
    addr[2:2 + len(name)] = name
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    rc = libc.connect(c.fileno(), addr, 16)
    err = ctypes.get_errno()
    own.close()
    os.unlink(name.decode())
    return 0 if rc == 0 else err


def own_threaded(d):
    """The control: a multi-threaded program reaches its own path (through
    the supervisor, which checks the socket reached)."""
    import threading
    name = os.path.join(d, "own-threaded.sock")
    own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    own.bind(name)
    own.listen(1)

    def serve():
        s, _ = own.accept()
        s.send(s.recv(1))
        s.close()
    t = threading.Thread(target=serve)
    t.start()
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(name)
    except OSError as e:
        own.close()
        return e.errno
    code = 0 if answered(c) else 254
    t.join()
    own.close()
    os.unlink(name)
    return code


def own_abstract():
    """The control: an abstract name the agent binds is its own."""
    name = "\0sf-own-abstract-%d" % os.getpid()
    own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    own.bind(name)
    own.listen(1)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(name)
    except OSError as e:
        return e.errno
    finally:
        own.close()
    return 0


def listed(path):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(path)
    except OSError as e:
        return e.errno
    return 0 if answered(c) else 254


def listed_overmount(listed_path, host):
    """Attack 4 itself: in a user and mount namespace of the agent's own,
    the host socket bind-mounted over the listed path, then a plain
    connect to the listed name. 100 + errno: the namespace was refused;
    150 + errno: the mount was."""
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        return 100 + ctypes.get_errno()
    if libc.mount(host.encode(), listed_path.encode(), None, MS_BIND,
                  None) != 0:
        return 150 + ctypes.get_errno()
    return listed(listed_path)


def map_ids(uid, gid):
    """Root in the new user namespace is the agent outside it: files it
    creates need an owner the kernel can map."""
    try:
        for name, text in (("setgroups", "deny"),
                           ("uid_map", "0 %d 1" % uid),
                           ("gid_map", "0 %d 1" % gid)):
            with open("/proc/self/" + name, "w") as f:
                f.write(text)
    except OSError:
        return False
    return True


def tmpfs_rebind(host):
    """Attack 2: a child in a user and mount namespace of its own mounts a
    tmpfs over the host socket's directory and binds the same path there
    (its own socket, by that name); then the parent, in the sandbox's mount
    namespace, connects to the path: the host's socket. 100 + errno: the
    namespace was refused; 150 + errno: the mount or bind was."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            code = 100 + ctypes.get_errno()
        elif not map_ids(uid, gid):
            code = 200
        elif libc.mount(b"sf", os.path.dirname(host).encode(), b"tmpfs", 0,
                        None) != 0:
            code = 150 + ctypes.get_errno()
        else:
            try:
                own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                own.bind(host)
                own.listen(1)
            except OSError as e:
                code = 150 + e.errno
        os.write(ready_w, bytes([code]))
        os.read(done_r, 1)  # holds its socket until the parent is done
        os._exit(0)
    code = os.read(ready_r, 1)[0]
    if code == 0:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            c.connect(host)
            code = 0 if answered(c) else 254
        except OSError as e:
            code = e.errno
    os.write(done_w, b"x")
    os.waitpid(pid, 0)
    return code


def main():
    d, host, listed_path, host_abstract = sys.argv[1:5]
    libc.connect.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32]
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                           ctypes.c_ulong, ctypes.c_void_p]
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    print("io_uring", io_uring())
    print("userns_mount", in_child(userns_mount))
    print("swap_plain", in_child(lambda: swap_plain(d, host)))
    print("fork_swap", fork_swap(d, host))
    print("relative_swap", in_child(lambda: relative_swap(d, host)))
    print("short_address", in_child(lambda: short_address(d)))
    print("own_threaded", own_threaded(d))
    print("listed", listed(listed_path))
    print("abstract_host", listed("\0" + host_abstract[1:]))
    print("own_abstract", own_abstract())
    print("listed_overmount",
          in_child(lambda: listed_overmount(listed_path, host)))
    print("tmpfs_rebind", tmpfs_rebind(host))
    sys.stdout.flush()


main()
