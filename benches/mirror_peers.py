"""Peers of the stream learners on the loadgen stream (d = 2^20, 40 nonzeros, 100 true features):
scikit-learn SGDClassifier(penalty="l1") partial_fit, River LogisticRegression(l1) learn_one and Vowpal
Wabbit (--l1), one pass each over SAMPLES samples cycled from train.svm; held-out accuracy, support
size and samples/s of the learning loop (data parsed before the clock starts), with an l1 sweep so
that the comparison can be read at equal support size. Run through benches/mirror_stream.sh; PEERS=vw,sklearn,
river and VW_L1 / SKLEARN_ALPHAS / RIVER_L1 (comma lists) select what runs.
"""
import os
import sys
import tempfile
import time

import numpy as np

DATA = sys.argv[1]
SAMPLES = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
RIVER_SAMPLES = min(SAMPLES, int(sys.argv[3]) if len(sys.argv) > 3 else 200_000)
DIM = 1 << 20


def report(peer, setting, n, seconds, accuracy, support):
    print(f"peer={peer} {setting} samples={n} seconds={seconds:.2f} samples_per_s={n / seconds:.0f} "
          f"heldout_accuracy={accuracy:.4f} support={support}", flush=True)


def sklearn_runs():
    from sklearn.datasets import load_svmlight_file
    from sklearn.linear_model import SGDClassifier

    x, y = load_svmlight_file(f"{DATA}/train.svm", n_features=DIM, zero_based=True)
    xh, yh = load_svmlight_file(f"{DATA}/heldout.svm", n_features=DIM, zero_based=True)
    chunk = 1000
    for alpha in [float(a) for a in os.environ.get("SKLEARN_ALPHAS", "1e-5,1e-4,3e-4,1e-3,3e-3,1e-2,3e-2").split(",")]:
        model = SGDClassifier(loss="log_loss", penalty="l1", alpha=alpha, random_state=0)
        start = time.perf_counter()
        done = 0
        while done < SAMPLES:
            lo = done % x.shape[0]
            hi = min(lo + chunk, x.shape[0], lo + SAMPLES - done)
            model.partial_fit(x[lo:hi], y[lo:hi], classes=np.array([-1.0, 1.0]))
            done += hi - lo
        seconds = time.perf_counter() - start
        report("sklearn-sgd-l1", f"alpha={alpha} chunk={chunk}", SAMPLES, seconds, model.score(xh, yh),
               int(np.count_nonzero(model.coef_)))


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            label, *feats = line.split()
            rows.append((float(label), {int(k): float(v) for k, v in (t.split(":") for t in feats)}))
    return rows


def river_runs():
    from river import linear_model, optim

    train, held = parse(f"{DATA}/train.svm"), parse(f"{DATA}/heldout.svm")
    for l1 in [float(a) for a in os.environ.get("RIVER_L1", "1e-5,1e-4,1e-3,1e-2").split(",")]:
        model = linear_model.LogisticRegression(optimizer=optim.SGD(0.1), l1=l1)
        start = time.perf_counter()
        for i in range(RIVER_SAMPLES):
            y, x = train[i % len(train)]
            model.learn_one(x, y > 0)
        seconds = time.perf_counter() - start
        correct = sum(1 for y, x in held if (model.predict_proba_one(x).get(True, 0.0) >= 0.5) == (y > 0))
        support = sum(1 for w in model.weights.values() if w != 0.0)
        report("river-logreg-l1", f"l1={l1}", RIVER_SAMPLES, seconds, correct / len(held), support)


def vw_runs():
    import vowpalwabbit

    def to_vw(line):
        label, _, feats = line.strip().partition(" ")
        return f"{int(float(label))} | {feats}"

    with open(f"{DATA}/train.svm") as f:
        train = [to_vw(l) for l in f if l.strip()]
    with open(f"{DATA}/heldout.svm") as f:
        held = [to_vw(l) for l in f if l.strip()]
    for l1 in [float(a) for a in os.environ.get("VW_L1", "0,1e-7,1e-6,1e-5").split(",")]:
        with tempfile.NamedTemporaryFile(suffix=".txt") as readable:
            args = ["--loss_function", "logistic", "-b", "20", "--quiet", "--readable_model", readable.name]
            if l1 > 0:
                args += ["--l1", str(l1)]
            ws = vowpalwabbit.Workspace(arg_list=args)
            start = time.perf_counter()
            for i in range(SAMPLES):
                ws.learn(train[i % len(train)])
            seconds = time.perf_counter() - start
            correct = 0
            for line in held:
                label, _, feats = line.partition(" ")
                correct += (ws.predict("|" + feats.partition("|")[2]) >= 0) == (label == "1")
            ws.finish()
            # Weight lines are `index:weight ...`; 116060 is VW's constant (bias) at -b 20. VW truncates
            # --l1 weights lazily (on use), so the readable model still lists them: with --l1 this count is
            # an upper bound, not the support VW predicts with.
            support = 0
            with open(readable.name) as f:
                for line in f:
                    head, sep, rest = line.partition(":")
                    if sep and head.isdigit() and head != "116060" and float(rest.split()[0]) != 0.0:
                        support += 1
        report("vw", f"l1={l1}", SAMPLES, seconds, correct / len(held), support)


for run in (vw_runs, sklearn_runs, river_runs):
    if os.environ.get("PEERS") and run.__name__.split("_")[0] not in os.environ["PEERS"].split(","):
        continue
    try:
        run()
    except ImportError as e:
        print(f"skipped {run.__name__}: {e}", flush=True)
