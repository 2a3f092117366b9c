"""What hashed feature names cost against the dictionary, measured on the real daemon (figures in
docs/benchmarks/dictionary.md). Standard library only.

    python3 benches/harness/hashed_names.py accuracy BINARY TRAIN.svm TEST.svm OUTDIR [MODES]
    python3 benches/harness/hashed_names.py stream BINARY NAMES BITS OUTDIR

accuracy: a LIBSVM text set as named features (index j becomes the name "w{j}"), POSTed as NDJSON
bodies of 500 samples to a daemon with one SDIHT logistic learner (k = 100, lambda = "auto", a window of
the whole training part); once its served lambda and support have held for 3 s, the test part is
scored through POST /v1/predict (named too). MODES: comma-separated "dictionary" or
"hashed:BITS[:SEED]" (default dictionary,hashed:12,hashed:16,hashed:18,hashed:20,hashed:24). One line of key=value per
mode: held-out accuracy and AUC, nonzeros, support names shown, collisions and evictions counted, VmRSS,
and the checkpoint's size (with thresher.names) after SIGTERM.

stream: NAMES distinct names (10 000 a request: 100 NDJSON lines of 100 names of 23 bytes) into a
daemon with hash_bits = BITS, one SDIHT learner (k = 10) and a window of 10 000 samples (full after the
first 10^6 names, so what grows after it is not the window); VmRSS after every tenth of the names, the
checkpoint's size at the end.
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

SETTLE_S = 3.0
TIMEOUT_S = 600


def rss_mib(pid, key="VmRSS"):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return 0.0


class Daemon:
    def __init__(self, binary, config_text, out):
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        self.out = out
        cfg = os.path.join(out, "thresher.toml")
        with open(cfg, "w") as f:
            f.write(config_text)
        self.data = os.path.join(out, "data")
        self.log_path = os.path.join(out, "daemon.log")
        env = {k: v for k, v in os.environ.items() if not k.startswith("THRESHER_")}
        self.proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--config", cfg,
                                      "--data-dir", self.data], stdout=subprocess.DEVNULL,
                                     stderr=open(self.log_path, "w"), env=env)
        deadline = time.time() + 60
        addr = None
        while addr is None:
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit(f"the daemon did not start: {open(self.log_path).read()[-400:]}")
            m = re.search(r"listening on (\S+?),?\s", open(self.log_path).read())
            addr = m.group(1).strip('"').replace("http://", "") if m else None
            time.sleep(0.05)
        host, port = addr.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=120)

    def request(self, method, path, body=None, ctype="application/x-ndjson"):
        self.conn.request(method, path, body=body, headers={"Content-Type": ctype} if body else {})
        r = self.conn.getresponse()
        return r.status, r.read()

    def post(self, path, body):
        while True:
            status, reply = self.request("POST", path, body)
            if status == 503:
                time.sleep(0.01)
                continue
            if status not in (200, 202):
                sys.exit(f"POST {path}: {status} {reply[:300]!r}")
            return json.loads(reply) if status == 200 else None

    def metric(self, name):
        _, text = self.request("GET", "/metrics")
        m = re.search(rf"^{re.escape(name)} (\S+)$", text.decode(), re.M)
        return float(m.group(1)) if m else 0.0

    def stop(self):
        """SIGTERM; the checkpoint's bytes (with the names file) once the daemon has exited."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=TIMEOUT_S)
        return sum(os.path.getsize(os.path.join(self.data, f)) for f in ("thresher.ckpt", "thresher.names")
                   if os.path.exists(os.path.join(self.data, f)))


def read_svm(path):
    rows = []
    for line in open(path):
        t = line.split()
        if t:
            rows.append((float(t[0]), {f"w{i}": float(v) for i, v in (x.split(":", 1) for x in t[1:])}))
    return rows


def bodies(rows, labelled, size=500):
    for at in range(0, len(rows), size):
        lines = [json.dumps({"label": y, "features": x} if labelled else {"features": x})
                 for y, x in rows[at:at + size]]
        yield ("\n".join(lines) + "\n").encode()


def auc(y, s):
    """Probability that a positive outscores a negative (ties half), by ranks."""
    order = sorted(range(len(s)), key=lambda i: s[i])
    ranks = [0.0] * len(s)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and s[order[j + 1]] == s[order[i]]:
            j += 1
        for m in range(i, j + 1):
            ranks[order[m]] = (i + j) / 2 + 1
        i = j + 1
    pos = [r for r, t in zip(ranks, y) if t > 0]
    n_pos, n_neg = len(pos), len(y) - len(pos)
    return (sum(pos) - n_pos * (n_pos + 1) / 2) / max(1, n_pos * n_neg)


def accuracy(binary, train_path, test_path, out, modes):
    train, test = read_svm(train_path), read_svm(test_path)
    names = len({n for _, x in train for n in x})
    for mode in modes:
        ingest = "[ingest]\nmax_dim = 16777216\nmax_new_names_per_request = 1000000\n"
        if mode.startswith("hashed:"):
            bits, seed = (mode.split(":")[1:] + ["0"])[:2]
            ingest += f"feature_names = \"hashed\"\nhash_bits = {int(bits)}\nhash_seed = {int(seed)}\n"
        config = (ingest + f"[window]\ncapacity = {len(train)}\n[checkpoint]\ninterval_s = 3600\n"
                  "[[learner]]\nsolver = \"sdiht\"\nloss = \"logistic\"\nk = 100\nlambda = \"auto\"\n")
        d = Daemon(binary, config, os.path.join(out, mode.replace(":", "-")))
        started = time.time()
        for body in bodies(train, True):
            d.post("/v1/samples", body)
        held, last, deadline = None, None, time.time() + TIMEOUT_S
        while time.time() < deadline:
            status, reply = d.request("GET", "/v1/model")
            if status == 200:
                m = json.loads(reply)
                if m.get("samples_seen", 0) >= len(train):
                    key = (m.get("lambda"), tuple(m.get("support", [])))
                    if key != last:
                        last, held = key, time.time()
                    elif time.time() - held >= SETTLE_S:
                        break
            time.sleep(0.05)
        seconds = time.time() - started
        model = json.loads(d.request("GET", "/v1/model")[1])
        scores = []
        for body in bodies(test, False):
            scores += d.post("/v1/predict", body)["predictions"]
        y = [t for t, _ in test]
        acc = sum((s >= 0) == (t > 0) for s, t in zip(scores, y)) / len(y)
        shown = sum(n is not None for n in model.get("feature_names", []))
        fields = dict(
            mode=mode, train=len(train), test=len(test), distinct_names=names, acc=f"{acc:.4f}",
            auc=f"{auc(y, scores):.4f}", nnz=len(model.get("support", [])), named=shown,
            collided=len(model.get("feature_names_collided", [])), lam=model.get("lambda"),
            collisions=int(d.metric("thresher_hashed_name_collisions_total")),
            evictions=int(d.metric("thresher_hashed_names_evicted_total")),
            rss_mib=f"{rss_mib(d.proc.pid):.0f}", seconds=f"{seconds:.1f}")
        fields["checkpoint_bytes"] = d.stop()
        print(" ".join(f"{k}={v}" for k, v in fields.items()), flush=True)


def stream(binary, names, bits, out):
    config = (f"[ingest]\nfeature_names = \"hashed\"\nhash_bits = {bits}\n[checkpoint]\ninterval_s = 3600\n"
              "[window]\ncapacity = 10000\n[[learner]]\nk = 10\n")
    d = Daemon(binary, config, out)
    print(f"names=0 rss_mib={rss_mib(d.proc.pid):.0f}", flush=True)
    i, step = 0, max(1, names // 10)
    while i < names:
        lines = []
        for _ in range(100):
            features = {f"name-{i + j:018d}": 1.0 for j in range(min(100, names - i))}
            i += len(features)
            if features:
                lines.append(json.dumps({"label": 1.0 if i % 3 else -1.0, "features": features}))
        d.post("/v1/samples", ("\n".join(lines) + "\n").encode())
        if i % step < 10_000 or i >= names:
            print(f"names={i} rss_mib={rss_mib(d.proc.pid):.0f} hwm_mib={rss_mib(d.proc.pid, 'VmHWM'):.0f}",
                  flush=True)
    time.sleep(3)
    print(f"names={i} rss_mib={rss_mib(d.proc.pid):.0f} after=3s "
          f"evictions={int(d.metric('thresher_hashed_names_evicted_total'))}", flush=True)
    print(f"checkpoint_bytes={d.stop()}", flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) >= 5 and a[0] == "accuracy":
        modes = (a[5] if len(a) > 5 else "dictionary,hashed:12,hashed:16,hashed:18,hashed:20,hashed:24")
        accuracy(a[1], a[2], a[3], a[4], modes.split(","))
    elif len(a) == 5 and a[0] == "stream":
        stream(a[1], int(a[2]), int(a[3]), a[4])
    else:
        sys.exit(__doc__)
