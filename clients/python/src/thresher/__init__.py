"""Python client of the thresher daemon (:class:`Client`, standard library only) and scikit-learn
estimators over ``thresher fit`` (:class:`ThresherClassifier`, :class:`ThresherRegressor`; these need
NumPy, SciPy and scikit-learn and are imported on first use)."""

from .client import Client, parse_prometheus
from .errors import (BadRequest, ConnectionFailed, FitError, Forbidden, InvalidSample, NotFound,
                     PayloadTooLarge, ThresherError, Unauthorized, Unavailable, UnsupportedMediaType)
from .offline import find_binary, fit

__all__ = ["Client", "parse_prometheus", "fit", "find_binary", "ThresherClassifier", "ThresherRegressor",
           "ThresherError", "InvalidSample", "BadRequest", "Unauthorized", "Forbidden", "NotFound",
           "PayloadTooLarge", "UnsupportedMediaType", "Unavailable", "ConnectionFailed", "FitError"]
__version__ = "0.1.0"


def __getattr__(name):
    if name in ("ThresherClassifier", "ThresherRegressor"):
        from . import sklearn as _sk
        return getattr(_sk, name)
    raise AttributeError("module 'thresher' has no attribute %r" % name)
