"""Vowpal Wabbit's daemon on the loadgen stream: samples/s over one pass, held-out accuracy, support size.

Run by the daemon suite (`benches/run daemon`: it makes the venv, dumps the stream and enters a loopback-only network
namespace, because VW's daemon cannot bind to loopback only). Prints one key=value line per setting.
"""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

DATA = sys.argv[1]
TOTAL = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
PORT = 26542
HERE = os.path.dirname(os.path.abspath(__file__))


def to_vw(line):
    label, _, feats = line.strip().partition(" ")
    return f"{int(float(label))} | {feats}\n"


def load(name):
    with open(os.path.join(DATA, name)) as f:
        return [to_vw(l) for l in f if l.strip()]


def recv_lines(sock, expected, out):
    buf = b""
    count = 0
    preds = []
    while count < expected:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        count += len(lines)
        preds.extend(lines)
    out.extend(preds)


def run(l1):
    train = load("train.svm")
    held = load("heldout.svm")
    stream = [train[i % len(train)] for i in range(TOTAL)]
    payload = "".join(stream).encode()
    args = [sys.executable, os.path.join(HERE, "vw_serve.py"), "--daemon", "--foreground", "--num_children", "1",
            "--port", str(PORT), "--loss_function", "logistic", "-b", "20", "--quiet"]
    if l1 > 0:
        args += ["--l1", str(l1)]
    daemon = subprocess.Popen(args)
    for _ in range(100):
        try:
            sock = socket.create_connection(("127.0.0.1", PORT))
            break
        except OSError:
            time.sleep(0.1)
    preds = []
    reader = threading.Thread(target=recv_lines, args=(sock, TOTAL, preds))
    reader.start()
    start = time.perf_counter()
    sock.sendall(payload)
    reader.join()
    seconds = time.perf_counter() - start
    # Held-out: unlabelled examples are predicted, not learned.
    held_payload = "".join("| " + h.partition("| ")[2] for h in held).encode()
    held_preds = []
    reader = threading.Thread(target=recv_lines, args=(sock, len(held), held_preds))
    reader.start()
    sock.sendall(held_payload)
    reader.join()
    sock.close()
    daemon.terminate()
    daemon.wait()
    labels = [1 if h.startswith("1 ") else -1 for h in held]
    correct = sum(1 for p, y in zip(held_preds, labels) if (1 if float(p) >= 0 else -1) == y)
    # Support size: the same single pass in-process, with a readable model. VW applies --l1 lazily (the
    # stored weights are truncated only when used), so the count is exact only without --l1.
    if l1 > 0:
        print(f"peer=vw l1={l1} samples={len(preds)} seconds={seconds:.2f} samples_per_s={len(preds) / seconds:.0f} "
              f"heldout_accuracy={correct / len(held):.4f} support=n/a", flush=True)
        return
    import vowpalwabbit
    with tempfile.NamedTemporaryFile(suffix=".txt") as readable:
        ws = vowpalwabbit.Workspace(arg_list=["--loss_function", "logistic", "-b", "20", "--quiet",
                                              "--readable_model", readable.name] + (["--l1", str(l1)] if l1 > 0 else []))
        for line in stream:
            ws.learn(line)
        ws.finish()
        # Weight lines are `index:weight [adaptive normaliser]`; 116060 is VW's constant (bias) at -b 20.
        support = 0
        with open(readable.name) as f:
            for line in f:
                head, sep, rest = line.partition(":")
                if sep and head.isdigit() and head != "116060" and float(rest.split()[0]) != 0.0:
                    support += 1
    print(f"peer=vw l1={l1} samples={len(preds)} seconds={seconds:.2f} samples_per_s={len(preds) / seconds:.0f} "
          f"heldout_accuracy={correct / len(held):.4f} support={support}", flush=True)


for l1 in [0.0, 1e-8, 1e-7]:
    run(l1)
