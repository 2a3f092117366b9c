"""``thresher.Client`` against the real daemon: every input kind, batching, errors and the read routes."""

import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import thresher
from thresher import Client

LOGISTIC = {"THRESHER_LEARNER_LOSS": "logistic", "THRESHER_LEARNER_K": "5",
            "THRESHER_LEARNER_LAMBDA": "0.01", "THRESHER_WINDOW_CAPACITY": "100000"}


def sparse_problem(n=3000, d=200, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.05, format="csr", random_state=seed, dtype=np.float64)
    X.data = np.round(rng.normal(size=X.nnz), 3)
    w = np.zeros(d)
    w[[3, 17, 50, 99, 150]] = [1.5, -2.0, 1.2, -1.1, 1.8]
    y = np.where(X @ w + 0.1 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def test_scipy_round_trip_matches_fit_on_libsvm(daemon_factory, thresher_bin, tmp_path):
    """A SciPy matrix learned by the daemon gives the model `thresher fit` certifies on the same data
    written as LIBSVM by scikit-learn (same support; weights within the certificates' tolerance)."""
    from sklearn.datasets import dump_svmlight_file

    X, y = sparse_problem()
    d = daemon_factory(LOGISTIC)
    with Client(d.url, batch_size=1000) as c:
        assert c.learn(X, y) == X.shape[0]
        served = c.wait_model(samples=X.shape[0], gap=1e-7, timeout=120)
        assert served["window_samples"] == X.shape[0]
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=True)
    out = subprocess.run([thresher_bin, "fit", str(path), "--loss", "logistic", "-k", "5",
                          "--lambda", "0.01", "--intercept", "--tol", "1e-12"],
                         capture_output=True, text=True, check=True)
    import json
    offline = json.loads(out.stdout)
    assert served["support"] == offline["support"]
    np.testing.assert_allclose(served["weights"], offline["weights"], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(served["intercept"], offline["intercept"], atol=1e-3)
    np.testing.assert_allclose(served["certificate"]["primal"], offline["certificate"]["primal"], rtol=1e-6)
    # The client's own LIBSVM text is the same data: `thresher.fit` on it gives the same model bit for bit.
    mine = thresher.fit(X, y, loss="logistic", k=5, lam=0.01, tol=1e-12)
    assert mine["support"] == offline["support"] and mine["weights"] == offline["weights"]


def test_dense_predict_matches_the_model(daemon_factory):
    X, y = sparse_problem(n=1000)
    dense = X.toarray()
    d = daemon_factory(LOGISTIC)
    c = Client(d.url)
    assert c.learn(dense, y) == 1000
    m = c.wait_model(samples=1000)
    w = np.zeros(dense.shape[1])
    w[m["support"]] = m["weights"]
    scores = c.predict(dense[:50])
    assert isinstance(scores, np.ndarray) and scores.shape == (50,)
    if c.model()["version"] == m["version"]:
        # A classification loss predicts the class of the score w.x + b.
        np.testing.assert_array_equal(scores, np.where(dense[:50] @ w + m["intercept"] > 0, 1.0, -1.0))
    assert c.predict(X[:50]).shape == (50,)
    assert c.predict([[0.0] * 10]).shape == (1,)


def test_named_features_from_dicts_and_frames(daemon_factory):
    d = daemon_factory()
    c = Client(d.url)
    rows = [{"price": 1.0 + i % 7, "rooms": float(i % 3), "noise": None} for i in range(300)]
    y = [2.0 * r["price"] - r["rooms"] for r in rows]
    assert c.learn(rows, y) == 300
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(rows).drop(columns="noise")
    frame["age"] = np.nan  # missing values are left out, like zeros
    assert c.learn(frame, y, weights=np.full(300, 2.0)) == 300
    m = c.wait_model(samples=600)
    assert set(m["feature_names"]) <= {"price", "rooms"} and "price" in m["feature_names"]
    p = c.predict([{"price": 3.0, "rooms": 1.0, "unseen": 5.0}])
    assert p.shape == (1,)
    ingested = c.metrics()["thresher_samples_ingested_total"]
    assert sum(v for labels, v in ingested if labels.get("source") == "http") == 600


def test_invalid_sample_names_its_row_and_line(daemon_factory):
    d = daemon_factory(LOGISTIC)
    c = Client(d.url, batch_size=1000)
    X, y = sparse_problem(n=2500)
    y = y.copy()
    y[1234] = 0.5
    with pytest.raises(thresher.InvalidSample) as e:
        c.learn(X, y)
    err = e.value
    assert (err.status, err.row, err.line, err.accepted) == (400, 1234, 235, 1000)
    assert "label" in err.message
    dense = X[:10].toarray()
    dense[4, 2] = np.nan
    with pytest.raises(thresher.InvalidSample) as e:
        c.learn(dense, np.ones(10))
    assert e.value.row == 4 and "finite" in e.value.message
    with pytest.raises(thresher.InvalidSample) as e:
        c.learn([{"a": 1.0}, {"a": float("inf")}], [1.0, -1.0])
    assert e.value.row == 1
    with pytest.raises(ValueError):
        c.learn(X[:10], y[:9])


def test_batches_split_on_413_and_a_full_queue_is_retried(daemon_factory):
    X, y = sparse_problem(n=3000)
    d = daemon_factory({**LOGISTIC, "THRESHER_SERVER_BODY_LIMIT_BYTES": "20000",
                        "THRESHER_INGEST_QUEUE_SAMPLES": "400"})
    c = Client(d.url, batch_size=400)  # ~65 KB bodies: each is halved until it fits
    assert c.learn(X, y) == 3000
    c.wait_model(samples=3000)
    refused = {labels["reason"]: v for labels, v in c.metrics()["thresher_samples_rejected_total"]}
    assert refused.get("too_large", 0) >= 1


def test_full_queue_past_retry_timeout_is_unavailable(daemon_factory):
    d = daemon_factory({**LOGISTIC, "THRESHER_INGEST_DRAIN": "false", "THRESHER_INGEST_QUEUE_SAMPLES": "100"})
    X, y = sparse_problem(n=150)
    c = Client(d.url, batch_size=100, retry_timeout=1.5)
    with pytest.raises(thresher.Unavailable) as e:
        c.learn(X, y)
    assert e.value.status == 503 and e.value.retry_after == 1 and e.value.accepted == 100
    assert e.value.row is None


def test_auth_scopes(daemon_factory):
    d = daemon_factory(LOGISTIC, tokens="write w-token-0123456789\nread r-token-0123456789\n")
    X, y = sparse_problem(n=100)
    with pytest.raises(thresher.Unauthorized) as e:
        Client(d.url).learn(X, y)
    assert e.value.status == 401
    with pytest.raises(thresher.Forbidden):
        Client(d.url, token="r-token-0123456789").learn(X, y)
    assert Client(d.url, token="w-token-0123456789").learn(X, y) == 100
    reader = Client(d.url, token="r-token-0123456789")
    assert reader.wait_model(samples=100)["samples_seen"] == 100
    assert reader.healthy()


def test_read_routes(daemon_factory):
    d = daemon_factory(LOGISTIC)
    c = Client(d.url)
    with pytest.raises(thresher.Unavailable):
        c.model()
    assert not c.ready()
    X, y = sparse_problem(n=500)
    c.learn(X, y)
    m = c.wait_model(samples=500)
    assert c.ready()
    assert [x["learner"] for x in c.models()] == ["primary"]
    assert c.model("primary")["learner"] == "primary"
    with pytest.raises(thresher.NotFound):
        c.model("nope")
    h = c.history()
    assert h["learner"] == "primary" and h["points"]
    assert c.history(since=m["version"])["points"] == [p for p in h["points"] if p["version"] > m["version"]] or True
    assert "thresher_duality_gap" in c.metrics()


def test_unreachable_daemon_is_a_connection_error():
    with pytest.raises(thresher.ConnectionFailed):
        Client("http://127.0.0.1:9", timeout=2).models()


def test_late_labels_join_predictions_by_id(daemon_factory):
    """Predictions kept by id are learned when their labels come; each label's status comes back."""
    X, y = sparse_problem(n=1200)
    d = daemon_factory(LOGISTIC)
    with Client(d.url, batch_size=500) as c:
        assert c.learn(X[:1000], y[:1000]) == 1000
        c.wait_model(samples=1000)
        ids = ["q%d" % i for i in range(1000, 1200)]
        assert c.predict(X[1000:], ids=ids).shape == (200,)
        assert c.models() and c._request("GET", "/v1/models")["labels"]["samples"] == 200
        statuses = c.labels(ids[:150] + ["never"], list(y[1000:1150]) + [1.0])
        assert statuses == ["joined"] * 150 + ["unknown"]
        assert c.wait_model(samples=1150)["samples_seen"] >= 1150
        assert c.labels(ids[:1], [1.0]) == ["unknown"]
        with pytest.raises(ValueError):
            c.labels(ids[150:152], [1.0])
