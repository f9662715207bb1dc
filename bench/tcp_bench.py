#!/usr/bin/env python3
"""rdmablk-target over NVMe/TCP on 127.0.0.1, beside a local baseline measured in the same run.

Cases: 4 KiB random read at QD1 and QD32, 128 KiB sequential read at QD16, 4 KiB random write at QD32,
each on two namespaces of one target:
  null  the null backend (completes at once): the cost of the NVMe/TCP path itself. Baseline: the same
        fio job on a file in /dev/shm (local memory-speed I/O, no network).
  file  a 1 GiB file on a real filesystem through the io_uring file backend with O_DIRECT. Baseline:
        fio --ioengine=io_uring --direct=1 on the same file, locally.
Rounds interleave ours and the baseline (ours, base, ours, base, ...) and the table reports medians
and the ratio ours/baseline. The machine is shared and noisy: compare ratios, not absolute figures.

  bench/tcp_bench.py [--build build] [--runtime 5] [--rounds 3] [--dir /var/tmp/rdmablk-bench] [--json]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

NQN = "nqn.2024-11.io.rdmablk:bench"
CASES = [  # name, rw, bs, iodepth
    ("4k randread QD1", "randread", "4k", 1),
    ("4k randread QD32", "randread", "4k", 32),
    ("128k seqread QD16", "read", "128k", 16),
    ("4k randwrite QD32", "randwrite", "4k", 32),
]


def fill(path, size):
    """Write real data so that reads hit allocated blocks, not holes."""
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    subprocess.run(["fio", "--name=fill", f"--filename={path}", f"--size={size}", "--rw=write", "--bs=1m",
                    "--ioengine=io_uring", "--direct=1", "--iodepth=8", "--output-format=terse"],
                   check=True, stdout=subprocess.DEVNULL)


def start_target(build, workdir, port, file_path, size):
    config = benchlib.write_target_config(
        os.path.join(workdir, "bench.yaml"), port, NQN,
        [{"nsid": 1, "backend": "null", "size": size},
         {"nsid": 2, "backend": "file", "path": file_path, "size": size, "direct": "true"}],
        extra="log_level: warn\n")
    try:
        return benchlib.start_target([os.path.join(build, "target/rdmablk-target"), "--config", config,
                                      "--log-level", "info", "--control-socket", os.path.join(workdir, "target.sock")],
                                     os.path.join(workdir, "target.log"), timeout=15)
    except benchlib.TargetError as e:
        sys.exit(str(e))


def run_ours(build, workdir, port, nsid, rw, bs, iodepth, runtime):
    job = os.path.join(workdir, "job.fio")
    with open(job, "w") as f:
        f.write(f"[bench]\nrw={rw}\nbs={bs}\niodepth={iodepth}\nruntime={runtime}\ntime_based=1\n"
                f"ramp_time=1\nfilename=tcp://127.0.0.1:{port}/{NQN}/{nsid}\n")
    out = subprocess.run([os.path.join(build, "initiator/rdmablk"), "bench", job, "--output-format=json"],
                         check=True, capture_output=True, text=True).stdout
    return summarize(json.loads(out)["jobs"][0], rw)


def run_fio(path, direct, rw, bs, iodepth, runtime):
    out = subprocess.run(["fio", "--name=baseline", f"--filename={path}", "--ioengine=io_uring",
                          f"--direct={1 if direct else 0}", f"--rw={rw}", f"--bs={bs}", f"--iodepth={iodepth}",
                          f"--runtime={runtime}", "--time_based", "--ramp_time=1", "--output-format=json"],
                         check=True, capture_output=True, text=True).stdout
    return summarize(json.loads(out[out.index("{"):])["jobs"][0], rw)


def summarize(job, rw):
    d = job["write" if "write" in rw else "read"]
    clat = d.get("clat_ns", {})
    pct = clat.get("percentile", {})
    return {"iops": d["iops"], "bw_mib": d["bw_bytes"] / 2**20, "clat_mean_us": clat.get("mean", 0) / 1000,
            "clat_p99_us": pct.get("99.000000", 0) / 1000}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--runtime", type=int, default=5, help="seconds per run (after 1 s of ramp)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp/rdmablk-bench", help="where the 1 GiB file lives (not tmpfs)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    size = 1 << 30
    os.makedirs(args.dir, exist_ok=True)
    data_file = os.path.join(args.dir, "ns2.img")
    fill(data_file, size)
    shm_file = tempfile.mktemp(prefix="rdmablk-bench-", dir="/dev/shm")
    subprocess.run(["fio", "--name=fill", f"--filename={shm_file}", f"--size={size}", "--rw=write", "--bs=1m",
                    "--output-format=terse"], check=True, stdout=subprocess.DEVNULL)
    workdir = tempfile.mkdtemp(prefix="rdmablk-bench-")
    port = benchlib.free_port()
    target = start_target(args.build, workdir, port, data_file, size)
    results = []
    try:
        for name, rw, bs, qd in CASES:
            for backend, nsid, base_path, direct in (("null", 1, shm_file, False), ("file", 2, data_file, True)):
                ours, base = [], []
                for _ in range(args.rounds):
                    ours.append(run_ours(args.build, workdir, port, nsid, rw, bs, qd, args.runtime))
                    base.append(run_fio(base_path, direct, rw, bs, qd, args.runtime))
                med = lambda runs, k: statistics.median(r[k] for r in runs)
                row = {"case": name, "backend": backend,
                       "ours_iops": med(ours, "iops"), "base_iops": med(base, "iops"),
                       "ours_clat_mean_us": med(ours, "clat_mean_us"), "base_clat_mean_us": med(base, "clat_mean_us"),
                       "ours_clat_p99_us": med(ours, "clat_p99_us"), "base_clat_p99_us": med(base, "clat_p99_us"),
                       "ours_bw_mib": med(ours, "bw_mib")}
                row["ratio"] = row["ours_iops"] / row["base_iops"] if row["base_iops"] else 0.0
                results.append(row)
                if not args.json:
                    print(f"{name:18} {backend:4}: ours {row['ours_iops']:>9.0f} IOPS ({row['ours_bw_mib']:7.1f} MiB/s, "
                          f"clat avg {row['ours_clat_mean_us']:7.1f} us, p99 {row['ours_clat_p99_us']:7.1f} us)  "
                          f"baseline {row['base_iops']:>9.0f} IOPS (avg {row['base_clat_mean_us']:6.1f} us)  "
                          f"ratio {row['ratio']:.2f}", flush=True)
    finally:
        rc = benchlib.stop_proc(target, timeout=30)
        os.unlink(shm_file)
        shutil.rmtree(workdir, ignore_errors=True)
        if rc != 0:
            print(f"warning: rdmablk-target exited with {rc}", file=sys.stderr)
    if args.json:
        print(json.dumps({"runtime_s": args.runtime, "rounds": args.rounds, "results": results}, indent=2))
    else:
        print("\n| case | backend | rdmablk over TCP (IOPS) | local baseline (IOPS) | ratio | clat avg ours / base (us) |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
        for r in results:
            print(f"| {r['case']} | {r['backend']} | {r['ours_iops']:.0f} | {r['base_iops']:.0f} | {r['ratio']:.2f} | "
                  f"{r['ours_clat_mean_us']:.1f} / {r['base_clat_mean_us']:.1f} |")


if __name__ == "__main__":
    main()
