"""quality: held-out accuracy, nonzeros and speed of thresher against the peers, on the same files.

- quality: `benches/peers/quality.py`, `thresher fit` and the daemon against Vowpal Wabbit, scikit-learn
  SGD, liblinear L1 logistic (tuned to <= 100 nonzeros) and River on the W3-like stream
  (`benches/harness/w3_stream.rs`: 1M + 100k samples, quick 100k + 20k) and the text sets (data/real,
  when present or fetchable); the Markdown report is quality.md in the results folder;
- fit, fit_sdiht: one pass of `thresher fit` (mirror; sdiht) (logistic, k = 100, lambda 1e-4) over the W3 training file:
  the solver's epoch time, the process's wall time, the model's certificate and sha256 (identical
  across builds when a change is meant to be exact);
- real: `benches/peers/quality_real.py`, every real set of `benches/data/fetch.sh` (text with few long
  documents, rare positives, reviews; two regression sets) with 25% held out (or the set's own split):
  `fit --lambda auto` and the daemon's `lambda = "auto"` with their defaults, k = 100, against L1
  liblinear tuned to <= 100 nonzeros on an inner split (LassoCV at <= 100 nonzeros for regression);
  accuracy or R^2, nonzeros, fit time against the peer's tuning + final fit (report quality_real.md);
- repeats: `benches/peers/quality_repeats.py`, the two small seeded sets (convention_2012, 47 test
  documents; permeability, 41 molecules) over 10 seeded splits (quick: 3), every method on the same
  splits: mean, sd and per-seed figures (one split cannot resolve the 0.5-point target there);
- multiclass: `benches/peers/multiclass.py --shared 20`, the real many-class sets (tissue_gene_expression,
  7 classes; nci60, 13) and a planted shared-support set at the same number of distinct features:
  thresher's shared-support (softmax) and one-vs-rest models against liblinear one-vs-rest L1,
  scikit-learn multinomial L1 (saga), Vowpal Wabbit `--oaa` and River (accuracy, features, time);
- subset: best subset (l0 + l1 + l2) on Ren & Qian's Sec. 5.1 protocol, `benches/peers/subset.py`:
  thresher subset / dual-ast / diht against abess and L0Learn (L0Learn has wheels for CPython <= 3.10
  only: the suite runs it from pyenv's 3.10.13, or `PY310=/path/to/python3.10`, when python3 is newer).

Peers are pip-installed into bench-venv/ (and bench-venv-py310/); what cannot be installed is named in
the summary and the rest runs. Real data: `FETCH=/path/to/fetch.sh` (default benches/data/fetch.sh)
fills data/real when it lacks a set.
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import time

from common import ROOT, Bench, Command, Metric, Needs, Suite, venv

PEERS = ["numpy", "scipy", "scikit-learn", "vowpalwabbit", "river"]
PROBE = {"scikit-learn": "sklearn"}
TEXT_SETS = ["rotten_tomatoes", "trump_tweets"]
REAL = os.path.join(ROOT, "data", "real")
# What benches/data/fetch.sh writes (the real bench's sets).
MULTICLASS_SETS = ["tissue_gene_expression", "nci60"]
REAL_FILES = TEXT_SETS + ["convention_2012", "permeability", "ames"] + [
    f"{s}.{part}" for s in ("reuters_grain", "reuters_corn", "fine_foods") for part in ("train", "test")]


def w3_dir(ctx):
    return os.path.join(ROOT, "data", "w3-quick" if ctx.quick else "w3")


def wanted(ctx, bench):
    """Whether `--only` selects `bench` (the preparation skips what no selected benchmark reads)."""
    only = ctx.options.get("only")
    return not only or re.search(only, bench) is not None


def needs(ctx):
    return Needs(examples=["w3_stream"] if any(wanted(ctx, b) for b in ("quality", "fit", "fit_sdiht")) else [])


def prepare(ctx):
    ctx.py, missing = venv("bench-venv", PEERS, probe=PROBE)
    if missing:
        ctx.skip(f"quality: not installable, so not run: {', '.join(missing)}")
    have = set(PEERS) - set(missing)
    methods = ["fit", "daemon"] if "numpy" in have else []
    methods += ["vw"] if "vowpalwabbit" in have else []
    methods += ["sgd", "liblinear"] if {"scikit-learn", "scipy"} <= have else []
    methods += ["river"] if "river" in have else []
    ctx.methods = methods
    ctx.methods_have = have
    w3 = w3_dir(ctx)
    have_w3 = all(os.path.exists(os.path.join(w3, f)) for f in ("train.svm", "test.svm"))
    if any(wanted(ctx, b) for b in ("quality", "fit", "fit_sdiht")) and not have_w3:
        train, test = ("100000", "20000") if ctx.quick else ("1000000", "100000")
        ctx.sh([ctx.current.example("w3_stream"), "--train", train, "--test", test, "--out", w3],
               f"write the W3-like stream to {os.path.relpath(w3, ROOT)}")
    ctx.sets = ["w3"]
    if not all(os.path.exists(os.path.join(REAL, f"{s}.svm")) for s in REAL_FILES):
        fetch = os.environ.get("FETCH", os.path.join(ROOT, "benches", "data", "fetch.sh"))
        if os.path.exists(fetch):
            ctx.sh(["bash", fetch, REAL], "fetch the real sets", check=False)
    ctx.real = all(os.path.exists(os.path.join(REAL, f"{s}.svm")) for s in REAL_FILES)
    if not ctx.real:
        ctx.skip("real: data/real lacks sets of benches/data/fetch.sh: not run")
    if all(os.path.exists(os.path.join(REAL, f"{s}.svm")) for s in TEXT_SETS):
        ctx.sets += TEXT_SETS
    else:
        ctx.skip("quality: no data/real text sets (see benches/data/fetch.sh): W3 only")
    ctx.subset_py = subset_python(ctx) if wanted(ctx, "subset") else None


def subset_python(ctx):
    """bench-venv-py310 (CPython 3.10, for L0Learn's wheels) when python3 is newer and a 3.10 exists,
    else bench-venv; None without numpy and abess."""
    name, python = "bench-venv", "python3"
    if sys.version_info >= (3, 11):
        py310 = os.environ.get("PY310") or os.path.expanduser("~/.pyenv/versions/3.10.13/bin/python3.10")
        if os.path.exists(py310):
            name, python = "bench-venv-py310", py310
        else:
            ctx.skip("subset: no CPython 3.10 (set PY310=/path/to/python3.10): L0Learn not run")
    py, missing = venv(name, ["numpy<2", "abess"], python=python, probe={"numpy<2": "numpy"})
    if missing:
        ctx.skip(f"subset: could not install {', '.join(missing)} into {name}: best subset not run")
        return None
    _, missing = venv(name, ["l0learn==0.4.3"], python=python, probe={"l0learn==0.4.3": "l0learn"})
    if missing:
        ctx.skip(f"subset: could not install l0learn into {name}: runs without L0Learn")
    return py


def quality_cmd(ctx, build):
    if not ctx.methods:
        return None
    out = ctx.dir(f"quality-{build.key}")
    cmd = [ctx.py, os.path.join(ROOT, "benches", "peers", "quality.py"), "--w3", w3_dir(ctx), "--real", REAL,
           "--bin", build.thresher(), "--work", out, "--out", os.path.join(out, "quality.md"),
           "--commit", build.rev, "--command", "benches/run quality" + (" --quick" if ctx.quick else ""),
           "--methods", ",".join(ctx.methods), "--sets", ",".join(ctx.sets)]
    return Command(cmd + (["--quick", "--river-samples", "20000"] if ctx.quick else []))


def real_cmd(ctx, build):
    if not (ctx.real and {"fit", "liblinear"} <= set(ctx.methods)):
        return None
    runs = ctx.__dict__.setdefault("real_runs", {})
    runs[build.key] = runs.get(build.key, 0) + 1
    out = ctx.dir(f"real-{build.key}-{runs[build.key]}")  # one folder per run: the reports are kept
    return Command([ctx.py, os.path.join(ROOT, "benches", "peers", "quality_real.py"), "--real", REAL,
                    "--bin", build.thresher(), "--work", out, "--out", os.path.join(out, "quality_real.md"),
                    "--commit", build.rev, "--command", "benches/run quality --only real"])


def repeats_cmd(ctx, build):
    if not (ctx.real and {"fit", "liblinear"} <= set(ctx.methods)):
        return None
    out = ctx.dir(f"repeats-{build.key}")
    return Command([ctx.py, os.path.join(ROOT, "benches", "peers", "quality_repeats.py"), "--seeds",
                    "3" if ctx.quick else "10", "--work", out, "--sets", "convention_2012,permeability",
                    "--real", REAL, "--bin", build.thresher(), "--commit", build.rev,
                    "--command", "benches/run quality --only repeats"])


def parse_repeats(stdout, stderr):
    """quality_repeats.py's table: SET/METHOD/mean over the seeds."""
    out = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] not in ("set", "---"):
            try:
                out[f"{cells[0]}/{cells[1]}/mean".replace(" ", "_")] = float(cells[3])
            except ValueError:
                pass
    return out


def parse_real(stdout, stderr):
    """The JSON rows quality_real.py wrote: SET/METHOD/{accuracy,auc,r2,nnz,seconds}."""
    m = re.search(r"wrote (\S+)", stderr)
    if not m:
        return {}
    out = {}
    with open(os.path.join(os.path.dirname(m.group(1)), "results.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            for key, name in (("acc", "accuracy"), ("auc", "auc"), ("r2", "r2"), ("nnz", "nnz"),
                              ("seconds", "seconds")):
                if key in r:
                    out[f"{r['data']}/{r['method']}/{name}"] = r[key]
    return out


def parse_quality(stdout, stderr):
    """The JSON rows quality.py wrote (results.jsonl, named on its last log line)."""
    m = re.search(r"wrote (\S+)", stderr)
    if not m:
        return {}
    out = {}
    with open(os.path.join(os.path.dirname(m.group(1)), "results.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "acc" not in r:
                continue
            name = f"{r['data']}/{r['method']}/{r['setting']}".replace(" ", "_")
            out[f"{name}/accuracy"] = r["acc"]
            out[f"{name}/nnz"] = r["nnz"]
            out[f"{name}/seconds"] = r["seconds"]
    return out


def multiclass_cmd(ctx, build):
    if not ({"scikit-learn", "scipy"} <= set(ctx.methods_have) and
            all(os.path.exists(os.path.join(REAL, f"{s}.svm")) for s in MULTICLASS_SETS)):
        return None
    return Command([ctx.py, os.path.join(ROOT, "benches", "peers", "multiclass.py"), "--bin", build.thresher(),
                    "--data", REAL, "--shared", "20"])


def parse_multiclass(stdout, _stderr):
    """multiclass.py's table: SET/METHOD/{accuracy,features,seconds} (the method up to its first '(' or ',')."""
    out = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 8 or cells[0] in ("set", "---"):
            continue
        name = f"{cells[0].split(' ')[0]}/{re.split(r'[(,]', cells[4])[0].strip()}".replace(" ", "_")
        try:
            out[f"{name}/accuracy"] = float(cells[5].rstrip("%"))
            out[f"{name}/features"] = float(cells[6])
            out[f"{name}/seconds"] = float(cells[7])
        except ValueError:
            pass
    return out


def fit_cmd(ctx, build, solver="mirror"):
    return Command([sys.executable, __file__, "fit", build.thresher(), os.path.join(w3_dir(ctx), "train.svm"),
                    ctx.path(f"fit-{solver}-{build.key}.json"), solver])


def fit_sdiht_cmd(ctx, build):
    return fit_cmd(ctx, build, "sdiht")


def subset_cmd(ctx, build):
    if not ctx.subset_py:
        return None
    quick = {"COPIES": 1, "NS": "200", "SNRS": "20", "P": 1000} if ctx.quick else {}
    return Command([ctx.subset_py, os.path.join(ROOT, "benches", "peers", "subset.py")],
                   env=dict(quick, BIN=build.thresher(), DATA=ctx.dir(f"subset-{build.key}")))


def parse_subset(stdout, _stderr):
    """The summary table: `| SNR | n | solver | copies | seconds | x subset | P | gap | nnz | PSSR | ...`."""
    out = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 12 or not re.fullmatch(r"[\d.]+", cells[0]):
            continue
        name = f"snr={cells[0]}/n={cells[1]}/{cells[2]}"
        for key, i in (("seconds", 4), ("nnz", 8), ("pssr", 9), ("rel_error", 11)):
            out[f"{name}/{key}"] = float(cells[i])
    return out


def benches(ctx):
    return [
        Bench("quality", "fit and daemon vs VW, sklearn SGD, liblinear, River: held-out accuracy, nnz, time",
              quality_cmd, parse=parse_quality, runs=(1, 1), timeout=(1800, 14400)),
        Bench("real", "every real set: fit and daemon with lambda auto vs tuned L1 liblinear / LassoCV, held out",
              real_cmd, parse=parse_real, runs=(1, 3), timeout=(3600, 3600)),
        Bench("repeats", "the small seeded sets over 10 splits (quick: 3): fit, daemon and peer, mean and sd",
              repeats_cmd, parse=parse_repeats, runs=(1, 1), timeout=(3600, 3600)),
        Bench("multiclass", "many classes at 20 distinct features: softmax and ovr vs liblinear, saga, VW, River",
              multiclass_cmd, parse=parse_multiclass, runs=(1, 1), timeout=(3600, 3600)),
        Bench("fit", "one pass of thresher fit (mirror, logistic) on the W3 training file",
              fit_cmd, metrics=[Metric("epoch_s", "s"), Metric("wall_s_fit", "s"), Metric("primal"),
                                Metric("gap")], runs=(1, 3)),
        Bench("fit_sdiht", "one pass of thresher fit (sdiht, logistic) on the W3 training file",
              fit_sdiht_cmd, metrics=[Metric("epoch_s", "s"), Metric("wall_s_fit", "s"), Metric("primal"),
                                      Metric("gap")], runs=(1, 3)),
        Bench("subset", "best subset vs abess and L0Learn (quick: p = 1000, n = 200, SNR 20, one copy)",
              subset_cmd, parse=parse_subset, runs=(1, 1), timeout=(1800, 14400)),
    ]


SUITE = Suite("quality", "held-out accuracy and speed against VW, scikit-learn, liblinear, River, abess, L0Learn",
              needs, benches, prepare)


def fit(binary, train, model, solver="mirror"):
    """One-pass fit with `solver`: prints epoch_s (the solver's, from fit's summary line), wall_s_fit, the model's
    certificate and its sha256."""
    start = time.perf_counter()
    r = subprocess.run([binary, "fit", train, "--solver", solver, "--loss", "logistic", "-k", "100",
                        "--lambda", "1e-4", "--epochs", "1", "--out", model], capture_output=True, text=True)
    wall = time.perf_counter() - start
    sys.stderr.write(r.stderr)
    if r.returncode:
        sys.exit(r.returncode)
    epoch = re.search(r"^solver=.*?\bseconds=(\S+)", r.stderr, re.M)
    m = json.load(open(model))
    digest = hashlib.sha256(open(model, "rb").read()).hexdigest()
    print(f"epoch_s={epoch.group(1) if epoch else 'nan'} wall_s_fit={wall:.3f} primal={m['certificate']['primal']!r} "
          f"gap={m['certificate']['gap']!r} support={len(m['support'])} model_sha256={digest}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["fit"] and len(sys.argv) in (5, 6):
        fit(*sys.argv[2:])
    else:
        sys.exit("usage: quality.py fit THRESHER TRAIN.svm MODEL.json [SOLVER]")
