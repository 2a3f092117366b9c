"""lambda = "auto" on real text: `thresher fit --lambda auto` against fixed lambdas, and the daemon with
lambda = "auto" (and fixed lambdas) streamed over HTTP, each scored on the same held-out 25%.

Usage: python3 benches/lambda_auto.py path/to/thresher DATA.svm [DATA.svm ...]
Writes nothing; prints one markdown table row per setting (figures go to docs/benchmarks/learners.md).
Split: a seeded shuffle (seed 7), the last 25% held out. Learner: logistic, k = 100, no intercept.
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN = sys.argv[1]
FILES = sys.argv[2:]
K = "100"
FIXED = ["1e-2", "1e-3", "1e-4", "1e-5"]
FIT_FLAGS = ["--solver", "sdiht", "--loss", "logistic", "-k", K, "--epochs", "100", "--tol", "1e-6"]


def split(path, out_dir):
    lines = [l for l in open(path) if l.strip()]
    random.Random(7).shuffle(lines)
    cut = len(lines) - len(lines) // 4
    train, test = os.path.join(out_dir, "train.svm"), os.path.join(out_dir, "test.svm")
    open(train, "w").writelines(lines[:cut])
    open(test, "w").writelines(lines[cut:])
    return train, test, lines[:cut], lines[cut:]


def parse(line):
    label, *feats = line.split()
    return float(label), {int(f.split(":")[0]): float(f.split(":")[1]) for f in feats}


def accuracy(model, test_lines):
    w = dict(zip(model["support"], model["weights"]))
    b = model.get("intercept", 0.0)
    right = 0
    for line in test_lines:
        y, x = parse(line)
        s = b + sum(v * w.get(j, 0.0) for j, v in x.items())
        right += (1.0 if s >= 0 else -1.0) == y
    return right / len(test_lines)


def fit(train, test_lines, lambda_, out_dir):
    out = os.path.join(out_dir, f"model-{lambda_}.json")
    start = time.time()
    r = subprocess.run([BIN, "fit", train, *FIT_FLAGS, "--lambda", lambda_, "--out", out],
                       capture_output=True, text=True)
    seconds = time.time() - start
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    model = json.load(open(out))
    return model, seconds, r.stderr


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return json.loads(r.read())


def daemon(train_lines, test_lines, lambda_, out_dir):
    env = dict(os.environ,
               THRESHER_LEARNER_LOSS="logistic", THRESHER_LEARNER_K=K,
               THRESHER_LEARNER_LAMBDA=lambda_, THRESHER_WINDOW_CAPACITY=str(len(train_lines)),
               THRESHER_SNAPSHOT_INTERVAL_MS="200")
    log = open(os.path.join(out_dir, f"serve-{lambda_}.log"), "w+")
    p = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", "--fresh"], env=env,
                         stdout=subprocess.DEVNULL, stderr=log)
    try:
        base = None
        for _ in range(200):
            time.sleep(0.05)
            log.seek(0)
            for l in log:
                if "listening on " in l:
                    base = "http://" + l.split("listening on ")[1].split()[0]
            if base:
                break
        start = time.time()
        for i in range(0, len(train_lines), 500):
            body = "".join(train_lines[i:i + 500]).encode()
            req = urllib.request.Request(base + "/v1/samples", data=body,
                                         headers={"content-type": "text/plain"})
            urllib.request.urlopen(req, timeout=30).read()
        while True:
            try:
                m = get(base, "/v1/model")
                if m["samples_seen"] == len(train_lines):
                    break
            except Exception:
                pass
            time.sleep(0.05)
        streamed = time.time() - start
        # Let the learner settle (the version stops moving) or 20 s pass.
        last, since = None, time.time()
        while time.time() - since < 1.0 and time.time() - start < streamed + 20:
            m = get(base, "/v1/model")
            if m["version"] != last:
                last, since = m["version"], time.time()
            time.sleep(0.1)
        return m, streamed, time.time() - start
    finally:
        p.terminate()
        p.wait()


def main():
    for path in FILES:
        name = os.path.basename(path).removesuffix(".svm")
        with tempfile.TemporaryDirectory() as d:
            train, test, train_lines, test_lines = split(path, d)
            print(f"\n{name}: {len(train_lines)} train, {len(test_lines)} held out")
            print("| run | lambda | held-out accuracy | nonzeros | seconds | note |")
            print("| --- | --- | --- | --- | --- | --- |")
            for lam in FIXED + ["auto"]:
                model, seconds, stderr = fit(train, test_lines, lam, d)
                note = ""
                if lam == "auto":
                    a = model["lambda_auto"]
                    note = "holdout losses " + ", ".join(
                        f"{g:g}: {l:.4f}" for g, l in zip(a["grid"], a["losses"]))
                print(f"| fit | {lam if lam != 'auto' else 'auto -> %g' % model['lambda']} | "
                      f"{100 * accuracy(model, test_lines):.1f}% | {len(model['support'])} | "
                      f"{seconds:.1f} | {note} |", flush=True)
            for lam in ["1e-3", "1e-4", "auto"]:
                m, streamed, total = daemon(train_lines, test_lines, lam, d)
                note = f"streamed in {streamed:.1f} s"
                if lam == "auto":
                    a = m["lambda_auto"]
                    note += f", switches {a['switches']}, progressive losses " + ", ".join(
                        f"{g:g}: {l:.4f}" for g, l in zip(a["grid"], a["losses"]))
                print(f"| daemon | {lam if lam != 'auto' else 'auto -> %g' % m['lambda']} | "
                      f"{100 * accuracy(m, test_lines):.1f}% | {len(m['support'])} | "
                      f"{total:.1f} | {note} |", flush=True)


main()
