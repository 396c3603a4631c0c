#!/usr/bin/python3
"""Inside a sandbox with its own network namespace: listens on each ADDR:PORT
of its own loopback (bind is not judged), then connects to it over TCP.

usage: loopback_reach.py PORT ADDR...

Prints "reached ADDR" or "refused ADDR errno N" per address; exits 0.
"""
import socket
import sys


def main():
    port = int(sys.argv[1])
    for addr in sys.argv[2:]:
        listener = socket.socket()
        listener.bind((addr, port))
        listener.listen()
        client = socket.socket()
        client.settimeout(5)
        try:
            client.connect((addr, port))
            print(f"reached {addr}")
        except OSError as e:
            print(f"refused {addr} errno {e.errno}")
        client.close()
        listener.close()
    return 0


sys.exit(main())
