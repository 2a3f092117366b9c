"""The daemon's `lambda = "auto"` against fixed lambdas on the W3-like stream, side by side.

    python3 benches/peers/lambda_grid.py --w3 data/w3-noisy --lambdas 1e-5,1e-4,1e-3,auto --rounds 2

Each round runs the daemon once per lambda (the order reversed every other round, so that a drift of the
machine's load does not favour one setting): `quality.py`'s `run_daemon` (10 000-sample LIBSVM bodies over
one keep-alive connection, SDIHT, logistic, k = 100, window 100 000), then `thresher predict` on the test
file. Per run: held-out accuracy, end-to-end samples/s (first POST to the model that has seen every
sample), the daemon's peak RSS (`VmHWM`), the lambda served. Prints one line per run and the medians.
The data: `cargo run --release --example w3_stream -- --out DIR --noise 1` (labels with noise).
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality  # noqa: E402

PEAK = {}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--w3", required=True)
    p.add_argument("--bin", default=os.path.join(quality.ROOT, "target", "release", "thresher"))
    p.add_argument("--lambdas", default="1e-5,1e-4,1e-3,auto")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--window", type=int, default=100000)
    p.add_argument("--batch", type=int, default=10000)
    p.add_argument("--work", default=os.path.join(quality.ROOT, "data", "lambda-grid"))
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--daemon-env", action="append", default=[])
    args = p.parse_args()
    args.bin = os.path.abspath(args.bin)
    args.text_batch = args.batch
    os.makedirs(args.work, exist_ok=True)
    ds = quality.DataSet("w3", os.path.join(args.w3, "train.svm"), os.path.join(args.w3, "test.svm"), 1 << 20,
                         True, "W3-like stream")
    stop = quality.Daemon.stop

    def stop_and_measure(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    PEAK["kib"] = int(line.split()[1])
        stop(self)

    quality.Daemon.stop = stop_and_measure
    lambdas = args.lambdas.split(",")
    rows = {lam: [] for lam in lambdas}
    for r in range(args.rounds):
        for lam in (lambdas if r % 2 == 0 else list(reversed(lambdas))):
            out = quality.run_daemon(args, ds, "sdiht", "logistic", lam, args.work)
            rate = ds.n_train / out["seconds"]
            mib = PEAK.get("kib", 0) / 1024
            served = out["note"].rsplit("live lambda ", 1)[-1]
            rows[lam].append((out["acc"], rate, mib))
            print(f"round {r + 1} lambda {lam}: accuracy {out['acc']:.4f} samples/s {rate:,.0f} "
                  f"peak RSS {mib:.0f} MiB served {served}", flush=True)
    print("| lambda | accuracy (median) | end-to-end samples/s (median) | peak RSS MiB (median) | runs |")
    print("| --- | --- | --- | --- | --- |")
    for lam in lambdas:
        acc, rate, mib = (statistics.median(v[i] for v in rows[lam]) for i in range(3))
        print(f"| {lam} | {acc:.2%} | {rate:,.0f} | {mib:.0f} | {len(rows[lam])} |")


if __name__ == "__main__":
    main()
