#!/usr/bin/python3
"""A DNS client for tests: one query, the way a stub resolver asks it.

usage: dns_query.py [--tcp] SERVER PORT NAME [TYPE]

TYPE is A (default) or AAAA. UDP uses a connected socket, as glibc does, and
the answer must come from SERVER:PORT (the peer the client asked). Prints
"rcode N" and one "addr X" line per address in the answer section; exits 0
when an answer arrived, 2 when none did, 3 when it came from another peer.
"""
import random
import socket
import struct
import sys


def build(name, qtype):
    qid = random.randrange(65536)
    header = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".") if p)
    return qid, header + qname + b"\0" + struct.pack(">HH", qtype, 1)


def skip_name(msg, at):
    while True:
        n = msg[at]
        if n & 0xC0 == 0xC0:
            return at + 2
        if n == 0:
            return at + 1
        at += 1 + n


def parse(msg, qid):
    rid, flags, qd, an = struct.unpack(">HHHH", msg[:8])
    if rid != qid:
        raise ValueError(f"answer id {rid} is not the query's {qid}")
    at = 12
    for _ in range(qd):
        at = skip_name(msg, at) + 4
    addrs = []
    for _ in range(an):
        at = skip_name(msg, at)
        rtype, _, _, rdlen = struct.unpack(">HHIH", msg[at:at + 10])
        at += 10
        rdata = msg[at:at + rdlen]
        at += rdlen
        if rtype == 1:
            addrs.append(socket.inet_ntop(socket.AF_INET, rdata))
        elif rtype == 28:
            addrs.append(socket.inet_ntop(socket.AF_INET6, rdata))
    return flags & 0xF, addrs


def main():
    args = sys.argv[1:]
    tcp = "--tcp" in args
    args = [a for a in args if a != "--tcp"]
    if len(args) not in (3, 4):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 64
    server, port, name = args[0], int(args[1]), args[2]
    qtype = {"A": 1, "AAAA": 28}[args[3] if len(args) == 4 else "A"]
    qid, query = build(name, qtype)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM)
    s.settimeout(5)
    try:
        s.connect((server, port))
        if s.getpeername() != (server, port):
            print(f"peer {s.getpeername()}", file=sys.stderr)
            return 3
        if tcp:
            s.sendall(struct.pack(">H", len(query)) + query)
            n = struct.unpack(">H", s.recv(2))[0]
            msg = b""
            while len(msg) < n:
                chunk = s.recv(n - len(msg))
                if not chunk:
                    break
                msg += chunk
        else:
            s.send(query)
            msg, peer = s.recvfrom(65535)
            if peer != (server, port):
                print(f"answer from {peer}", file=sys.stderr)
                return 3
    except OSError as e:
        print(f"dns_query: {e}", file=sys.stderr)
        return 2
    rcode, addrs = parse(msg, qid)
    print(f"rcode {rcode}")
    for a in addrs:
        print(f"addr {a}")
    return 0


sys.exit(main())
