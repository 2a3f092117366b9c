"""Multi-class held out: `thresher fit --multiclass ovr` against one-vs-rest L1 liblinear tuned to the
same sparsity, on the real multi-class sets of `data/real` (filled by `benches/data/fetch.sh`).

Each set is split once (25% held out by a seeded permutation); both methods see the same rows.
- thresher: `fit TRAIN --loss logistic -k K --lambda auto --multiclass ovr`, every other flag at its
  default; scored with `thresher predict`.
- liblinear: `OneVsRestClassifier(LogisticRegression(l1, liblinear))` with one C for all classes, tuned
  on an inner 80/20 split of the training part over C = 10^(i/4) (best inner accuracy among the Cs whose
  every class has <= K nonzeros; ties: smaller C), refit on the whole training part (C lowered by
  10^(1/8) while a class has > K nonzeros).

    data/real/.venv/bin/python benches/peers/multiclass.py [--bin target/release/thresher] [-k 20]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/thresher")
    ap.add_argument("--data", default="data/real")
    ap.add_argument("-k", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
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
