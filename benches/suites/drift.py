"""drift: recovery after an abrupt and after a gradual change.

- abrupt/thresher-{off,alarm,shrink}: `thresher serve` (squared loss, k = 5, window 2000) fed a seeded
  sparse regression stream of 4000 samples whose labels change sign after 2000, in requests of 100; the
  learner settles after each request (its version unchanged for 0.3 s), so the figures do not depend
  on the machine's speed. Figures: `recovery_samples`, the samples after the change until a request's
  mean progressive loss is within 10% of its mean over the 1000 samples before the change (the stream
  length after the change when it never is), `alarms`, `dropped` (window samples shrink dropped), and
  `mean_loss`, the progressive loss over the whole stream.
- abrupt/thresher-halflife-{100,400}: the same with `drift.action = "off"` and forgetting,
  `window.half_life_samples` = 100 or 400 (SDIHT's coordinate step, the one forgetting needs);
- abrupt/river-adwin-reset: River's LinearRegression, progressive (predict, then learn), replaced by a
  fresh one when ADWIN on its absolute error signals a change: the same figures (no per-request
  settling applies; River learns each sample once).
- gradual/...: the same learners on a stream whose labels turn from `w.x` to `-w.x` linearly over the
  1000 samples after sample 2000 (then stay); `late_loss` is the mean progressive loss over the last
  1000 samples, when the change is over.

Run as a script: `python3 benches/suites/drift.py thresher --binary B --action A` or
`PY benches/suites/drift.py river` (PY with river installed). Standard library only, but for River.
"""
import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from common import Bench, Command, Metric, Needs, Suite, venv

N_BEFORE, N_AFTER, BATCH, WINDOW, SEED = 2000, 2000, 100, 2000, 21
METRICS = [Metric("recovery_samples", "samples"), Metric("alarms", ""), Metric("dropped", "samples"),
           Metric("mean_loss", ""), Metric("late_loss", "")]


RAMP = 1000


def stream(seed=SEED, d=40, k_true=3, nnz=8, noise=0.05, kind="abrupt"):
    """(indices, values, label) rows; labels change sign after N_BEFORE (`abrupt`), or turn from `w.x`
    to `-w.x` over the RAMP samples after it (`gradual`)."""
    rng = random.Random(seed)
    truth = {}
    while len(truth) < k_true:
        truth.setdefault(rng.randrange(d), rng.uniform(1, 2) * rng.choice([-1, 1]))
    rows = []
    for i in range(N_BEFORE + N_AFTER):
        idx = sorted(rng.sample(range(d), nnz))
        vals = [rng.gauss(0, 1) for _ in idx]
        y = sum(truth.get(j, 0.0) * v for j, v in zip(idx, vals)) + noise * rng.gauss(0, 1)
        if kind == "gradual":
            t = min(1.0, max(0.0, (i - N_BEFORE) / RAMP))
            y = (1.0 - 2.0 * t) * y
        elif i >= N_BEFORE:
            y = -y
        rows.append((idx, vals, y))
    return rows


def summary(batch_losses, extra):
    flip = N_BEFORE // BATCH
    before = batch_losses[flip - 1000 // BATCH:flip]
    level = sum(before) / len(before)
    after = batch_losses[flip:]
    rec = next(((b + 1) * BATCH for b, l in enumerate(after) if l <= 1.1 * level), N_AFTER)
    late = batch_losses[-1000 // BATCH:]
    out = {"recovery_samples": rec, "pre_change_loss": level,
           "mean_loss": sum(batch_losses) / len(batch_losses), "late_loss": sum(late) / len(late)}
    out.update(extra)
    return out


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.read().decode()


def run_thresher(a):
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "t.toml")
        with open(cfg, "w") as f:
            forget = f"half_life_samples = {a.half_life}\n" if a.half_life else ""
            step = 'step = "coordinate"\n' if a.half_life else ""
            f.write(f'[snapshot]\ninterval_ms = 50\n[window]\ncapacity = {WINDOW}\n{forget}'
                    f'[drift]\naction = "{a.action}"\n[[learner]]\nk = 5\n{step}')
        p = subprocess.Popen([a.binary, "serve", "--listen", "127.0.0.1:0", "--config", cfg],
                             stderr=subprocess.PIPE, text=True)
        port = None
        for line in p.stderr:
            if "listening on " in line:
                port = int(line.rsplit(":", 1)[1])
                break
        try:
            losses, total = [], 0.0
            rows = stream(kind=a.kind)
            for b in range(0, len(rows), BATCH):
                body = "".join(f"{y} " + " ".join(f"{j + 1}:{v}" for j, v in zip(i, x)) + "\n"
                               for i, x, y in rows[b:b + BATCH])
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                c.request("POST", "/v1/samples", body, {"content-type": "text/plain"})
                assert c.getresponse().status == 202
                seen, last, since = b + BATCH, None, time.monotonic()
                while True:
                    status, text = get(port, "/v1/model")
                    m = json.loads(text) if status == 200 else {}
                    key = (m.get("samples_seen"), m.get("version"))
                    if key != last:
                        last, since = key, time.monotonic()
                    elif key[0] == seen and time.monotonic() - since > 0.3:
                        break
                    time.sleep(0.02)
                s = m["progressive_loss"] * seen
                losses.append((s - total) / BATCH)
                total = s
            drift = m.get("drift", {})
            _, metrics = get(port, "/metrics")
            dropped = next((float(line.split()[-1]) for line in metrics.splitlines()
                            if line.startswith("thresher_drift_dropped_samples_total")), 0.0)
            print(json.dumps(summary(losses, {"alarms": drift.get("alarms", 0), "dropped": dropped})))
        finally:
            p.terminate()
            p.wait()


def run_river(a):
    from river import drift, linear_model
    model, detector, alarms = linear_model.LinearRegression(), drift.ADWIN(), 0
    losses, acc = [], 0.0
    for n, (idx, vals, y) in enumerate(stream(kind=a.kind), 1):
        x = {j: v for j, v in zip(idx, vals)}
        p = model.predict_one(x)
        acc += (y - p) ** 2
        model.learn_one(x, y)
        detector.update(abs(y - p))
        if detector.drift_detected:
            alarms += 1
            model = linear_model.LinearRegression()
        if n % BATCH == 0:
            losses.append(acc / BATCH)
            acc = 0.0
    print(json.dumps(summary(losses, {"alarms": alarms, "dropped": 0})))


def parse(stdout, _stderr):
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    return {k: float(v) for k, v in json.loads(lines[-1]).items()} if lines else {}


def needs(ctx):
    return Needs()


def prepare(ctx):
    ctx.py, missing = venv("bench-venv", ["river"])
    if missing:
        ctx.py = None


def benches(ctx):
    def thresher(kind, action, half_life=0):
        return lambda ctx, build: Command([sys.executable, __file__, "thresher", "--binary",
                                           build.thresher(), "--action", action, "--kind", kind,
                                           "--half-life", str(half_life)])

    def river(kind):
        return lambda ctx, build: (Command([ctx.py, __file__, "river", "--kind", kind])
                                   if getattr(ctx, "py", None) else None)

    out = []
    for kind, what in (("abrupt", "label flip after 2000 samples"),
                       ("gradual", "labels turn to their opposite over samples 2000-3000")):
        out += [Bench(f"{kind}/thresher-{a}", f"{what}, drift.action = {a}", thresher(kind, a),
                      parse=parse, metrics=METRICS, runs=(1, 1), timeout=(600, 1200))
                for a in ("off", "alarm", "shrink")]
        out += [Bench(f"{kind}/thresher-halflife-{h}", f"{what}, window.half_life_samples = {h}",
                      thresher(kind, "off", h), parse=parse, metrics=METRICS, runs=(1, 1),
                      timeout=(600, 1200))
                for h in (100, 400)]
        out.append(Bench(f"{kind}/river-adwin-reset", f"River LinearRegression reset on ADWIN, {what}",
                         river(kind), parse=parse, metrics=METRICS, per_build=False, runs=(1, 1)))
    return out


SUITE = Suite("drift", "recovery after an abrupt and a gradual change: drift.action off/alarm/shrink and "
              "forgetting against River's ADWIN-reset learner", needs, benches, prepare=prepare)

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["thresher", "river"])
    ap.add_argument("--binary", default="target/release/thresher")
    ap.add_argument("--action", default="shrink")
    ap.add_argument("--kind", choices=["abrupt", "gradual"], default="abrupt")
    ap.add_argument("--half-life", type=int, default=0, help="window.half_life_samples (0: off)")
    args = ap.parse_args()
    (run_thresher if args.what == "thresher" else run_river)(args)
