"""Best subset (l0 + l1 + l2), the paper's Sec. 5.1 protocol, side by side with the peers.

Run through `benches/run quality` (it makes the virtualenv and builds thresher; BIN names the thresher
binary, DATA the folder for the LIBSVM files and results). For every SNR in {20, 5, 2}, n
in {200..600} and copy: p = 3000 features, X ~ MVN(0, Sigma) with Sigma_ij = 0.4^|i-j|, columns scaled to
unit norm (the paper's assumption, so every solver sees the same design), 3% of beta nonzero uniform in
[-1, 1] in that unit-norm design, y = X beta + noise at the SNR (Var(X beta) / sigma^2). The data set is
written as LIBSVM under data/subset/ and fitted by
  thresher subset (PrimDual), thresher dual-ast (the ablation), thresher diht (k = true support size),
  abess (support size = true k, ridge alpha), and L0Learn (CDPSI, the paper's CDSS) when importable.
Every model is scored on the paper's objective with the setting's lambdas: P, the gap P - D(X beta - y),
nonzeros, PSSR (share of the true support recovered), precision, and ||beta - beta_true|| / ||beta_true||.
Times are fitting time only (thresher: solver seconds it reports; peers: the fit call).
"""
import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("BIN", os.path.join(ROOT, "target", "release", "thresher"))
DATA = os.environ.get("DATA", os.path.join(ROOT, "data", "subset"))
P = int(os.environ.get("P", 3000))
NS = [int(v) for v in os.environ.get("NS", "200,300,400,500,600").split(",")]
SNRS = [float(v) for v in os.environ.get("SNRS", "20,5,2").split(",")]
COPIES = int(os.environ.get("COPIES", 10))
ABLATION = os.environ.get("ABLATION") == "1"
PEERS = os.environ.get("PEERS", "1") == "1"
ONLY = [v for v in os.environ.get("ONLY", "").split(",") if v]  # restrict the thresher solvers
LAMBDAS = {20.0: (0.03, 0.02, 1.0), 5.0: (0.1, 0.2, 1.0), 2.0: (0.1, 0.2, 1.0)}

try:
    import l0learn  # noqa: F401

    HAVE_L0LEARN = True
except Exception:  # no wheel for this Python (see docs/benchmarks/subset.md)
    HAVE_L0LEARN = False
import abess


def generate(n, p, snr, seed, rho=0.4):
    """X ~ MVN(0, Sigma) scaled to unit-norm columns; beta (3% nonzero, uniform in [-1, 1]) lives in that
    unit-norm design, as the paper's analysis assumes; y = X beta + N(0, sigma^2) with
    sigma^2 = Var(X beta) / SNR (empirical variance of the clean signal)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, p))
    x = np.empty((n, p))
    x[:, 0] = z[:, 0]
    c = math.sqrt(1 - rho * rho)
    for j in range(1, p):
        x[:, j] = rho * x[:, j - 1] + c * z[:, j]
    x /= np.linalg.norm(x, axis=0)
    k = int(round(0.03 * p))
    support = np.sort(rng.choice(p, size=k, replace=False))
    beta = np.zeros(p)
    beta[support] = rng.uniform(-1.0, 1.0, size=k)
    clean = x @ beta
    y = clean + rng.standard_normal(n) * math.sqrt(np.var(clean) / snr)
    return x, y, beta


def write_libsvm(path, x, y):
    with open(path, "w") as f:
        for i in range(x.shape[0]):
            f.write(repr(float(y[i])))
            f.write(" ")
            f.write(" ".join(f"{j}:{v:.12g}" for j, v in enumerate(x[i])))
            f.write("\n")


def objective(x, y, beta, lam):
    """P(beta) and the gap to D(X beta - y) in the paper's conventions (unit columns)."""
    l0, l1, l2 = lam
    r = y - x @ beta
    nz = beta != 0
    primal = 0.5 * r @ r + l0 * nz.sum() + l1 * np.abs(beta).sum() + l2 * beta @ beta
    alpha = -r
    eta = -(x.T @ alpha) / (2 * l2)
    eta0 = (2 * math.sqrt(l0 * l2) + l1) / (2 * l2)
    on = np.abs(eta) >= eta0
    psi = np.where(on, -l2 * (np.abs(eta) - l1 / (2 * l2)) ** 2 + l0, 0.0).sum()
    dual = -(0.5 * alpha @ alpha + y @ alpha) + psi
    return primal, primal - dual


def thresher(path, args):
    out = path + ".model.json"
    proc = subprocess.run([BIN, "fit", path, "--out", out] + args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    fields = dict(re.findall(r"(\w+)=(\S+)", proc.stderr.strip().splitlines()[-1]))
    with open(out) as f:
        model = json.load(f)
    os.remove(out)
    return model, fields


def dense(model, p):
    beta = np.zeros(p)
    for j, w in zip(model["support"], model["weights"]):
        beta[j] = w
    return beta


def run_one(n, snr, copy):
    lam = LAMBDAS[snr]
    seed = int(snr * 1000) + n * 10 + copy
    x, y, truth = generate(n, P, snr, seed)
    k = int((truth != 0).sum())
    os.makedirs(DATA, exist_ok=True)
    path = os.path.join(DATA, f"snr{snr:g}_n{n}_c{copy}.svm")
    write_libsvm(path, x, y)
    l0, l1, l2 = lam
    results = {}
    sub = ["--lambda0", str(l0), "--lambda1", str(l1), "--lambda2", str(l2), "--xi", "1e-6", "--zeta", "1e-6"]
    for name, args in [
        ("subset", ["--solver", "subset"] + sub),
        ("dual-ast", ["--solver", "dual-ast"] + sub),
        # (1/N) sum (y-u)^2 + (lambda/2)||w||^2 times N/2 is (1/2) sum (y-u)^2 + lambda2 ||w||^2 at lambda = 4 lambda2 / N.
        ("diht", ["--solver", "diht", "--loss", "squared", "-k", str(k), "--lambda", repr(4 * l2 / n)]),
    ] + ([
        # Ablations (ABLATION=1): no screening; and no screening with every feature active from the start
        # (h >= p), i.e. plain PrimDual / coordinate descent over all p features with the same certificate.
        ("subset-no-screening", ["--solver", "subset", "--no-screening"] + sub),
        ("subset-all-features", ["--solver", "subset", "--no-screening", "--c", "1e6"] + sub),
    ] if ABLATION else []):
        if ONLY and name not in ONLY:
            continue
        model, fields = thresher(path, args)
        beta = dense(model, P)
        results[name] = (beta, float(fields["seconds"]), float(fields["gap"]) if name != "diht" else None)
    if not PEERS:
        os.remove(path)
        return score(x, y, truth, lam, k, n, snr, copy, results)
    started = time.perf_counter()
    # abess at the true support size with a ridge matched to ours: its stationarity on unit-norm columns is
    # x_j.r = (alpha / n) b_j, ours x_j.r = 2 lambda2 b_j (checked numerically), so alpha = 2 n lambda2.
    model = abess.LinearRegression(support_size=[k], alpha=[2 * n * l2], fit_intercept=False)
    model.fit(x, y)
    results["abess"] = (np.asarray(model.coef_, dtype=float), time.perf_counter() - started, None)
    if HAVE_L0LEARN:
        started = time.perf_counter()
        # L0Learn scales y to unit norm before solving, so its lambda0 is the paper's over ||y||^2 (gamma, the
        # ridge, is unchanged by that scaling; checked: its solution then meets the paper's stationarity
        # x_j.r = 2 lambda2 b_j on the support, and no zero coordinate passes the entry threshold). A user grid
        # leaves num_gamma/num_lambda unset (l0learn 0.4.3 refuses both). L0L2 has no l1 term: the l1 part of
        # the paper's objective is scored, not optimised, by L0Learn.
        l0_scaled = l0 / float(y @ y)
        fit = l0learn.fit(x, y, penalty="L0L2", algorithm="CDPSI", lambda_grid=[[l0_scaled]], gamma_max=l2,
                          gamma_min=l2, num_gamma=None, num_lambda=None, intercept=False, max_support_size=P)
        coef = np.asarray(fit.coeff(lambda_0=l0_scaled, gamma=l2, include_intercept=False).todense()).ravel()
        results["l0learn"] = (coef, time.perf_counter() - started, None)
    os.remove(path)
    return score(x, y, truth, lam, k, n, snr, copy, results)


def score(x, y, truth, lam, k, n, snr, copy, results):
    truth_support = truth != 0
    rows = []
    for name, (beta, seconds, own_gap) in results.items():
        primal, gap = objective(x, y, beta, lam)
        found = beta != 0
        rows.append({
            "solver": name, "snr": snr, "n": n, "copy": copy, "k_true": k,
            "seconds": seconds, "primal": primal,
            "gap": own_gap if own_gap is not None else gap,
            "nnz": int(found.sum()),
            "pssr": float((found & truth_support).sum() / truth_support.sum()),
            "precision": float((found & truth_support).sum() / max(1, found.sum())),
            "error": float(np.linalg.norm(beta - truth) / np.linalg.norm(truth)),
        })
    return rows


KEYS = ["solver", "snr", "n", "copy", "k_true", "seconds", "primal", "gap", "nnz", "pssr", "precision", "error"]


def summarize(rows):
    """Means over copies, one markdown row per (SNR, n, solver), plus time ratios to subset."""
    print("| SNR | n | solver | copies | seconds | x subset time | P | gap | nnz | PSSR | precision | rel. error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    solvers = []
    for r in rows:
        if r["solver"] not in solvers:
            solvers.append(r["solver"])
    for snr in sorted({r["snr"] for r in rows}, reverse=True):
        for n in sorted({r["n"] for r in rows}):
            base = [r["seconds"] for r in rows if r["snr"] == snr and r["n"] == n and r["solver"] == "subset"]
            for s in solvers:
                rs = [r for r in rows if r["snr"] == snr and r["n"] == n and r["solver"] == s]
                if not rs:
                    continue
                m = lambda key: float(np.mean([r[key] for r in rs]))
                ratio = m("seconds") / float(np.mean(base)) if base else float("nan")
                print(f"| {snr:g} | {n} | {s} | {len(rs)} | {m('seconds'):.3f} | {ratio:.1f} | {m('primal'):.4g} | "
                      f"{m('gap'):.2e} | {m('nnz'):.1f} | {m('pssr'):.3f} | {m('precision'):.3f} | {m('error'):.3f} |")


def read_csv(path):
    rows = []
    with open(path) as f:
        header = f.readline().strip().split(",")
        for line in f:
            v = dict(zip(header, line.strip().split(",")))
            rows.append({k: (v[k] if k == "solver" else float(v[k])) for k in header})
    return rows


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--summarize":
        summarize(read_csv(sys.argv[2]))
        return
    out_csv = os.path.join(DATA, os.environ.get("OUT", "results.csv"))
    os.makedirs(DATA, exist_ok=True)
    all_rows = []
    # Copies outermost, so a run cut short still covers every setting.
    with open(out_csv, "w") as f:
        f.write(",".join(KEYS) + "\n")
        for copy in range(COPIES):
            for snr in SNRS:
                for n in NS:
                    for row in run_one(n, snr, copy):
                        all_rows.append(row)
                        f.write(",".join(str(row[k]) for k in KEYS) + "\n")
                        f.flush()
            print(f"done copy {copy + 1}/{COPIES}", file=sys.stderr, flush=True)
    print(f"p={P} copies={COPIES} l0learn={'yes' if HAVE_L0LEARN else 'not installable (no wheel for this Python)'}")
    summarize(all_rows)


if __name__ == "__main__":
    main()
