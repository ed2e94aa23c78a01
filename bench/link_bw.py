#!/usr/bin/env python3
"""The achievable one-way TCP rate of a link, for the multi-host benchmarks (bench/*_multihost.sh).

  link_bw.py srv ADDR   accept one connection on ADDR:5999, read 64 MiB, answer one byte
  link_bw.py cli ADDR   connect (retrying for 5 s), send 64 MiB, print GB/s (1e9 B/s)

Run each side inside its network namespace (ip netns exec). Every wait has a 120 s timeout.
"""
import socket
import sys
import time

N = 64 << 20


def server(addr):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 5999))
    s.listen(1)
    s.settimeout(120)
    c, _ = s.accept()
    c.settimeout(120)
    got = 0
    while got < N:
        b = c.recv(1 << 20)
        if not b:
            break
        got += len(b)
    c.sendall(b"x")


def client(addr):
    deadline = time.time() + 5
    while True:
        try:
            c = socket.create_connection((addr, 5999), timeout=120)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    buf = b"\0" * (1 << 20)
    t = time.time()
    for _ in range(N >> 20):
        c.sendall(buf)
    c.recv(1)
    print(f"{N / (time.time() - t) / 1e9:.4f}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("srv", "cli"):
        sys.exit(__doc__)
    (server if sys.argv[1] == "srv" else client)(sys.argv[2])
