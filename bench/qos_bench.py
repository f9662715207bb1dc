#!/usr/bin/env python3
"""Per-namespace QoS (docs/configuration.md#qos) measured with `rdmablk bench` over NVMe/TCP on 127.0.0.1.

One target, one reactor, two null-backend namespaces (the cost is the target's path, not a disk):
  nsid 1  limited to --iops (default 5000) reads+writes per second
  nsid 2  unlimited
Figures (4 KiB random reads at QD32, --runtime seconds after 1 s of ramp, the median of --rounds):
  accuracy   nsid 1's rate against its limit (the issue asks for within 5%)
  isolation  nsid 2 alone, then beside nsid 1 running at its limit on the same reactor (asks for >= 90%)
  cost       the price of the QoS check per I/O: a namespace without limits against one whose limit is far
             above what it reaches (checked, never throttled), at QD1 and QD32, in IOPS and in target CPU
             microseconds per I/O (the target pinned to one CPU, the client to the other when there are two)
The machine is shared and noisy: rounds interleave the cases, and medians are reported.

  bench/qos_bench.py [--build build] [--iops 5000] [--runtime 5] [--rounds 3] [--json] [--skip-cost]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

NQN = "nqn.2024-12.io.rdmablk:qos-bench"
SIZE = 1 << 30


def cpus():
    n = os.cpu_count() or 1
    return ("0", "1") if n >= 2 else ("0", "0")


def start_target(build, workdir, port, namespaces):
    config = benchlib.write_target_config(os.path.join(workdir, "qos.yaml"), port, NQN, namespaces,
                                          extra="reactors: 1\nlog_level: warn\n")
    cmd = ["taskset", "-c", cpus()[0], os.path.join(build, "target/rdmablk-target"), "--config", config,
           "--control-socket", os.path.join(workdir, "target.sock")]
    try:
        return benchlib.start_target(cmd, os.path.join(workdir, "target.log"), timeout=15, port=port)
    except benchlib.TargetError as e:
        sys.exit(str(e))


def bench_cmd(build, workdir, port, nsid, qd, runtime, name):
    job = os.path.join(workdir, f"{name}.fio")
    with open(job, "w") as f:
        f.write(f"[{name}]\nrw=randread\nbs=4k\niodepth={qd}\nruntime={runtime}\ntime_based=1\n"
                f"ramp_time=1\nfilename=tcp://127.0.0.1:{port}/{NQN}/{nsid}\n")
    return ["taskset", "-c", cpus()[1], os.path.join(build, "initiator/rdmablk"), "bench", job,
            "--output-format=json"]


def iops_of(out):
    return json.loads(out)["jobs"][0]["read"]["iops"]


def run_one(build, workdir, port, nsid, qd, runtime, target=None):
    """IOPS of one bench run, and the target's CPU seconds per I/O when `target` is given."""
    before = benchlib.cpu_seconds(target.pid) if target else 0
    out = subprocess.run(bench_cmd(build, workdir, port, nsid, qd, runtime, f"ns{nsid}"), check=True,
                         capture_output=True, text=True).stdout
    iops = iops_of(out)
    if not target:
        return iops, 0.0
    cpu = benchlib.cpu_seconds(target.pid) - before
    return iops, cpu / (iops * (runtime + 1)) * 1e6 if iops else 0.0  # ramp included in both


def run_both(build, workdir, port, runtime):
    """nsid 1 and nsid 2 at once, each its own client: their IOPS."""
    procs = [subprocess.Popen(bench_cmd(build, workdir, port, nsid, 32, runtime, f"both{nsid}"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for nsid in (1, 2)]
    outs = [p.communicate() for p in procs]
    for p, (_, err) in zip(procs, outs):
        if p.returncode != 0:
            sys.exit(f"rdmablk bench failed: {err}")
    return iops_of(outs[0][0]), iops_of(outs[1][0])


def accuracy_and_isolation(args, workdir):
    port = benchlib.free_port()
    target = start_target(args.build, workdir, port,
                          [{"nsid": 1, "backend": "null", "size": SIZE, "qos": f"{{iops: {args.iops}}}"},
                           {"nsid": 2, "backend": "null", "size": SIZE}])
    alone, limited, beside, limited_alone = [], [], [], []
    try:
        for _ in range(args.rounds):
            alone.append(run_one(args.build, workdir, port, 2, 32, args.runtime)[0])
            limited_alone.append(run_one(args.build, workdir, port, 1, 32, args.runtime)[0])
            l, b = run_both(args.build, workdir, port, args.runtime)
            limited.append(l)
            beside.append(b)
    finally:
        benchlib.stop_proc(target)
    med = statistics.median
    return {"limit_iops": args.iops,
            "limited_alone_iops": med(limited_alone), "limited_alone_error": med(limited_alone) / args.iops - 1,
            "limited_beside_iops": med(limited), "limited_beside_error": med(limited) / args.iops - 1,
            "unlimited_alone_iops": med(alone), "unlimited_beside_iops": med(beside),
            "unlimited_kept": med(beside) / med(alone) if med(alone) else 0.0,
            "rounds": {"unlimited_alone": alone, "limited_alone": limited_alone, "limited_beside": limited,
                       "unlimited_beside": beside}}


def cost(args, workdir):
    """The QoS check's price: nsid 1 without limits vs nsid 2 with a limit it never reaches."""
    port = benchlib.free_port()
    target = start_target(args.build, workdir, port,
                          [{"nsid": 1, "backend": "null", "size": SIZE},
                           {"nsid": 2, "backend": "null", "size": SIZE, "qos": "{iops: 10000000, mbps: 1000000}"}])
    rows = []
    try:
        for qd in (1, 32):
            runs = {1: [], 2: []}
            for _ in range(args.rounds):
                for nsid in (1, 2):
                    runs[nsid].append(run_one(args.build, workdir, port, nsid, qd, args.runtime, target))
            med = lambda rs, i: statistics.median(r[i] for r in rs)
            rows.append({"qd": qd, "unlimited_iops": med(runs[1], 0), "limited_iops": med(runs[2], 0),
                         "unlimited_cpu_us": med(runs[1], 1), "limited_cpu_us": med(runs[2], 1)})
    finally:
        benchlib.stop_proc(target)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--iops", type=int, default=5000, help="nsid 1's limit")
    ap.add_argument("--runtime", type=int, default=5, help="seconds per run (after 1 s of ramp)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--skip-cost", action="store_true", help="accuracy and isolation only")
    args = ap.parse_args()
    benchlib.exit_on_signals()
    workdir = tempfile.mkdtemp(prefix="rdmablk-qos-bench-")
    try:
        result = {"accuracy": accuracy_and_isolation(args, workdir)}
        if not args.skip_cost:
            result["cost"] = cost(args, workdir)
    finally:
        benchlib.cleanup_procs()
    if args.json:
        print(json.dumps(result, indent=2))
        return
    a = result["accuracy"]
    print(f"limit {a['limit_iops']} IOPS, 4k randread QD32, median of {args.rounds} x {args.runtime} s")
    print(f"  limited alone:        {a['limited_alone_iops']:10.0f} IOPS ({a['limited_alone_error']:+.2%} of the limit)")
    print(f"  limited beside:       {a['limited_beside_iops']:10.0f} IOPS ({a['limited_beside_error']:+.2%} of the limit)")
    print(f"  unlimited alone:      {a['unlimited_alone_iops']:10.0f} IOPS")
    print(f"  unlimited beside:     {a['unlimited_beside_iops']:10.0f} IOPS ({a['unlimited_kept']:.1%} of alone)")
    for r in result.get("cost", []):
        print(f"QoS check cost, QD{r['qd']}: no limits {r['unlimited_iops']:.0f} IOPS {r['unlimited_cpu_us']:.2f} us/IO;"
              f" limited, not throttled {r['limited_iops']:.0f} IOPS {r['limited_cpu_us']:.2f} us/IO")


if __name__ == "__main__":
    main()
