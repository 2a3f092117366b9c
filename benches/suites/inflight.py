"""inflight: the daemon's memory and /healthz latency under the in-flight attacks (docs/limits.md).

- held/100: 100 connections each send a `POST /v1/samples` head with `Content-Length: 33554432`, then
  all of the body but its last byte (`1\\n` lines), and wait;
- parallel/50: 50 connections each send a whole 32 MiB body of `1\\n` lines (16.7 M samples) at once;
- history/40: with `snapshot.interval_ms = 1` and `history_points = 100000`, 40 connections each ask
  `GET /v1/history` and never read the answer.

Each runs the daemon on its defaults (plus the history keys for history/40) and, throughout, a probe in
a process of its own (`probe`: the attackers' threads share one interpreter lock, and a probe among them
measured its own wait for that lock — up to ~200 ms — as /healthz latency) that samples the daemon's
VmRSS every 10 ms and asks `/healthz` every 50 ms on its own connection. It prints: the idle RSS, the
peak, the bound of docs/limits.md for this config (`bound_mib`: idle + server.inflight_bytes +
ingest.queue_samples x 24 B, the row cost of a featureless sample, + 0.5 MiB per attacking connection),
/healthz p50, p99 and max, the machine's load average at the start, and the statuses the attackers got.

Run as a script: `python3 benches/suites/inflight.py ATTACK --daemon BIN`.
"""
import argparse
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from common import Bench, Command, Metric, Needs, Suite

METRICS = [Metric("rss_peak_mib", "MiB"), Metric("bound_mib", "MiB"), Metric("healthz_p99_ms", "ms"),
           Metric("healthz_max_ms", "ms")]
BODY = 33554432
INFLIGHT_BYTES = 134217728  # config/thresher.toml defaults
QUEUE_SAMPLES = 640000


def needs(ctx):
    return Needs()


def attack(name):
    def command(ctx, build):
        return Command([sys.executable, __file__, name, "--daemon", build.thresher()], timeout=300)
    return command


def benches(ctx):
    return [Bench(n, d, attack(n.split("/")[0]), metrics=METRICS, runs=(1, 1)) for n, d in (
        ("held/100", "100 connections hold a 32 MiB body but its last byte"),
        ("parallel/50", "50 whole 32 MiB bodies of `1\\n` lines at once"),
        ("history/40", "40 GET /v1/history clients that never read (interval_ms = 1, 100000 points)"))]


SUITE = Suite("inflight", "RSS and /healthz latency under the in-flight attacks (held, parallel, history)",
              needs, benches)


class Daemon:
    def __init__(self, binary, env):
        self.dir = tempfile.mkdtemp(prefix="thresher-inflight-")
        self.proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, **env})
        for line in self.proc.stderr:
            if "listening on" in line:
                host, port = line.rsplit("listening on", 1)[1].strip().split()[0].rsplit(":", 1)
                self.addr = (host, int(port))
                break
        else:
            sys.exit("the daemon did not start")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def rss_mib(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def request(self, raw, timeout=30):
        s = socket.create_connection(self.addr, timeout=timeout)
        s.sendall(raw)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
            if b"\r\n\r\n" in out:
                head, _, body = out.partition(b"\r\n\r\n")
                length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")]
                if length and len(body) >= length[0]:
                    break
        s.close()
        return out

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def probe(pid, host, port):
    """The probe process: every 10 ms the daemon's VmRSS, every 50 ms a /healthz round trip on one
    connection, until its stdin closes; then the samples as one JSON line on stdout."""
    rss, latencies = [], []
    s = socket.create_connection((host, port))
    next_ask = 0.0
    while True:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                rss.append(int(line.split()[1]) / 1024)
        if time.perf_counter() >= next_ask:
            t = time.perf_counter()
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: b\r\n\r\n")
            got = b""
            while not got.endswith(b'"ok"}'):
                piece = s.recv(4096)
                if not piece:
                    sys.exit("the daemon closed the probe's connection")
                got += piece
            latencies.append((time.perf_counter() - t) * 1000)
            next_ask = time.perf_counter() + 0.05
        if select.select([sys.stdin], [], [], 0.01)[0] and not sys.stdin.read(1):
            break
    print(json.dumps({"rss": rss, "latencies": latencies}), flush=True)


def start_probe(d):
    return subprocess.Popen([sys.executable, __file__, "probe", "--pid", str(d.proc.pid), "--host",
                             d.addr[0], "--port", str(d.addr[1])], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def status_of(raw):
    try:
        return raw.split(b" ", 2)[1].decode()
    except (IndexError, AttributeError):
        return "none"


def post_head(length):
    return (f"POST /v1/samples HTTP/1.1\r\nHost: b\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def held(d, statuses, hold_s=10):
    chunk = b"1\n" * (1 << 19)  # 1 MiB

    def one():
        s = socket.create_connection(d.addr)
        try:
            s.sendall(post_head(BODY))
            sent = 0
            while sent < BODY - 1:
                piece = chunk[:min(len(chunk), BODY - 1 - sent)]
                s.sendall(piece)
                sent += len(piece)
            s.settimeout(hold_s)
            statuses.append(status_of(s.recv(4096)) or "held")
        except OSError:
            try:
                statuses.append(status_of(s.recv(4096)))
            except OSError:
                statuses.append("reset")
        time.sleep(max(0.0, hold_s))
        s.close()
    return [threading.Thread(target=one) for _ in range(100)]


def parallel(d, statuses):
    body = b"1\n" * (BODY // 2)

    def one():
        try:
            statuses.append(status_of(d.request(post_head(len(body)) + body, timeout=120)))
        except OSError as e:
            statuses.append(type(e).__name__)
    return [threading.Thread(target=one) for _ in range(50)]


def history(d, statuses, hold_s=15):
    # A model and a growing history: a few bodies, then the ring fills at one point per millisecond.
    for i in range(20):
        body = f"1 1:{i + 1}\n-1 2:1\n".encode()
        d.request(post_head(len(body)) + body)
    time.sleep(3)

    def one():
        s = socket.create_connection(d.addr)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /v1/history HTTP/1.1\r\nHost: b\r\n\r\n")
        time.sleep(hold_s)
        statuses.append("never-read")
        s.close()
    return [threading.Thread(target=one) for _ in range(40)]


def main(argv):
    p = argparse.ArgumentParser(prog="inflight.py")
    p.add_argument("attack", choices=["held", "parallel", "history", "probe"])
    p.add_argument("--daemon")
    p.add_argument("--pid", type=int)
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    a = p.parse_args(argv)
    if a.attack == "probe":
        return probe(a.pid, a.host, a.port)
    if not a.daemon:
        p.error("--daemon is required")
    env = {}  # the daemon logs "listening on ADDR" at info
    if a.attack == "history":
        env.update(THRESHER_SNAPSHOT_INTERVAL_MS="1", THRESHER_SNAPSHOT_HISTORY_POINTS="100000")
    load = os.getloadavg()[0]
    d = Daemon(a.daemon, env)
    time.sleep(1)
    idle = d.rss_mib()
    statuses = []
    watcher = start_probe(d)
    time.sleep(0.2)
    attackers = {"held": held, "parallel": parallel, "history": history}[a.attack](d, statuses)
    for t in attackers:
        t.start()
    for t in attackers:
        t.join()
    time.sleep(2)  # after the attackers: what is still held
    after = d.rss_mib()
    out, _ = watcher.communicate("")
    probed = json.loads(out)
    rss, lat = probed["rss"], sorted(probed["latencies"])
    d.stop()
    conns = len(attackers)
    bound = idle + INFLIGHT_BYTES / 2**20 + QUEUE_SAMPLES * 24 / 2**20 + conns * 0.5
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    print(f"attack={a.attack} connections={conns} rss_idle_mib={idle:.0f} rss_peak_mib={max(rss):.0f} "
          f"rss_after_mib={after:.0f} bound_mib={bound:.0f} healthz_p50_ms={statistics.median(lat):.2f} "
          f"healthz_p99_ms={lat[int(0.99 * (len(lat) - 1))]:.2f} healthz_max_ms={lat[-1]:.2f} "
          f"healthz_probes={len(lat)} load={load:.1f} statuses={counts}".replace(": ", ":").replace(", ", ","))


if __name__ == "__main__":
    main(sys.argv[1:])
