"""Fixtures: the real ``thresher`` binary (``$THRESHER_BIN``, else the repository's
``target/release/thresher``) and daemons started from it on ``127.0.0.1:0``."""

import os
import pathlib
import re
import signal
import subprocess
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


def binary() -> str:
    b = os.environ.get("THRESHER_BIN") or str(ROOT / "target" / "release" / "thresher")
    if not os.access(b, os.X_OK):
        pytest.exit("no thresher binary at %s: build it (cargo build --release) or set THRESHER_BIN" % b)
    return b


@pytest.fixture(scope="session", autouse=True)
def thresher_bin():
    b = binary()
    os.environ["THRESHER_BIN"] = b
    return b


class Daemon:
    """``thresher serve`` with ``env`` (``THRESHER_*`` keys) and extra args; ``url`` once listening."""

    def __init__(self, env=None, args=(), tokens=None):
        self.dir = tempfile.TemporaryDirectory(prefix="thresher-py-")
        e = {k: v for k, v in os.environ.items() if not k.startswith("THRESHER_")}
        e.update(env or {})
        cmd = [binary(), "serve", "--listen", "127.0.0.1:0", *args]
        if tokens is not None:
            path = os.path.join(self.dir.name, "tokens")
            with open(path, "w") as f:
                f.write(tokens)
            os.chmod(path, 0o600)
            cmd += ["--auth-tokens-file", path]
        self.log = open(os.path.join(self.dir.name, "stderr"), "w+")
        self.proc = subprocess.Popen(cmd, env=e, stderr=self.log, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            self.log.seek(0)
            m = re.search(r"listening on (\S+)", self.log.read())
            if m:
                self.url = "http://" + m.group(1)
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                raise RuntimeError("thresher serve did not start: " + self.log.read())
            time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.dir.cleanup()


@pytest.fixture
def daemon_factory():
    started = []

    def start(env=None, args=(), tokens=None):
        d = Daemon(env, args, tokens)
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()
