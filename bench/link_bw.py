#!/usr/bin/env python3
"""The achievable one-way TCP rate of a link, for the multi-host benchmarks (bench/*_multihost.sh),
and its round-trip time (there is no ping here).

  link_bw.py srv ADDR   accept one connection on ADDR:5999, read 64 MiB, answer one byte
  link_bw.py cli ADDR   connect (retrying for 5 s), send 64 MiB, print GB/s (1e9 B/s)
  link_bw.py echo ADDR  echo UDP datagrams on ADDR:5998 until one says "end" (or 120 s idle)
  link_bw.py rtt ADDR   200 UDP round trips of 64 bytes to ADDR:5998, 20 ms apart; print the
                        min, median and max round-trip time in microseconds, then stop the echo

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


def echo(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 5998))
    s.settimeout(120)
    while True:
        b, peer = s.recvfrom(2048)
        if b == b"end":
            return
        s.sendto(b, peer)


def rtt(addr, count=200):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    times = []
    deadline = time.time() + 60
    seq = 0
    while len(times) < count and time.time() < deadline:
        seq += 1
        msg = seq.to_bytes(8, "little") * 8
        t = time.perf_counter()
        s.sendto(msg, (addr, 5998))
        try:
            while True:  # skip late answers to earlier probes
                b, _ = s.recvfrom(2048)
                if b == msg:
                    break
        except socket.timeout:
            continue  # the echo may not be bound yet
        times.append((time.perf_counter() - t) * 1e6)
        time.sleep(0.02)
    s.sendto(b"end", (addr, 5998))
    if len(times) < count:
        sys.exit(f"rtt: {len(times)} of {count} round trips to {addr} answered within 60 s")
    times.sort()
    print(f"{times[0]:.0f} {times[len(times) // 2]:.0f} {times[-1]:.0f}")


if __name__ == "__main__":
    modes = {"srv": server, "cli": client, "echo": echo, "rtt": rtt}
    if len(sys.argv) != 3 or sys.argv[1] not in modes:
        sys.exit(__doc__)
    modes[sys.argv[1]](sys.argv[2])
