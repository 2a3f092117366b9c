"""contract: the HTTP API against its own OpenAPI document (not a timing).

- schemathesis: the release daemon on 127.0.0.1 with a fresh data directory and a published model,
  and schemathesis (every check) against `/openapi.json`, with the hooks of `contract_hooks.py`
  (NDJSON bodies, positive samples brought into shape); any failed check fails the run. Full: 100
  examples per operation; quick: 10 (MAX_EXAMPLES and SEED override). schemathesis is pip-installed
  into target/schemathesis-venv.

Run as a script (`python3 benches/suites/contract.py check THRESHER SCHEMATHESIS EXAMPLES SEED`) it is
the check.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from common import Bench, Command, Needs, Suite, venv

HERE = os.path.dirname(os.path.abspath(__file__))


def needs(ctx):
    return Needs()


def prepare(ctx):
    py, missing = venv(os.path.join("target", "schemathesis-venv"), ["schemathesis"])
    ctx.schemathesis = os.path.join(os.path.dirname(py), "schemathesis") if py and not missing else None
    if not ctx.schemathesis:
        ctx.skip("contract: could not install schemathesis: the contract check is not run")


def check_cmd(ctx, build):
    if not ctx.schemathesis:
        return None
    return Command([sys.executable, __file__, "check", build.thresher(), ctx.schemathesis,
                    os.environ.get("MAX_EXAMPLES", "10" if ctx.quick else "100"), os.environ.get("SEED", "1")])


def benches(ctx):
    return [Bench("schemathesis", "every schemathesis check against /openapi.json on the live daemon", check_cmd,
                  parse=parse, runs=(1, 1))]


def parse(stdout, _stderr):
    """schemathesis's `N generated, M passed` (and failed) test cases."""
    out = {}
    m = re.search(r"(\d+) generated, (.*)", stdout)
    if m:
        out["generated"] = float(m.group(1))
        for n, what in re.findall(r"(\d+) (passed|failed|errored|skipped)", m.group(2)):
            out[what] = float(n)
    return out


SUITE = Suite("contract", "the live API against its OpenAPI document (schemathesis, every check)", needs, benches,
              prepare)


def get(url):
    try:
        return urllib.request.urlopen(url, timeout=5).status
    except OSError:
        return None


def check(thresher, schemathesis, examples, seed):
    data = tempfile.mkdtemp()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(data, "daemon.log"), "w")
    daemon = subprocess.Popen([thresher, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir",
                               os.path.join(data, "state")], stdout=log, stderr=log)
    try:
        for _ in range(100):
            if get(base + "/healthz") == 200:
                break
            time.sleep(0.1)
        # A published model, so the model routes answer 200 as well as 503.
        body = "".join(f"{i % 7 - 3} {i % 5 + 1}:1 {i % 11 + 7}:0.5\n" for i in range(1, 301)).encode()
        urllib.request.urlopen(urllib.request.Request(base + "/v1/samples", data=body,
                                                      headers={"Content-Type": "text/plain"}), timeout=10)
        for _ in range(100):
            if get(base + "/readyz") == 200:
                break
            time.sleep(0.1)
        env = dict(os.environ, SCHEMATHESIS_HOOKS="contract_hooks", PYTHONPATH=HERE)
        status = subprocess.run([schemathesis, "run", base + "/openapi.json", "--checks", "all", "--max-examples",
                                 examples, "--seed", seed, "--no-color"], env=env).returncode
        if daemon.poll() is not None:
            sys.exit("daemon died; its log:\n" + open(os.path.join(data, "daemon.log")).read())
        sys.exit(status)
    finally:
        daemon.terminate()
        daemon.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["check"] and len(sys.argv) == 6:
        check(*sys.argv[2:])
    else:
        sys.exit("usage: contract.py check THRESHER SCHEMATHESIS EXAMPLES SEED")
