# Fills a thresher daemon's dictionary with N names of B bytes through POST /v1/samples (10000 new names
# per request: 100 NDJSON lines of 100 names), then reports VmRSS and the checkpoint size.
import json, os, subprocess, sys, time, urllib.request, re
binary, N, B, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
d = f"/tmp/featbench/{out}"; subprocess.run(["rm", "-rf", d]); os.makedirs(d)
cfg = f"{d}/t.toml"
open(cfg, "w").write(f"[ingest]\nmax_named_features = {N}\nmax_named_feature_bytes = {N*B}\n[checkpoint]\ninterval_s = 3600\n[[learner]]\nk = 10\n")
env = dict(os.environ)
extra = [] if "main" not in binary else []
if "main" in binary:  # the old build has no max_named_feature_bytes
    open(cfg, "w").write(f"[ingest]\nmax_named_features = {N}\n[checkpoint]\ninterval_s = 3600\n[[learner]]\nk = 10\n")
p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--config", cfg, "--data-dir", f"{d}/data"], stderr=subprocess.PIPE, text=True, env=env)
addr = None
for line in p.stderr:
    m = re.search(r"listening on (\S+)", line) or re.search(r"addr=(\S+)", line)
    if m and "listen" in line: addr = m.group(1).strip('"'); break
base = "http://" + addr.replace("http://", "")
def rss():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
def rsshwm():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmHWM"): return int(l.split()[1]) // 1024
r0 = rss()
i = 0
while i < N:
    lines = []
    for _ in range(100):
        feats = {}
        for _ in range(100):
            if i >= N: break
            name = (f"f{i:09d}-" + "x" * B)[:B]; feats[name] = 1.0; i += 1
        if feats: lines.append(json.dumps({"label": 1.0, "features": feats}))
    req = urllib.request.Request(base + "/v1/samples", data=("\n".join(lines) + "\n").encode(), headers={"content-type": "application/x-ndjson"})
    urllib.request.urlopen(req).read()
time.sleep(3)
r1 = rss()
m = urllib.request.urlopen(base + "/metrics").read().decode()
names = [l for l in m.splitlines() if l.startswith("thresher_feature_names ")]
p.terminate()
hwm = r1
while p.poll() is None:
    try: hwm = max(hwm, rsshwm())
    except Exception: break
    time.sleep(0.01)
p.wait()
size = os.path.getsize(f"{d}/data/thresher.ckpt")
print(json.dumps({"binary": binary, "names": N, "bytes_per_name": B, "rss_start_mb": r0, "rss_full_mb": r1, "vmhwm_mb_incl_final_checkpoint": hwm, "metric": names, "checkpoint_bytes": size}))
