"""Fills a thresher daemon's feature dictionary through POST /v1/samples and reports its memory and the
checkpoint size (the daemon suite's dictionary benchmark; figures in docs/benchmarks/dictionary.md).
With `hashed:BITS` the same names go to a daemon with `ingest.feature_names = "hashed"` instead.

    python3 benches/harness/dictionary_fill.py BINARY NAMES BYTES OUTDIR [hashed:BITS]

NAMES names of BYTES bytes each, 10 000 new names per request (100 NDJSON lines of 100 names), one SDIHT
learner with k = 10. Prints one line of key=value: VmRSS before and 3 s after the last request, the
largest VmHWM while the daemon writes its final checkpoint on SIGTERM, and the checkpoint's size.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request


def status(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key):
            return int(line.split()[1]) // 1024
    return 0


def main(binary, names, width, out, mode="dictionary"):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cfg = os.path.join(out, "thresher.toml")
    with open(cfg, "w") as f:
        hashed = (f"feature_names = \"hashed\"\nhash_bits = {mode.split(':')[1]}\n"
                  if mode.startswith("hashed:") else "")
        f.write(f"[ingest]\nmax_named_features = {names}\nmax_named_feature_bytes = {names * width}\n{hashed}"
                "[checkpoint]\ninterval_s = 3600\n[[learner]]\nk = 10\n")
    data = os.path.join(out, "data")
    p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--config", cfg, "--data-dir", data],
                         stderr=subprocess.PIPE, text=True)
    addr = None
    for line in p.stderr:
        m = re.search(r"listening on (\S+)", line)
        if m:
            addr = m.group(1).strip('"').replace("http://", "")
            break
    if addr is None:
        sys.exit("the daemon did not start")
    base = f"http://{addr}"
    rss_start = status(p.pid, "VmRSS")
    i = 0
    while i < names:
        lines = []
        for _ in range(100):
            features = {}
            for _ in range(100):
                if i >= names:
                    break
                features[(f"f{i:09d}-" + "x" * width)[:width]] = 1.0
                i += 1
            if features:
                lines.append(json.dumps({"label": 1.0, "features": features}))
        body = ("\n".join(lines) + "\n").encode()
        request = urllib.request.Request(base + "/v1/samples", data=body,
                                         headers={"content-type": "application/x-ndjson"})
        urllib.request.urlopen(request).read()
    time.sleep(3)
    rss_full = status(p.pid, "VmRSS")
    p.terminate()
    peak = rss_full
    while p.poll() is None:
        try:
            peak = max(peak, status(p.pid, "VmHWM"))
        except OSError:
            break
        time.sleep(0.01)
    p.wait()
    checkpoint = os.path.getsize(os.path.join(data, "thresher.ckpt"))
    names_file = os.path.join(data, "thresher.names")
    names_bytes = os.path.getsize(names_file) if os.path.exists(names_file) else 0
    print(f"mode={mode} names_file_bytes={names_bytes} names={names} bytes_per_name={width} rss_start_mib={rss_start} rss_full_mib={rss_full} "
          f"rss_peak_mib={peak} checkpoint_bytes={checkpoint}")


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], *sys.argv[5:])
