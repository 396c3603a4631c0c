"""What an agent would try: a socket of every family, and io_uring.

Prints one line per attempt, "<what> <errno>" (0: it worked), for
tests/run/run_socket_family_test.cc. Only creates sockets: nothing is
connected or sent.
"""
import ctypes
import errno
import socket
import sys

libc = ctypes.CDLL(None, use_errno=True)
NR_IO_URING_SETUP = 425


def try_socket(family, kind):
    try:
        socket.socket(family, kind).close()
        return 0
    except OSError as e:
        return e.errno


def try_io_uring():
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    fd = libc.syscall(NR_IO_URING_SETUP, 1, params)
    if fd < 0:
        return ctypes.get_errno()
    libc.close(fd)
    return 0


for arg in sys.argv[1:]:
    if arg == "io_uring":
        print("io_uring", try_io_uring())
    elif arg == "socketpair":
        try:
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            a.close()
            b.close()
            print("socketpair 0")
        except OSError as e:
            print("socketpair", e.errno)
    else:
        family, kind = (int(x) for x in arg.split(":"))
        print(arg, try_socket(family, kind))
sys.stdout.flush()
