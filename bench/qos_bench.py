#!/usr/bin/env python3
"""Per-namespace QoS (docs/configuration.md#qos) measured with `rdmablk bench` over NVMe/TCP on 127.0.0.1.

One target, one reactor, two null-backend namespaces (the cost is the target's path, not a disk):
  nsid 1  limited to --iops (default 5000) reads+writes per second
  nsid 2  unlimited
Figures (4 KiB random reads at QD32, --runtime seconds after 1 s of ramp, the median of --rounds):
  accuracy   nsid 1's rate against its limit (the issue asks for within 5%)
  isolation  nsid 2 alone, then beside nsid 1 running at its limit on the same reactor (asks for >= 90%).
             The two clients share one CPU, so the limited one's wake-ups take client CPU from the other:
             the script also gives nsid 2's IOPS per client CPU second against alone (what the target
             leaves it), and nsid 2 beside nsid 3, unlimited in the target and paced by its client to the
             same rate (the same client load without the target's QoS)
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


def bench_cmd(build, workdir, port, nsid, qd, runtime, name, extra=""):
    job = os.path.join(workdir, f"{name}.fio")
    with open(job, "w") as f:
        f.write(f"[{name}]\nrw=randread\nbs=4k\niodepth={qd}\nruntime={runtime}\ntime_based=1\n"
                f"ramp_time=1\nfilename=tcp://127.0.0.1:{port}/{NQN}/{nsid}\n{extra}")
    return ["taskset", "-c", cpus()[1], os.path.join(build, "initiator/rdmablk"), "bench", job,
            "--output-format=json"]


def iops_of(out):
    return json.loads(out)["jobs"][0]["read"]["iops"]


def run_clients(cmds):
    """Runs the bench commands at once: (IOPS, client CPU seconds) of each."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    results = []
    for p in procs:
        out, err = p.stdout.read(), p.stderr.read()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            sys.exit(f"rdmablk bench failed: {err}")
        results.append((iops_of(out), usage.ru_utime + usage.ru_stime))
    return results


def run_one(build, workdir, port, nsid, qd, runtime, target=None):
    """IOPS of one bench run, the client's CPU seconds, and the target's CPU microseconds per I/O when
    `target` is given."""
    before = benchlib.cpu_seconds(target.pid) if target else 0
    (iops, client_cpu), = run_clients([bench_cmd(build, workdir, port, nsid, qd, runtime, f"ns{nsid}")])
    if not target:
        return iops, client_cpu, 0.0
    cpu = benchlib.cpu_seconds(target.pid) - before
    return iops, client_cpu, cpu / (iops * (runtime + 1)) * 1e6 if iops else 0.0  # ramp included in both


def run_beside(build, workdir, port, runtime, other, paced_iops=0):
    """nsid `other` and nsid 2 at once, each its own client (`other` paced by its client to `paced_iops`
    when given): [(IOPS, client CPU seconds)] of `other`, then of nsid 2."""
    extra = f"rate_iops={paced_iops}\n" if paced_iops else ""
    return run_clients([bench_cmd(build, workdir, port, other, 32, runtime, f"beside{other}", extra),
                        bench_cmd(build, workdir, port, 2, 32, runtime, "beside2")])


def accuracy_and_isolation(args, workdir):
    port = benchlib.free_port()
    target = start_target(args.build, workdir, port,
                          [{"nsid": 1, "backend": "null", "size": SIZE, "qos": f"{{iops: {args.iops}}}"},
                           {"nsid": 2, "backend": "null", "size": SIZE},
                           {"nsid": 3, "backend": "null", "size": SIZE}])
    alone, limited, beside, limited_alone, paced, alone_cpu, beside_cpu, limited_cpu = [], [], [], [], [], [], [], []
    try:
        for _ in range(args.rounds):
            iops, cpu, _ = run_one(args.build, workdir, port, 2, 32, args.runtime)
            alone.append(iops)
            alone_cpu.append(iops / cpu if cpu else 0.0)
            limited_alone.append(run_one(args.build, workdir, port, 1, 32, args.runtime)[0])
            (l, l_cpu), (b, b_cpu) = run_beside(args.build, workdir, port, args.runtime, 1)
            limited.append(l)
            beside.append(b)
            beside_cpu.append(b / b_cpu if b_cpu else 0.0)
            limited_cpu.append(l_cpu / (args.runtime + 1))
            paced.append(run_beside(args.build, workdir, port, args.runtime, 3, args.iops)[1][0])
    finally:
        benchlib.stop_proc(target)
    med = statistics.median
    return {"limit_iops": args.iops,
            "limited_alone_iops": med(limited_alone), "limited_alone_error": med(limited_alone) / args.iops - 1,
            "limited_beside_iops": med(limited), "limited_beside_error": med(limited) / args.iops - 1,
            "unlimited_alone_iops": med(alone), "unlimited_beside_iops": med(beside),
            "unlimited_kept": med(beside) / med(alone) if med(alone) else 0.0,
            "limited_client_cpu_share": med(limited_cpu),
            "unlimited_kept_per_client_cpu": med(beside_cpu) / med(alone_cpu) if med(alone_cpu) else 0.0,
            "unlimited_beside_paced_iops": med(paced),
            "unlimited_beside_limited_vs_paced": med(beside) / med(paced) if med(paced) else 0.0,
            "rounds": {"unlimited_alone": alone, "limited_alone": limited_alone, "limited_beside": limited,
                       "unlimited_beside": beside, "unlimited_beside_paced": paced,
                       "unlimited_alone_iops_per_client_cpu_s": alone_cpu,
                       "unlimited_beside_iops_per_client_cpu_s": beside_cpu}}


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
                         "unlimited_cpu_us": med(runs[1], 2), "limited_cpu_us": med(runs[2], 2)})
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
    print(f"  unlimited beside:     {a['unlimited_beside_iops']:10.0f} IOPS ({a['unlimited_kept']:.1%} of alone;"
          f" the limited one's client took {a['limited_client_cpu_share']:.1%} of the clients' CPU)")
    print(f"    per client CPU second: {a['unlimited_kept_per_client_cpu']:.1%} of alone")
    print(f"  unlimited beside nsid 3 paced by its client to {a['limit_iops']} IOPS (no QoS in the target):"
          f" {a['unlimited_beside_paced_iops']:.0f} IOPS; beside the limited one: "
          f"{a['unlimited_beside_limited_vs_paced']:.1%} of that")
    for r in result.get("cost", []):
        print(f"QoS check cost, QD{r['qd']}: no limits {r['unlimited_iops']:.0f} IOPS {r['unlimited_cpu_us']:.2f} us/IO;"
              f" limited, not throttled {r['limited_iops']:.0f} IOPS {r['limited_cpu_us']:.2f} us/IO")


if __name__ == "__main__":
    main()
