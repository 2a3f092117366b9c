"""scikit-learn estimators over ``thresher fit``: :class:`ThresherClassifier` and :class:`ThresherRegressor`.

``fit`` writes the training set to a temporary LIBSVM file (JSON lines with ``sample_weight``), runs the
``thresher`` binary (``thresher_bin``, else ``$THRESHER_BIN``, else ``PATH``) and keeps the model it
prints; ``predict`` computes ``X @ coef_ + intercept_`` here. Multiclass targets are fitted one class
against the rest (one ``thresher fit`` per class), as liblinear does. Needs NumPy, SciPy and
scikit-learn.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from . import offline as _fit

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn
    def _validate_data(est, X, y="no_validation", reset=True, **kw):
        return est._validate_data(X, y, reset=reset, **kw)


class _ThresherBase(BaseEstimator):
    _loss_choices: Sequence[str] = ()

    def _check_params(self):
        if self.loss not in self._loss_choices:
            raise ValueError("loss must be one of %s, got %r" % (", ".join(self._loss_choices), self.loss))
        if not isinstance(self.k, (int, np.integer)) or self.k < 1:
            raise ValueError("k must be a positive integer, got %r" % (self.k,))
        if not (self.lam == "auto" or (isinstance(self.lam, (int, float, np.floating)) and self.lam > 0)):
            raise ValueError("lam must be a positive number or 'auto', got %r" % (self.lam,))

    def _run_fit(self, X, y, sample_weight):
        model = _fit.fit(X, y, loss=self.loss, k=self.k, lam=self.lam, weights=sample_weight,
                         intercept=self.fit_intercept, solver=self.solver, tol=self.tol,
                         epochs=self.max_epochs, seed=self.random_state or 0,
                         extra_args=tuple(self.extra_args), binary=self.thresher_bin)
        coef = np.zeros(X.shape[1])
        coef[np.asarray(model["support"], dtype=np.intp)] = model["weights"]
        return model, coef, float(model.get("intercept", 0.0))

    def _validate(self, X, y="no_validation", reset=True, **kw):
        return _validate_data(self, X, y, reset=reset, accept_sparse="csr", dtype=np.float64, **kw)

    @staticmethod
    def _weights(X, y, sample_weight):
        """Rows and weights as ``thresher fit`` takes them: a zero-weight row is left out (it counts
        for nothing), and the weights are scaled to mean 1, so that a weight of 2 is the same as the row
        twice (the objective averages over rows: ``(1/N) sum c_i l_i``)."""
        if sample_weight is None:
            return X, y, None
        w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        keep = w > 0
        if not keep.any():
            raise ValueError("sample weights are all zero: there is nothing to fit")
        if not keep.all():
            X, y, w = X[keep], y[keep], w[keep]
        return X, y, w / w.mean()

    def _scores(self, X):
        check_is_fitted(self)
        X = self._validate(X, reset=False)
        s = X @ self.coef_.T + self.intercept_
        return np.asarray(s)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class ThresherClassifier(ClassifierMixin, _ThresherBase):
    """A k-sparse linear classifier fitted by ``thresher fit`` (certified by its duality gap).

    Parameters: ``k`` (most nonzero weights per class), ``lam`` (ridge strength ``lambda`` > 0, or
    ``"auto"``: the held-out choice over ``thresher fit``'s grid), ``loss`` (``logistic``, ``hinge`` or
    ``huber``), ``solver`` (``auto``, ``diht``, ``sdiht`` ...), ``fit_intercept``, ``tol``, ``max_epochs``, ``random_state``
    (``--seed``), ``extra_args`` (more ``thresher fit`` flags) and ``thresher_bin``. After ``fit``:
    ``classes_``, ``coef_`` (``(1, n_features)`` for two classes, else one row per class),
    ``intercept_``, ``models_`` (the model JSON per row of ``coef_``) and ``n_features_in_``.
    ``predict_proba`` exists for the logistic loss (one-vs-rest probabilities are normalised)."""

    _loss_choices = ("logistic", "hinge", "huber")

    def __init__(self, k: int = 10, lam: Any = 1e-3, loss: str = "logistic", solver: str = "auto",
                 fit_intercept: bool = True, tol: float = 1e-6, max_epochs: int = 1000,
                 random_state: Optional[int] = None, extra_args: Sequence[str] = (),
                 thresher_bin: Optional[str] = None):
        self.k = k
        self.lam = lam
        self.loss = loss
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_epochs = max_epochs
        self.random_state = random_state
        self.extra_args = extra_args
        self.thresher_bin = thresher_bin

    def fit(self, X, y, sample_weight=None):
        self._check_params()
        X, y = self._validate(X, y)
        check_classification_targets(y)
        X, y, sample_weight = self._weights(X, y, sample_weight)
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            raise ValueError("ThresherClassifier needs samples of at least 2 classes in the data "
                             "(with a nonzero weight), got one class: %r" % (self.classes_[0],))
        targets = [self.classes_[1]] if len(self.classes_) == 2 else list(self.classes_)
        models, coefs, intercepts = [], [], []
        for c in targets:
            m, coef, b = self._run_fit(X, np.where(y == c, 1.0, -1.0), sample_weight)
            models.append(m)
            coefs.append(coef)
            intercepts.append(b)
        self.models_ = models
        self.coef_ = np.vstack(coefs)
        self.intercept_ = np.asarray(intercepts)
        return self

    def decision_function(self, X):
        s = self._scores(X)
        return s[:, 0] if s.shape[1] == 1 else s

    def predict(self, X):
        s = self.decision_function(X)
        if s.ndim == 1:
            return self.classes_[(s > 0).astype(int)]
        return self.classes_[np.argmax(s, axis=1)]

    def _has_proba(self):
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X):
        s = self.decision_function(X)
        p = 1.0 / (1.0 + np.exp(-np.clip(s, -500, 500)))
        if p.ndim == 1:
            return np.column_stack([1.0 - p, p])
        return p / p.sum(axis=1, keepdims=True)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))


class ThresherRegressor(RegressorMixin, _ThresherBase):
    """A k-sparse linear least-squares regressor fitted by ``thresher fit`` (``loss="squared"``).

    Same parameters as :class:`ThresherClassifier` but the loss; after ``fit``: ``coef_`` (``(n_features,)``),
    ``intercept_`` (a float), ``model_`` (the model JSON) and ``n_features_in_``."""

    _loss_choices = ("squared",)

    def __init__(self, k: int = 10, lam: Any = 1e-3, loss: str = "squared", solver: str = "auto",
                 fit_intercept: bool = True, tol: float = 1e-6, max_epochs: int = 1000,
                 random_state: Optional[int] = None, extra_args: Sequence[str] = (),
                 thresher_bin: Optional[str] = None):
        self.k = k
        self.lam = lam
        self.loss = loss
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_epochs = max_epochs
        self.random_state = random_state
        self.extra_args = extra_args
        self.thresher_bin = thresher_bin

    def fit(self, X, y, sample_weight=None):
        self._check_params()
        X, y = self._validate(X, y, y_numeric=True)
        X, y, sample_weight = self._weights(X, y, sample_weight)
        self.model_, self.coef_, self.intercept_ = self._run_fit(X, y, sample_weight)
        return self

    def predict(self, X):
        return self._scores(X)
