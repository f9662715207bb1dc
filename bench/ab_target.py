#!/usr/bin/env python3
"""Two rdmablk-target binaries, or one binary under two settings, on the same jobs, interleaved
(A, B, A, B, ...): IOPS and the target's CPU time per I/O, medians over rounds and the ratio B/A. For changes
on the target's data path (e.g. statistics) and for settings (listener keys such as c2h_success, top-level
keys such as busy_poll_us).

The target runs pinned to --target-cpu with a null namespace (the cost of the NVMe/TCP path and the core,
not a device), `rdmablk bench` pinned to --client-cpu drives it over 127.0.0.1.

  bench/ab_target.py --a OLD/rdmablk-target --b build/target/rdmablk-target [--rounds 3] [--runtime 5]
  bench/ab_target.py --a-listener c2h_success=off --b-listener c2h_success=auto --case "4k randread QD32"
  bench/ab_target.py --b-top busy_poll_us=0
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

NQN = "nqn.2024-11.io.rdmablk:ab"
CASES = [("4k randread QD32", "randread", "4k", 32), ("4k randwrite QD32", "randwrite", "4k", 32),
         ("4k randread QD1", "randread", "4k", 1), ("128k read QD16", "read", "128k", 16)]


def run(binary, settings, cli, case, args, work):
    port = benchlib.free_port()
    cfg = os.path.join(work, "ab.yaml")
    # No control/metrics keys: an older binary would refuse them (a newer one opens its default socket, or
    # logs that it is taken and goes on).
    benchlib.write_target_config(cfg, port, NQN, [{"nsid": 1, "backend": "null", "size": "8GiB"}],
                                 extra="reactors: 1\n" + "".join(f"{k}: {v}\n" for k, v in settings["top"].items()),
                                 listener=settings["listener"])
    log = os.path.join(work, "target.log")
    open(log, "w").close()
    try:
        # "ready": an older binary's ready line may be worded differently.
        target = benchlib.start_target(["taskset", "-c", str(args.target_cpu), binary, "--config", cfg], log,
                                       what=binary, ready="ready")
    except benchlib.TargetError as e:
        sys.exit(str(e))
    try:
        name, rw, bs, qd = case
        job = os.path.join(work, "job.fio")
        with open(job, "w") as f:
            f.write(f"[j]\nnamespace=1\nrw={rw}\nbs={bs}\niodepth={qd}\nsize=8g\nruntime={args.runtime}\n"
                    f"ramp_time=1\ntime_based\n")
        c0 = benchlib.cpu_seconds(target.pid)
        out = subprocess.run(["taskset", "-c", str(args.client_cpu), cli, "bench", job, "-t", "tcp", "-a",
                              "127.0.0.1", "-s", str(port), "-n", NQN, "--output-format=json"],
                             capture_output=True, text=True, timeout=args.runtime + 60)
        c1 = benchlib.cpu_seconds(target.pid)
        if out.returncode != 0:
            sys.exit(f"bench failed: {out.stdout}\n{out.stderr}")
        j = json.loads(out.stdout)["jobs"][0]
        ios = j["read"]["total_ios"] + j["write"]["total_ios"]
        iops = j["read"]["iops"] + j["write"]["iops"]
        # CPU over the whole run (ramp included) per I/O of the measured part is biased equally for A and B.
        return iops, (c1 - c0) / max(ios, 1) * 1e6
    finally:
        benchlib.stop_proc(target, timeout=30)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    target = os.path.join(root, "build/target/rdmablk-target")
    ap.add_argument("--a", default=target, help="baseline rdmablk-target (default: this build's)")
    ap.add_argument("--b", default=target, help="candidate rdmablk-target (default: this build's)")
    ap.add_argument("--a-listener", action="append", default=[], metavar="KEY=VALUE",
                    help="a listener key for A's config (repeatable)")
    ap.add_argument("--b-listener", action="append", default=[], metavar="KEY=VALUE",
                    help="a listener key for B's config (repeatable)")
    ap.add_argument("--a-top", action="append", default=[], metavar="KEY=VALUE",
                    help="a top-level key for A's config, e.g. busy_poll_us=0 (repeatable)")
    ap.add_argument("--b-top", action="append", default=[], metavar="KEY=VALUE",
                    help="a top-level key for B's config (repeatable)")
    ap.add_argument("--cli", default=os.path.join(root, "build/initiator/rdmablk"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=5)
    ap.add_argument("--target-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--case", action="append", choices=[c[0] for c in CASES],
                    help="run only this case (repeatable; default: all)")
    args = ap.parse_args()
    settings = {"a": {}, "b": {}}  # "a"/"b" -> {"listener": keys, "top": keys}
    for key in settings:
        for kind in ("listener", "top"):
            pairs = getattr(args, f"{key}_{kind}")
            if any("=" not in p for p in pairs):
                ap.error(f"--{key}-{kind} takes KEY=VALUE")
            settings[key][kind] = dict(p.split("=", 1) for p in pairs)
    with tempfile.TemporaryDirectory() as work:
        print(f"{'case':20} {'A kIOPS':>9} {'B kIOPS':>9} {'B/A':>6} {'A us/IO':>8} {'B us/IO':>8} {'B/A':>6}")
        for case in [c for c in CASES if not args.case or c[0] in args.case]:
            res = {"a": [], "b": []}
            for _ in range(args.rounds):
                for key in ("a", "b"):
                    res[key].append(run(getattr(args, key), settings[key], args.cli, case, args, work))
            a_iops = statistics.median(r[0] for r in res["a"])
            b_iops = statistics.median(r[0] for r in res["b"])
            a_cpu = statistics.median(r[1] for r in res["a"])
            b_cpu = statistics.median(r[1] for r in res["b"])
            print(f"{case[0]:20} {a_iops/1e3:9.1f} {b_iops/1e3:9.1f} {b_iops/a_iops:6.3f} {a_cpu:8.2f} {b_cpu:8.2f} "
                  f"{b_cpu/a_cpu:6.3f}", flush=True)


if __name__ == "__main__":
    main()
