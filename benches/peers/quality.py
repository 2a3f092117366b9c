"""Model quality side by side: thresher (`fit` and the daemon) against Vowpal Wabbit, scikit-learn SGD,
liblinear L1 logistic tuned to <= 100 nonzeros, and River, on the same files in one run.

Run through `benches/run quality` (it makes bench-venv/, builds thresher and the W3-like stream). Data sets:
  w3               benches/harness/w3_stream.rs: d = 2^20, 40 nonzeros per sample, 100 true features, labels the
                   sign of w.x (the load generator's stream); 1M train + 100k test (--quick: 100k + 20k)
  rotten_tomatoes  text (tf-idf), 25% held out by a seeded split, the same split for every method
  trump_tweets     text (tf-idf), likewise
Per method: held-out accuracy, nonzeros, wall seconds end to end (parse + learn; the daemon: first POST to
the published model covering every training sample) and training samples per second over that time.
Scoring the held-out part is outside the timed span. Writes a Markdown report (--out) and the raw rows as
JSON lines beside the split files (WORK/results.jsonl).
"""
import argparse
import datetime
import http.client
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT_SETS = ["rotten_tomatoes", "trump_tweets"]
K = 100


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def floats(text):
    return [float(v) for v in text.split(",") if v]


# ---------------------------------------------------------------------------------------------- data


class DataSet:
    def __init__(self, name, train, test, dim, stream, note):
        self.name, self.train, self.test, self.dim, self.stream, self.note = name, train, test, dim, stream, note
        self.n_train = count_lines(train)
        self.n_test = count_lines(test)
        self.y_test = labels(test)
        self.vw_train = self.vw_test = None

    def vw_files(self, work):
        """VW's own text format (`label | idx:val ...`), written once before any clock starts."""
        if self.vw_train is None:
            self.vw_train = os.path.join(work, f"{self.name}.train.vw")
            self.vw_test = os.path.join(work, f"{self.name}.test.vw")
            for src, dst in ((self.train, self.vw_train), (self.test, self.vw_test)):
                with open(src) as f, open(dst + ".partial", "w") as g:
                    for line in f:
                        label, _, feats = line.strip().partition(" ")
                        g.write(f"{int(float(label))} | {feats}\n")
                os.replace(dst + ".partial", dst)
        return self.vw_train, self.vw_test


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def labels(path):
    with open(path) as f:
        return np.array([float(line.split(None, 1)[0]) for line in f if line.strip()])


def split_text(src, work, name, seed, held_out):
    """Seeded line split: the same train/test files feed every method."""
    with open(src) as f:
        lines = [line if line.endswith("\n") else line + "\n" for line in f if line.strip()]
    perm = np.random.default_rng(seed).permutation(len(lines))
    n_test = int(round(held_out * len(lines)))
    # The training part keeps the permuted order: the files are in collection order (trump_tweets drifts from
    # one class to the other over the file), which would turn a one-pass learner's result into a measure of
    # that drift rather than of the learner.
    test_idx, train_idx = np.sort(perm[:n_test]), perm[n_test:]
    train, test = os.path.join(work, f"{name}.train.svm"), os.path.join(work, f"{name}.test.svm")
    for path, idx in ((train, train_idx), (test, test_idx)):
        with open(path + ".partial", "w") as g:
            g.writelines(lines[i] for i in idx)
        os.replace(path + ".partial", path)
    dim = 1 + max(int(tok.split(":")[0]) for line in lines for tok in line.split()[1:])
    return train, test, dim, len(lines)


def accuracy(y, scores):
    return float(np.mean((np.asarray(scores) >= 0) == (y > 0)))


# ----------------------------------------------------------------------------------------- thresher


def thresher_predict(args, model_path, ds):
    out = subprocess.run([args.bin, "predict", "--model", model_path, "--scores", ds.test],
                         capture_output=True, text=True, timeout=args.timeout, check=True).stdout
    scores = np.array([float(v) for v in out.split()])
    if len(scores) != ds.n_test:
        raise RuntimeError(f"predict gave {len(scores)} scores for {ds.n_test} samples")
    return accuracy(ds.y_test, scores)


def model_nnz(model):
    return int(sum(1 for w in model["weights"] if w != 0.0))


def run_fit(args, ds, solver, loss, lam, extra, work):
    model_path = os.path.join(work, f"{ds.name}.fit.{solver}.{loss}.{lam}.json")
    cmd = [args.bin, "fit", ds.train, "--solver", solver, "--loss", loss, "-k", str(K), "--lambda", lam,
           "--out", model_path] + extra
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    summary = (proc.stdout + proc.stderr).strip().splitlines()
    summary = next((l for l in reversed(summary) if l.startswith("solver=")), "")
    fields = dict(kv.split("=", 1) for kv in summary.split() if "=" in kv)
    with open(model_path) as f:
        model = json.load(f)
    note = f"gap {fields.get('gap', '?')}, {fields.get('epochs', '?')} epochs, stop {fields.get('stop', '?')}"
    if lam == "auto":
        note = f"chose lambda {model['lambda']:g}; refit {note}"
    return dict(acc=thresher_predict(args, model_path, ds), nnz=model_nnz(model), seconds=seconds,
                samples=ds.n_train, note=note)


class Daemon:
    """The release binary on 127.0.0.1:0 with a fresh data directory; its log goes to a file."""

    def __init__(self, args, env, work):
        self.data_dir = tempfile.mkdtemp(prefix="thresher-quality-", dir=work)
        self.log_path = os.path.join(self.data_dir, "daemon.log")
        self.log = open(self.log_path, "w")
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("THRESHER_")}
        full_env.update(env)
        self.proc = subprocess.Popen([args.bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", self.data_dir,
                                      "--fresh"], stdout=subprocess.DEVNULL, stderr=self.log, env=full_env)
        deadline = time.time() + 60
        self.addr = None
        while self.addr is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}: {self.tail()}")
            if time.time() > deadline:
                raise RuntimeError("daemon did not start listening within 60 s")
            with open(self.log_path) as f:
                m = re.search(r"listening on (\S+?),?\s", f.read())
            if m:
                self.addr = m.group(1)
            else:
                time.sleep(0.05)
        host, port = self.addr.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=120)

    def tail(self):
        with open(self.log_path) as f:
            text = f.read()
        at = text.find("Error:")  # a refused start names the problem first; a backtrace may follow
        return text[at:at + 400] if at >= 0 else text[-400:]

    def request(self, method, path, body=None, headers=None):
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=body, headers=headers or {})
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except (http.client.HTTPException, ConnectionError):
                if attempt == 1:
                    raise
                self.conn.close()  # reconnect once: the server may have closed an idle keep-alive

    def stop(self):
        self.conn.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)


# How long the daemon's served lambda and support must hold before a text set's model is scored, and
# the longest wait for that.
SETTLE_S = 3.0
SETTLE_MAX_S = 20.0


def run_daemon(args, ds, solver, loss, lam, work):
    capacity = ds.n_train if not ds.stream else args.window
    env = {
        "THRESHER_LEARNER_SOLVER": solver,
        "THRESHER_LEARNER_LOSS": loss,
        "THRESHER_LEARNER_K": str(K),
        "THRESHER_LEARNER_LAMBDA": lam,
        "THRESHER_WINDOW_CAPACITY": str(capacity),
        "THRESHER_INGEST_MAX_DIM": str(ds.dim),
        "THRESHER_INGEST_MAX_NAMED_FEATURES": "0",
        "THRESHER_LOG": "info",
    }
    for kv in args.daemon_env:
        key, _, value = kv.partition("=")
        env[key] = value
    # Bodies are cut before the clock starts: the client's file reading is not the daemon's time.
    bodies = []
    batch = args.batch if ds.stream else args.text_batch
    with open(ds.train, "rb") as f:
        chunk = []
        for line in f:
            chunk.append(line)
            if len(chunk) == batch:
                bodies.append((b"".join(chunk), len(chunk)))
                chunk = []
        if chunk:
            bodies.append((b"".join(chunk), len(chunk)))
    daemon = Daemon(args, env, work)
    try:
        retries = 0
        started = time.perf_counter()
        for body, n in bodies:
            while True:
                status, reply = daemon.request("POST", "/v1/samples", body, {"Content-Type": "text/plain"})
                if status == 202:
                    break
                if status == 503:
                    retries += 1
                    time.sleep(0.01)
                    continue
                raise RuntimeError(f"POST /v1/samples: {status} {reply[:300]!r}")
        sent = time.perf_counter() - started
        deadline = time.perf_counter() + args.timeout
        while True:
            status, reply = daemon.request("GET", "/v1/model")
            if status == 200:
                model = json.loads(reply)
                if model.get("samples_seen", 0) >= ds.n_train:
                    break
            if time.perf_counter() > deadline:
                raise RuntimeError(f"model still behind after {args.timeout} s: {reply[:200]!r}")
            if daemon.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {daemon.proc.returncode}: {daemon.tail()}")
            time.sleep(0.02)
        seconds = time.perf_counter() - started
        covered = seconds
        if not ds.stream:
            # The window holds the whole training part and the learners keep improving on it after the
            # last POST (and `lambda = "auto"` moves the served lambda once a member has led on the
            # held-out samples at three certificates in a row, 1.5 s at the default 500 ms snapshot
            # interval): score the model once its live lambda and support have held for SETTLE_S
            # seconds (at most SETTLE_MAX_S), and note both times.
            settle_deadline = time.perf_counter() + SETTLE_MAX_S
            key = lambda m: (m.get("lambda"), tuple(m.get("support", [])))
            last, held_since = key(model), time.perf_counter()
            while time.perf_counter() < settle_deadline and time.perf_counter() - held_since < SETTLE_S:
                time.sleep(0.1)
                status, fresh = daemon.request("GET", "/v1/model")
                if status == 200:
                    reply, model = fresh, json.loads(fresh)
                    if key(model) != last:
                        last, held_since = key(model), time.perf_counter()
            seconds = time.perf_counter() - started
        model_path = os.path.join(work, f"{ds.name}.daemon.{solver}.{loss}.{lam}.json")
        with open(model_path, "wb") as f:
            f.write(reply)
        cert = model.get("certificate", {})
        gap = cert.get("gap")
        settled = "" if ds.stream else f"all seen at {covered:.1f} s, settled at {seconds:.1f} s, "
        note = (f"window {capacity}, batches of {batch}, POSTs done at {sent:.1f} s, {settled}503 retries {retries}, "
                f"gap {gap:.3g}, version {model.get('version')}, live lambda {model.get('lambda'):g}"
                if isinstance(gap, (int, float)) else
                f"window {capacity}, gap {gap}")
        return dict(acc=thresher_predict(args, model_path, ds), nnz=model_nnz(model), seconds=seconds,
                    samples=ds.n_train, note=note)
    finally:
        daemon.stop()


# -------------------------------------------------------------------------------------------- peers


def run_vw(args, ds, l1, work):
    import vowpalwabbit

    train, test = ds.vw_files(work)
    model = os.path.join(work, f"{ds.name}.vw.model")
    preds = os.path.join(work, f"{ds.name}.vw.pred")
    readable = os.path.join(work, f"{ds.name}.vw.readable")
    bits = args.vw_bits
    started = time.perf_counter()
    ws = vowpalwabbit.Workspace(arg_list=["-d", train, "--loss_function", "logistic", "-b", str(bits), "--l1",
                                          str(l1), "--quiet", "-f", model])
    ws.run_parser()  # VW's own reader and learner, one pass
    ws.finish()
    seconds = time.perf_counter() - started
    ws = vowpalwabbit.Workspace(arg_list=["-t", "-i", model, "-d", test, "-p", preds, "--quiet"])
    ws.run_parser()
    ws.finish()
    scores = np.loadtxt(preds, ndmin=1)
    # The saved model holds the l1-truncated weights (VW truncates lazily while learning, so a readable model
    # written at the end of training still lists them): reload it and count what is nonzero.
    ws = vowpalwabbit.Workspace(arg_list=["-t", "-i", model, "--readable_model", readable, "--quiet"])
    ws.finish()
    constant = 11650396 & ((1 << bits) - 1)  # VW's bias feature
    nnz = 0
    with open(readable) as f:
        for line in f:
            head, sep, rest = line.partition(":")
            if sep and head.isdigit() and int(head) != constant and float(rest.split()[0]) != 0.0:
                nnz += 1
    return dict(acc=accuracy(ds.y_test, scores), nnz=nnz, seconds=seconds, samples=ds.n_train,
                note=f"-b {bits}, hashed slots")


def load_sklearn(ds):
    import scipy.sparse
    from sklearn.datasets import load_svmlight_file

    def load(path):
        x, y = load_svmlight_file(path, n_features=ds.dim, zero_based=True)
        # Recent scipy gives int64 index arrays, which SGDClassifier and liblinear refuse.
        x = scipy.sparse.csr_matrix((x.data, x.indices.astype(np.int32), x.indptr.astype(np.int32)), shape=x.shape)
        return x, y

    started = time.perf_counter()
    x, y = load(ds.train)
    parse = time.perf_counter() - started
    xt, yt = load(ds.test)
    return x, y, xt, yt, parse


def run_sgd(args, ds, data, penalty, alpha):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier

    x, y, xt, yt, parse = data
    # The stream gets one pass, as VW and River; the text sets SGD's default epochs (to its tol).
    kw = dict(max_iter=1, tol=None) if ds.stream else {}
    model = SGDClassifier(loss="log_loss", penalty=penalty, alpha=alpha, random_state=0, **kw)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(x, y)
    fit = time.perf_counter() - started
    return dict(acc=accuracy(yt, model.decision_function(xt)), nnz=int(np.count_nonzero(model.coef_)),
                seconds=parse + fit, samples=ds.n_train,
                note=f"parse {parse:.1f} s + fit {fit:.1f} s, {model.n_iter_} epoch(s)")


def run_liblinear(args, ds, data):
    """L1 logistic (liblinear), C searched on a log grid, then bisected, for the largest C found with at most
    K nonzeros; the chosen C is refitted and timed on its own."""
    import sklearn
    from sklearn.linear_model import LogisticRegression

    x, y, xt, yt, parse = data
    # scikit-learn 1.8 deprecates `penalty` (removed in 1.10) for `l1_ratio`.
    version = tuple(int(v) for v in re.findall(r"\d+", sklearn.__version__)[:2])
    l1 = dict(l1_ratio=1.0) if version >= (1, 8) else dict(penalty="l1")

    def fit(c):
        m = LogisticRegression(solver="liblinear", C=c, tol=args.liblinear_tol, **l1)
        t = time.perf_counter()
        m.fit(x, y)
        return m, time.perf_counter() - t, int(np.count_nonzero(m.coef_))

    tried = []
    tuning = 0.0

    def probe(c):
        nonlocal tuning
        _, t, nnz = fit(c)
        tuning += t
        tried.append((c, nnz))
        return nnz

    # Bracket K on a sqrt(10) grid from c0 (down while too many nonzeros, up while too few), then bisect
    # log C. Exactly K nonzeros ends the search: on the stream the true support holds the count at K over
    # a wide range of C, and larger C there only costs liblinear more iterations.
    step = 10 ** 0.5
    lo, hi = None, None  # the largest C seen with nnz <= K; the smallest with nnz > K
    c = args.liblinear_cn / ds.n_train  # C multiplies a sum of n losses: start at the same C n on every set
    nnz = probe(c)
    while nnz > K and len(tried) < 12:
        hi, c = c, c / step
        nnz = probe(c)
    if nnz <= K:
        lo = c
    while nnz < K and hi is None and len(tried) < 12:
        c *= step
        nnz = probe(c)
        if nnz <= K:
            lo = c
        else:
            hi = c
    for _ in range(args.liblinear_bisect):
        if lo is None or hi is None or tried[-1][1] == K:
            break
        mid = (lo * hi) ** 0.5
        if probe(mid) <= K:
            lo = mid
        else:
            hi = mid
    if lo is None:
        raise RuntimeError(f"no C gives <= {K} nonzeros: {tried}")
    model, final, nnz = fit(lo)
    grid = ", ".join(f"{c:.3g}:{n}" for c, n in tried)
    return dict(acc=accuracy(yt, model.decision_function(xt)), nnz=nnz, seconds=parse + tuning + final,
                samples=ds.n_train, tuning=tuning, final=final, parse=parse, c=lo,
                note=f"C = {lo:.3g}; parse {parse:.1f} s + tuning {tuning:.1f} s ({len(tried)} fits) + final fit "
                     f"{final:.1f} s; C:nonzeros {grid}")


def run_river(args, ds, l1):
    from river import linear_model, optim

    n = min(ds.n_train, args.river_samples)
    started = time.perf_counter()
    model = linear_model.LogisticRegression(optimizer=optim.SGD(0.1), l1=l1)
    with open(ds.train) as f:
        for i, line in enumerate(f):
            if i >= n:
                break
            label, *feats = line.split()
            model.learn_one({int(k): float(v) for k, v in (t.split(":") for t in feats)}, float(label) > 0)
    seconds = time.perf_counter() - started
    scores = []
    with open(ds.test) as f:
        for line in f:
            label, *feats = line.split()
            p = model.predict_proba_one({int(k): float(v) for k, v in (t.split(":") for t in feats)})
            scores.append(p.get(True, 0.0) - 0.5)
    nnz = sum(1 for w in model.weights.values() if w != 0.0)
    note = "parse + learn_one, SGD(0.1)" + (f"; first {n} of {ds.n_train} samples" if n < ds.n_train else "")
    return dict(acc=accuracy(ds.y_test, scores), nnz=nnz, seconds=seconds, samples=n, note=note)


# ------------------------------------------------------------------------------------------- report


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 2**20:.0f} GiB"
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), {mem} RAM, {platform.system()} {platform.release()}"


def versions():
    out = [f"Python {platform.python_version()}"]
    for mod, name in (("vowpalwabbit", "vowpalwabbit"), ("sklearn", "scikit-learn"), ("river", "river"),
                      ("numpy", "numpy"), ("scipy", "scipy")):
        try:
            out.append(f"{name} {__import__(mod).__version__}")
        except Exception:
            out.append(f"{name} (not importable)")
    return ", ".join(out)


def git(*a):
    try:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return "?"


def fmt_rate(v):
    return f"{v:,.0f}".replace(",", " ")


def render(args, meta, sets, rows):
    out = [
        "# Model quality against the peers: thresher `fit` and daemon, Vowpal Wabbit, scikit-learn, liblinear, River",
        "",
        "Written by `benches/run quality` (`benches/peers/quality.py`); every figure below comes from one run of it,",
        "peers included, on the same files in the same minutes.",
        "",
        f"- **Command**: `{meta['command']}`",
        f"- **Measured**: {meta['started']} to {meta['ended']} (UTC), load average at start {meta['loadavg']}",
        f"- **Build**: thresher commit `{meta['commit']}`{' (working tree dirty)' if meta['dirty'] else ''}, "
        f"release binary `{os.path.relpath(args.bin, ROOT)}`",
        f"- **Machine**: {meta['machine']}. The machine is shared with other jobs (builds, tests) while this",
        "  runs: absolute times drift by up to 1.5x within minutes; compare within a table, and read the",
        "  ratios, which are taken between rows measured minutes apart.",
        f"- **Peers**: {meta['versions']}",
    ] + ([f"- **Note**: {args.note}"] if args.note else []) + [
        "",
        "## How each method is run and timed",
        "",
        f"- **Data.** `w3`: `benches/harness/w3_stream.rs` (d = 2^20, 40 nonzeros per sample, 100 true features, labels",
        "  the sign of `w.x`, seed 7: the load generator's stream), train and test drawn from one truth. Text sets:",
        f"  `{args.real}/NAME.svm` split by a seeded permutation (seed {args.seed}), {args.held_out:.0%} held out, the",
        "  training part in permuted order (the files are in collection order, and trump_tweets drifts from one",
        "  class to the other: one-pass learners would measure the drift); every method reads the same files.",
        f"- **thresher fit**: `thresher fit TRAIN --solver S --loss L -k {K} --lambda LAMBDA --out M` (w3: `--epochs 1`,",
        f"  one pass; text: `--intercept --time-budget {args.text_budget:g}`), timed as a whole process (parse, solve,",
        "  certify, write); scored with `thresher predict --model M --scores TEST`. The note gives the certificate's",
        "  gap, the epochs run and why it stopped (`stalled`: `--patience` 10 certified epochs without a 1% smaller",
        "  gap). `lambda auto` rows (text sets, SDIHT): `--lambda auto` with its defaults (5 lambdas from 0.1 to 1e-5",
        "  on a seeded 20% hold-out, each warm-started from the last, then a refit on all the training part).",
        "- **thresher daemon**: the release binary (`serve --listen 127.0.0.1:0 --data-dir FRESH --fresh`), the",
        f"  training file POSTed as LIBSVM bodies of {args.batch} lines on w3 and {args.text_batch} on the text sets over",
        "  one keep-alive connection (a 503 is retried after 10 ms), with the daemon's defaults (SDIHT: the",
        "  coordinate step for logistic; `lambda = \"auto\"`: ranked on held-out samples), timed from the first",
        "  POST until `GET /v1/model` shows `samples_seen` covering",
        "  every training sample (w3; that model is scored with `thresher predict`) or, on the text sets, until the",
        f"  served lambda and support have then held for {SETTLE_S:g} s (at most {SETTLE_MAX_S:g} s; the note gives both times). The window holds the whole",
        f"  training part on the text sets and `window.capacity = {args.window}` on w3 (a stream).",
        f"- **Vowpal Wabbit**: one pass, `--loss_function logistic -b {args.vw_bits} --l1 L1` on VW's own reader",
        "  (`Workspace.run_parser`, the file converted to VW's text format before the clock); several `--l1`",
        "  values, every one reported. Nonzeros are counted in the saved (truncated) model, in hashed slots.",
        "  The row used for the `x VW` ratios is the VW row with the best held-out accuracy (the peer's best).",
        "- **scikit-learn SGDClassifier** (`log_loss`, `l1` or `elasticnet`): time = `load_svmlight_file` +",
        "  `fit`; one epoch on w3 (`max_iter=1`), the default epochs (to `tol`) on the text sets.",
        f"- **liblinear L1 logistic** (`LogisticRegression(solver='liblinear', l1_ratio=1, tol={args.liblinear_tol:g})`, i.e. `penalty='l1'`):",
        f"  C from {args.liblinear_cn:g} / n_train by factors of sqrt(10) until {K} nonzeros are bracketed, then up to",
        f"  {args.liblinear_bisect} bisection steps on log C (exactly {K} nonzeros ends the search); the largest C",
        f"  found with <= {K} nonzeros is refitted. Its time is parse + tuning +",
        "  final fit (each part in the note); the `acc - liblinear` and `time / liblinear` columns use this row",
        "  and that total.",
        "- **River** `LogisticRegression(optimizer=SGD(0.1), l1=L1)`: one pass of `learn_one` including the",
        f"  parsing of each line; on w3 only the first {args.river_samples} samples (River runs at ~10^4",
        "  samples/s; its samples/s is over what it learned).",
        "- **samples/s** = training samples learned / wall seconds. Scoring the test part is never timed.",
        "",
    ]
    for ds in sets:
        drows = [r for r in rows if r["data"] == ds.name]
        vw_ok = [r for r in drows if r["method"] == "vw" and "acc" in r]
        vw = max(vw_ok, key=lambda r: r["acc"]) if vw_ok else None
        lib = next((r for r in drows if r["method"] == "liblinear" and "acc" in r), None)
        out += [f"## {ds.name}", "",
                f"{ds.note}: {ds.n_train} train, {ds.n_test} test, d = {ds.dim}.", "",
                "| method | setting | held-out acc | nonzeros | wall s | samples/s | x VW samples/s | acc - liblinear (points) | time / liblinear | note |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in drows:
            if "acc" not in r:
                out.append(f"| {r['method']} | {r['setting']} | failed | | | | | | | {r['error']} |")
                continue
            rate = r["samples"] / r["seconds"]
            vw_ratio = f"{rate / (vw['samples'] / vw['seconds']):.2f}" if vw else ""
            gap = f"{100 * (r['acc'] - lib['acc']):+.1f}" if lib else ""
            tratio = f"{r['seconds'] / lib['seconds']:.2f}" if lib else ""
            out.append(f"| {r['method']} | {r['setting']} | {100 * r['acc']:.2f}% | {r['nnz']} | {r['seconds']:.1f} | "
                       f"{fmt_rate(rate)} | {vw_ratio} | {gap} | {tratio} | {r['note']} |")
        if lib:
            out += ["", f"liblinear: tuning {lib['tuning']:.1f} s, final fit {lib['final']:.1f} s, together "
                        f"{lib['tuning'] + lib['final']:.1f} s (plus parsing {lib['parse']:.1f} s) at C = {lib['c']:.3g}."]
        out.append("")
    out += ["Raw rows: `" + os.path.relpath(os.path.join(args.work, "results.jsonl"), ROOT) + "` (git-ignored).", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--w3", required=True, help="directory with train.svm and test.svm (benches/harness/w3_stream.rs)")
    p.add_argument("--real", required=True, help="directory with rotten_tomatoes.svm and trump_tweets.svm")
    p.add_argument("--work", default=os.path.join(ROOT, "data", "quality"), help="split files, models, raw rows")
    p.add_argument("--out", help="the report (default WORK/quality.md)")
    p.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "thresher"))
    p.add_argument("--command", default="benches/run quality", help="command line recorded in the report")
    p.add_argument("--commit", help="the measured build's commit (default: this tree's HEAD)")
    p.add_argument("--quick", action="store_true", help="fewer settings (for trying the script)")
    p.add_argument("--note", default="", help="a line for the report's header (e.g. what else ran)")
    p.add_argument("--resume", action="store_true",
                   help="keep the rows of WORK/results.jsonl (an interrupted run) and measure only the missing ones")
    p.add_argument("--sets", default="w3," + ",".join(TEXT_SETS))
    p.add_argument("--methods", default="fit,daemon,vw,sgd,liblinear,river")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--held-out", type=float, default=0.25)
    p.add_argument("--lambda", dest="lam", default="1e-4", help="thresher's lambda (fit and daemon)")
    p.add_argument("--text-budget", type=float, default=15.0, help="fit --time-budget on the text sets, s")
    p.add_argument("--daemon-env", action="append", default=[], help="extra KEY=VALUE for the daemon")
    p.add_argument("--batch", type=int, default=10000, help="lines per POST on w3")
    p.add_argument("--text-batch", type=int, default=500,
                   help="lines per POST on the text sets: a stream of small bodies, so that the daemon's "
                        "progressive validation (each sample predicted before it is learned) can rank "
                        "lambda = auto's members; one body of the whole set would be predicted by every "
                        "member's empty model")
    p.add_argument("--window", type=int, default=100000, help="daemon window on w3")
    p.add_argument("--vw-bits", type=int, default=24)
    p.add_argument("--vw-l1-w3", default="1e-7,1e-6,3e-6")
    p.add_argument("--vw-l1-text", default="1e-6,1e-5,1e-4")
    p.add_argument("--sgd-alphas-w3", default="1e-5,1e-4")
    p.add_argument("--sgd-alphas-text", default="1e-5,1e-4,1e-3")
    p.add_argument("--liblinear-cn", type=float, default=100.0, help="liblinear's first C, times n_train")
    p.add_argument("--liblinear-bisect", type=int, default=3)
    p.add_argument("--liblinear-tol", type=float, default=1e-4)
    p.add_argument("--river-l1", default="1e-4,1e-3")
    p.add_argument("--river-samples", type=int, default=100000)
    p.add_argument("--timeout", type=float, default=900.0, help="per method, s")
    args = p.parse_args()
    args.bin = os.path.abspath(args.bin)
    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    if args.quick:
        args.text_budget = min(args.text_budget, 3.0)
    if args.out is None:
        args.out = os.path.join(args.work, "quality.md")
    methods = args.methods.split(",")

    with open("/proc/loadavg") as f:
        loadavg = f.read().split()[0]
    meta = dict(command=args.command, started=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
                loadavg=loadavg, commit=args.commit or git("rev-parse", "--short", "HEAD"),
                dirty=bool(git("status", "--porcelain", "--untracked-files=no")), machine=machine(),
                versions=versions())

    sets = []
    for name in args.sets.split(","):
        if name == "w3":
            sets.append(DataSet("w3", os.path.join(args.w3, "train.svm"), os.path.join(args.w3, "test.svm"),
                                1 << 20, True, "W3-like stream (benches/harness/w3_stream.rs)"))
        else:
            train, test, dim, n = split_text(os.path.join(args.real, f"{name}.svm"), args.work, name, args.seed,
                                             args.held_out)
            sets.append(DataSet(name, train, test, dim, False, f"text, tf-idf; {n} samples split seeded"))

    rows = []
    results_path = os.path.join(args.work, "results.jsonl")
    earlier = {}
    if args.resume and os.path.exists(results_path):
        with open(results_path) as f:
            for line in f:
                r = json.loads(line)
                if "acc" in r:
                    earlier[(r["data"], r["method"], r["setting"])] = r
    results = open(results_path, "w")

    def record(ds, method, setting, fn):
        if (ds.name, method, setting) in earlier:
            row = earlier.pop((ds.name, method, setting))
            rows.append(row)
            results.write(json.dumps(row) + "\n")
            return
        log(f"{ds.name}: {method} {setting}")
        row = dict(data=ds.name, method=method, setting=setting)
        try:
            row.update(fn())
            log(f"  acc={row['acc']:.4f} nnz={row['nnz']} seconds={row['seconds']:.2f}")
        except Exception as e:  # one method failing must not lose the others' rows
            row["error"] = f"{type(e).__name__}: {str(e)[:200]}".replace("|", "/").replace("\n", " ")
            log(f"  failed: {row['error']}")
        rows.append(row)
        results.write(json.dumps(row) + "\n")
        results.flush()

    for ds in sets:
        losses = ["logistic"] if ds.stream or args.quick else ["logistic", "hinge"]
        fit_extra = ["--epochs", "1"] if ds.stream else ["--intercept", "--time-budget", str(args.text_budget)]
        # On the text sets lambda is also chosen by thresher itself: `fit --lambda auto` (SDIHT) and the
        # daemon's `lambda = "auto"` grid, intercept on (the daemon's default for logistic loss).
        lambdas = [args.lam] if ds.stream else [args.lam, "auto"]
        if "fit" in methods:
            for solver in ("sdiht", "mirror"):
                for loss in losses:
                    for lam in lambdas if solver == "sdiht" else [args.lam]:
                        record(ds, "thresher fit", f"{solver}, {loss}, lambda {lam}",
                               lambda: run_fit(args, ds, solver, loss, lam, fit_extra, args.work))
        if "daemon" in methods:
            for solver in ("sdiht", "mirror"):
                for lam in lambdas:
                    record(ds, "thresher daemon", f"{solver}, logistic, lambda {lam}",
                           lambda: run_daemon(args, ds, solver, "logistic", lam, args.work))
        if "vw" in methods:
            for l1 in floats(args.vw_l1_w3 if ds.stream else args.vw_l1_text):
                record(ds, "vw", f"--l1 {l1:g}", lambda: run_vw(args, ds, l1, args.work))
        loaded = {}

        def sk():  # parsed once per data set, and only when a row needs it (--resume may need none)
            if "data" not in loaded:
                loaded["data"] = load_sklearn(ds)
            return loaded["data"]

        if "sgd" in methods:
            for alpha in floats(args.sgd_alphas_w3 if ds.stream else args.sgd_alphas_text):
                for penalty in ("l1",) if args.quick else ("l1", "elasticnet"):
                    record(ds, "sklearn sgd", f"{penalty}, alpha {alpha:g}",
                           lambda: run_sgd(args, ds, sk(), penalty, alpha))
        if "liblinear" in methods:
            record(ds, "liblinear", f"L1 logistic, <= {K} nonzeros", lambda: run_liblinear(args, ds, sk()))
        loaded.clear()
        if "river" in methods:
            for l1 in floats(args.river_l1):
                record(ds, "river", f"l1 {l1:g}", lambda: run_river(args, ds, l1))
    results.close()
    meta["ended"] = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M")
    text = render(args, meta, sets, rows)
    with open(args.out + ".partial", "w") as f:
        f.write(text)
    os.replace(args.out + ".partial", args.out)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
