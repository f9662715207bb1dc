#!/usr/bin/env python3
"""What fused Compare and Write costs against a plain Write, through rdmablk-target over NVMe/TCP.

One target (pinned to CPU 1) with a ram namespace and a file namespace (512-byte blocks), bench/caw_bench
(pinned to CPU 0) on each at QD1 and QD16: rounds alternate plain 1-block writes and matching 1-block fused
Compare and Write pairs, each slot on blocks of its own. The table gives the medians and the ratio
caw/write, both measured in the same run by the same client. The pair reads, compares and writes under a
range lock, so it costs at least one backend read more than the write.

  bench/caw_cost.py [--build build] [--seconds 3] [--rounds 3] [--dir /var/tmp/rdmablk-caw] [--json]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

NQN = "nqn.2024-12.io.rdmablk:caw-bench"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the file namespace lives (default: a temporary folder)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    benchlib.exit_on_signals()
    target = os.path.join(args.build, "target", "rdmablk-target")
    client = os.path.join(args.build, "bench", "caw_bench")
    for b in (target, client):
        if not os.access(b, os.X_OK):
            sys.exit(f"caw_cost: {b} is missing (build it: cmake --build build --target rdmablk-target caw_bench)")
    work = tempfile.mkdtemp(prefix="rdmablk-caw-", dir=args.dir)
    port = benchlib.free_port()
    cfg = benchlib.write_target_config(
        os.path.join(work, "target.yaml"), port, NQN,
        [{"nsid": 1, "backend": "ram", "size": "256MiB"},
         {"nsid": 2, "backend": "file", "path": os.path.join(work, "vol.img"), "size": "256MiB", "direct": "false"}],
        extra="reactors: 1\nlog_level: warn\n")
    log = os.path.join(work, "target.log")
    proc = benchlib.start_target(["taskset", "-c", "1", target, "--config", cfg, "--control-socket",
                                  os.path.join(work, "target.sock")], log, port=port)
    results = []
    try:
        for nsid, name in ((1, "ram"), (2, "file")):
            for qd in (1, 16):
                out = subprocess.run(["taskset", "-c", "0", client, "-s", str(port), "-n", NQN, "--nsid", str(nsid),
                                      "--qd", str(qd), "--seconds", str(args.seconds), "--rounds", str(args.rounds),
                                      "--json"], capture_output=True, text=True, timeout=600)
                if out.returncode != 0:
                    raise benchlib.BenchError(f"caw_bench failed: {out.stderr}\n{benchlib.tail(log)}")
                r = json.loads(out.stdout)
                r["namespace"] = name
                results.append(r)
                benchlib.log(f"{name} QD{qd}: write {r['write_iops']:.0f} IOPS, compare and write "
                             f"{r['caw_iops']:.0f} IOPS, ratio {r['caw_over_write']:.2f}")
    finally:
        benchlib.stop_proc(proc)
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"{'case':<12} {'write IOPS':>11} {'CAW IOPS':>10} {'CAW/write':>10}")
        for r in results:
            print(f"{r['namespace'] + ' QD' + str(r['qd']):<12} {r['write_iops']:>11.0f} {r['caw_iops']:>10.0f} "
                  f"{r['caw_over_write']:>10.2f}")


if __name__ == "__main__":
    try:
        main()
    except benchlib.BenchError as e:
        sys.exit(f"caw_cost: {e}")
    finally:
        benchlib.cleanup_procs()
