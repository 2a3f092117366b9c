"""Multi-class held out: `thresher fit --multiclass ovr` against one-vs-rest L1 liblinear tuned to the
same sparsity, on the real multi-class sets of `data/real` (filled by `benches/data/fetch.sh`); with
`--shared K`, the shared-support model (`--multiclass softmax -k K`) beside thresher one-vs-rest, liblinear
one-vs-rest L1 and scikit-learn's multinomial L1 (`saga`), all at the same number of DISTINCT features
(at most K: the shared support, or the union of the per-class supports), on the real sets and on a
synthetic set with a planted shared support.

Each set is split once (25% held out by a seeded permutation); both methods see the same rows.
- thresher: `fit TRAIN --loss logistic -k K --lambda auto --multiclass ovr`, every other flag at its
  default; scored with `thresher predict`.
- liblinear: `OneVsRestClassifier(LogisticRegression(l1, liblinear))` with one C for all classes, tuned
  on an inner 80/20 split of the training part over C = 10^(i/4) (best inner accuracy among the Cs whose
  every class has <= K nonzeros; ties: smaller C), refit on the whole training part (C lowered by
  10^(1/8) while a class has > K nonzeros).

    data/real/.venv/bin/python benches/peers/multiclass.py [--bin target/release/thresher] [-k 20]
    data/real/.venv/bin/python benches/peers/multiclass.py --shared 20

In `--shared K` mode (the synthetic set at K = 10, its planted support): thresher softmax `fit TRAIN -k K --lambda auto --multiclass softmax`; thresher ovr
`fit TRAIN --loss logistic -k K/C --lambda auto --multiclass ovr` (k per class K over the number of
classes, at least 1, so the union is at most K); liblinear ovr and saga multinomial with one C tuned as
above but on the union of the nonzero features (at most K); and, when they are installed, Vowpal Wabbit
`--oaa` and River's one-vs-rest logistic regression (behind a StandardScaler), five and three shuffled
passes: their L1 paths jump from more than K features to none on these sets, so each is fitted without a
penalty, the K features with the largest weight rows (over the classes) are kept, and it is refitted on
those columns alone (`top_rows`; `--no-streaming-peers` leaves them out).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

SETS = ["tissue_gene_expression", "nci60"]


def split(path, seed, tmp):
    from sklearn.datasets import dump_svmlight_file, load_svmlight_file
    x, y = load_svmlight_file(path, zero_based=True)
    perm = np.random.RandomState(seed).permutation(len(y))
    n_test = int(round(0.25 * len(y)))
    test, train = perm[:n_test], perm[n_test:]
    paths = []
    for part, rows in (("train", train), ("test", test)):
        p = os.path.join(tmp, f"{os.path.basename(path)}.{part}")
        dump_svmlight_file(x[rows], y[rows], p, zero_based=True)
        paths.append(p)
    return paths, x.shape


def int32(x):
    import scipy.sparse
    return scipy.sparse.csr_matrix((x.data, x.indices.astype(np.int32), x.indptr.astype(np.int32)), shape=x.shape)


def run_thresher(args, train, test, tmp):
    model = os.path.join(tmp, "model.json")
    t = time.perf_counter()
    subprocess.run([args.bin, "fit", train, "--loss", "logistic", "-k", str(args.k), "--lambda", "auto",
                    "--multiclass", "ovr", "--out", model], check=True, capture_output=True)
    seconds = time.perf_counter() - t
    out = subprocess.run([args.bin, "predict", "--model", model, test], check=True, capture_output=True,
                         text=True)
    predicted = np.array([float(v) for v in out.stdout.split()])
    return predicted, seconds


def run_liblinear(args, train, test, dim):
    from sklearn.datasets import load_svmlight_file
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    x, y = load_svmlight_file(train, n_features=dim, zero_based=True)
    xt, yt = load_svmlight_file(test, n_features=dim, zero_based=True)
    x, xt = int32(x), int32(xt)

    def fit(c, xs, ys):
        m = OneVsRestClassifier(LogisticRegression(penalty="l1", solver="liblinear", C=c, random_state=0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.fit(xs, ys)
        return m, max(int(np.count_nonzero(e.coef_)) for e in m.estimators_)

    t = time.perf_counter()
    perm = np.random.default_rng(args.seed).permutation(len(y))
    n_val = max(1, int(round(0.2 * len(y))))
    val, inner = perm[:n_val], perm[n_val:]
    tried = []
    for i in range(-12, 16):
        c = 10 ** (i / 4)
        m, nnz = fit(c, x[inner], y[inner])
        if nnz > args.k:
            break
        tried.append((c, float(np.mean(m.predict(x[val]) == y[val]))))
    c = max(tried, key=lambda t: (t[1], -t[0]))[0] if tried else 10 ** -3
    m, nnz = fit(c, x, y)
    while nnz > args.k:
        c /= 10 ** (1 / 8)
        m, nnz = fit(c, x, y)
    return m.predict(xt), yt, nnz, c, time.perf_counter() - t


def distinct(coefs):
    """The features with a nonzero weight in any class (coefs: classes x d)."""
    return int(np.count_nonzero(np.any(np.asarray(coefs) != 0, axis=0)))


def importable(name):
    import importlib.util
    return importlib.util.find_spec(name) is not None


def top_rows(make, x, y, xt, budget):
    """A streaming peer held to `budget` distinct features: fit it with no penalty, keep the `budget`
    features whose weight rows (over the classes) have the largest norms, refit on those columns alone.
    (Their L1 paths, tried first, jump from more than `budget` features to none on these sets.)"""
    t = time.perf_counter()
    m = make(None).fit(x, y)
    keep = np.argsort(-np.linalg.norm(np.asarray(m.coef_), axis=0))[:budget]
    keep = keep[np.linalg.norm(np.asarray(m.coef_)[:, keep], axis=0) > 0]
    m = make(None).fit(x[:, keep], y)
    return m.predict(xt[:, keep]), len(keep), time.perf_counter() - t


def tuned(args, make, x, y, xt, budget, grid=1):
    """One C for a sparse linear model `make(C)`: the best inner 80/20 accuracy among the Cs whose
    distinct features are <= budget (ties: smaller C), refit on all, C lowered while over budget."""
    def fit(c, xs, ys):
        m = make(c)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.fit(xs, ys)
        coefs = np.vstack([e.coef_ for e in m.estimators_]) if hasattr(m, "estimators_") else m.coef_
        return m, distinct(coefs)

    t = time.perf_counter()
    perm = np.random.default_rng(args.seed).permutation(len(y))
    n_val = max(1, int(round(0.2 * len(y))))
    val, inner = perm[:n_val], perm[n_val:]
    tried = []
    for i in range(-12, 16, grid):
        c = 10 ** (i / 4)
        m, used = fit(c, x[inner], y[inner])
        if used > budget:
            break
        tried.append((c, float(np.mean(m.predict(x[val]) == y[val]))))
    c = max(tried, key=lambda t: (t[1], -t[0]))[0] if tried else 10 ** -3
    m, used = fit(c, x, y)
    while used > budget:
        c /= 10 ** (grid / 8)
        m, used = fit(c, x, y)
    return m.predict(xt), used, c, time.perf_counter() - t


def _rows(x):
    x = x.tocsr()
    for i in range(x.shape[0]):
        lo, hi = x.indptr[i], x.indptr[i + 1]
        yield x.indices[lo:hi], x.data[lo:hi]


class VWOaa:
    """Vowpal Wabbit `--oaa C --l1 L` through its Python bindings, `passes` shuffled passes in memory.
    `c` maps to `--l1 1 / (c n)` (larger c, weaker penalty, as for the other peers; None, no penalty). A feature named by
    its column j hashes to j in the default namespace, and class k's weight is at j * P + k (P the
    classes rounded up to a power of two), checked against `--invert_hash` on a small problem."""

    def __init__(self, c, passes=5, seed=0):
        self.c, self.passes, self.seed = c, passes, seed

    def fit(self, x, y):
        import vowpalwabbit
        self.classes_ = np.unique(y)
        index = {c: i for i, c in enumerate(self.classes_)}
        n, d = x.shape
        l1 = f"--l1 {1.0 / (self.c * n):.6g} " if self.c else ""
        self.vw = vowpalwabbit.Workspace(f"--oaa {len(self.classes_)} {l1}-b 24 --quiet "
                                         f"--random_seed {self.seed}")
        lines = [f"{index[label] + 1} | " + " ".join(f"{j}:{v:.9g}" for j, v in zip(cols, vals))
                 for label, (cols, vals) in zip(y, _rows(x))]
        rng = np.random.default_rng(self.seed)
        for _ in range(self.passes):
            for i in rng.permutation(n):
                self.vw.learn(lines[i])
        p = 1
        while p < len(self.classes_):
            p *= 2
        self.coef_ = np.array([[self.vw.get_weight(j * p + k) for j in range(d)]
                               for k in range(len(self.classes_))])
        return self

    def predict(self, x):
        out = [self.vw.predict("| " + " ".join(f"{j}:{v:.9g}" for j, v in zip(cols, vals)))
               for cols, vals in _rows(x)]
        return np.array([self.classes_[int(p) - 1] for p in out])


class RiverOvr:
    """River's `StandardScaler | OneVsRestClassifier(LogisticRegression(l1=L))`, `passes` shuffled passes
    (River learns one sample at a time; several passes let it converge on these small sets). `c` maps to
    `l1 = 1 / (c n)`; None, no penalty."""

    def __init__(self, c, passes=3, seed=0):
        self.c, self.passes, self.seed = c, passes, seed

    def fit(self, x, y):
        from river import linear_model, multiclass, optim, preprocessing
        n, d = x.shape
        self.model = preprocessing.StandardScaler() | multiclass.OneVsRestClassifier(
            linear_model.LogisticRegression(optimizer=optim.SGD(0.05), l1=1.0 / (self.c * n) if self.c else 0.0))
        rows = [dict(zip(cols.tolist(), vals.tolist())) for cols, vals in _rows(x)]
        rng = np.random.default_rng(self.seed)
        for _ in range(self.passes):
            for i in rng.permutation(n):
                self.model.learn_one(rows[i], y[i])
        ovr = self.model[-1]
        classes = sorted(ovr.classifiers)
        self.coef_ = np.zeros((len(classes), d))
        for k, c in enumerate(classes):
            for j, w in ovr.classifiers[c].weights.items():
                self.coef_[k, j] = w
        return self

    def predict(self, x):
        return np.array([self.model.predict_one(dict(zip(cols.tolist(), vals.tolist())))
                         for cols, vals in _rows(x)])


def thresher_fit(args, train, test, tmp, flags):
    model = os.path.join(tmp, "model.json")
    t = time.perf_counter()
    subprocess.run([args.bin, "fit", train, "--lambda", "auto", "--out", model] + flags, check=True,
                   capture_output=True)
    seconds = time.perf_counter() - t
    out = subprocess.run([args.bin, "predict", "--model", model, test], check=True, capture_output=True,
                         text=True)
    import json
    with open(model) as f:
        m = json.load(f)
    if "support" in m:
        used = len(m["support"])
    else:
        used = len(set(j for c in m["models"] for j in c["support"]))
    return np.array([float(v) for v in out.stdout.split()]), used, seconds


def planted(tmp, seed, n=800, d=200, classes=5, shared=10):
    """A synthetic set whose classes all depend on the same `shared` of `d` features."""
    from sklearn.datasets import dump_svmlight_file
    rng = np.random.RandomState(seed)
    x = rng.randn(n, d)
    w = np.zeros((d, classes))
    rows = rng.choice(d, shared, replace=False)
    w[rows] = rng.randn(shared, classes) * 1.5
    scores = x @ w + rng.gumbel(size=(n, classes))
    y = scores.argmax(axis=1)
    path = os.path.join(tmp, "planted_shared.svm")
    dump_svmlight_file(x, y, path, zero_based=True)
    return path


def shared_main(args):
    from sklearn.datasets import load_svmlight_file
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    print(f"| set | n train / test | d | classes | method | accuracy | distinct features | fit s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as data_tmp:
        paths = [(n, os.path.join(args.data, f"{n}.svm"), args.shared) for n in SETS]
        # The synthetic set at its planted support's size.
        paths.append(("planted_shared (d 200, 10 shared, 5 classes)", planted(data_tmp, args.seed), 10))
        for name, path, budget in paths:
            with tempfile.TemporaryDirectory() as tmp:
                (train, test), (n, d) = split(path, args.seed, tmp)
                x, y = load_svmlight_file(train, n_features=d, zero_based=True)
                xt, yt = load_svmlight_file(test, n_features=d, zero_based=True)
                x, xt = int32(x), int32(xt)
                classes = len(set(y))
                per_class = max(1, budget // classes)
                rows = []
                p, used, s = thresher_fit(args, train, test, tmp, ["-k", str(budget), "--multiclass", "softmax"])
                rows.append((f"thresher softmax, k {budget} shared", p, used, s))
                p, used, s = thresher_fit(args, train, test, tmp, ["--loss", "logistic", "-k", str(per_class),
                                                                   "--multiclass", "ovr"])
                rows.append((f"thresher ovr, k {per_class} per class", p, used, s))
                p, used, c, s = tuned(args, lambda c: OneVsRestClassifier(LogisticRegression(
                    penalty="l1", solver="liblinear", C=c, random_state=0)), x, y, xt, budget)
                rows.append((f"liblinear ovr L1 (C {c:.3g})", p, used, s))
                p, used, c, s = tuned(args, lambda c: LogisticRegression(
                    penalty="l1", solver="saga", C=c, max_iter=2000, random_state=0), x, y, xt, budget)
                rows.append((f"sklearn multinomial L1 saga (C {c:.3g})", p, used, s))
                for label, make, peer in (("vw --oaa", VWOaa, "vowpalwabbit"),
                                          ("river ovr logistic", RiverOvr, "river")):
                    if args.no_streaming_peers or not importable(peer):
                        continue
                    p, used, s = top_rows(make, x, y, xt, budget)
                    rows.append((f"{label}, top {budget} rows refit", p, used, s))
                for method, p, used, s in rows:
                    print(f"| {name} | {n - len(yt)} / {len(yt)} | {d} | {classes} (train) | {method} | "
                          f"{100 * float(np.mean(p == yt)):.2f}% | {used} | {s:.2f} |")
                    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/thresher")
    ap.add_argument("--data", default="data/real")
    ap.add_argument("-k", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shared", type=int, default=0,
                    help="compare at this many distinct features (the shared-support model beside the rest)")
    ap.add_argument("--no-streaming-peers", action="store_true",
                    help="leave out Vowpal Wabbit and River (in --shared mode)")
    args = ap.parse_args()
    if args.shared > 0:
        shared_main(args)
        return
    print("| set | n train / test | d | classes | thresher ovr | liblinear ovr (C) | thresher - peer | fit s | peer s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in SETS:
        with tempfile.TemporaryDirectory() as tmp:
            (train, test), (n, d) = split(os.path.join(args.data, f"{name}.svm"), args.seed, tmp)
            predicted, fit_s = run_thresher(args, train, test, tmp)
            peer, yt, nnz, c, peer_s = run_liblinear(args, train, test, d)
            ours, theirs = float(np.mean(predicted == yt)), float(np.mean(peer == yt))
            print(f"| {name} | {n - len(yt)} / {len(yt)} | {d} | {len(set(yt))} (test) | {100 * ours:.2f}% | "
                  f"{100 * theirs:.2f}% (C {c:.3g}, <= {nnz} per class) | {100 * (ours - theirs):+.2f} pt | "
                  f"{fit_s:.2f} | {peer_s:.2f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
