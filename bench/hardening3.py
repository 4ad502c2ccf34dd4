#!/usr/bin/env python3
"""Hardening 3 (issue 38) figures against a running relay binary: memory while 40 unauthenticated
clients upload 16 MiB bodies to the compatible doors, and how long each waits for its answer.

usage: bench/hardening3.py RELAY_BINARY
Starts the binary in auth mode on a free loopback port in a temporary directory, measures its
VmRSS before and VmHWM after, and stops it. Bounded: 40 connections, one upload each."""
import os, socket, subprocess, sys, tempfile, threading, time, urllib.request

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def status(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key):
            return int(line.split()[1])  # kB
    return 0

def main():
    binary = os.path.abspath(sys.argv[1])
    port = free_port()
    d = tempfile.mkdtemp()
    cfg = os.path.join(d, "relay.toml")
    open(cfg, "w").write(f'bind = "127.0.0.1:{port}"\n[memory]\nurl = "sqlite://{d}/relay.db"\n'
                         f'[auth]\nurl = "sqlite://{d}/relay.db"\n')
    proc = subprocess.Popen([binary, "--config", cfg, "serve"], cwd=d,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1); break
            except Exception:
                time.sleep(0.05)
        before = status(proc.pid, "VmRSS")
        size = 16 * 1024 * 1024 - 1
        chunk = b"x" * (1024 * 1024)
        answers = []
        def upload(path):
            s = socket.create_connection(("127.0.0.1", port))
            started = time.monotonic()
            s.sendall(f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                      f"content-length: {size}\r\n\r\n".encode())
            sent = 0
            s.settimeout(0.5)
            head = b""
            try:
                while sent < size:
                    try:
                        s.sendall(chunk[: min(len(chunk), size - sent)]); sent += len(chunk)
                    except socket.timeout:
                        break
                    except (BrokenPipeError, ConnectionResetError):
                        break
                s.settimeout(10)
                head = s.recv(64)
            except Exception:
                pass
            answers.append((head.split(b"\r\n")[0].decode(errors="replace"), time.monotonic() - started, sent))
            s.close()
        paths = ["/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1/messages/count_tokens"]
        threads = [threading.Thread(target=upload, args=(paths[i % 4],)) for i in range(40)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        peak = status(proc.pid, "VmHWM")
        statuses = sorted({a[0] for a in answers})
        sent_mib = sum(a[2] for a in answers) / 2**20
        print(f"RSS before {before/1024:.1f} MB, peak {peak/1024:.1f} MB, growth {(peak-before)/1024:.1f} MB")
        print(f"answers: {statuses}; slowest answer {max(a[1] for a in answers):.2f} s; "
              f"bytes the clients got to send before the answer: {sent_mib:.0f} MiB in all")
    finally:
        proc.terminate(); proc.wait(10)

main()
