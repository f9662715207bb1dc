#!/usr/bin/env python3
"""fio's own example job files, run unchanged but for size/runtime, by `rdmablk bench` and by fio with
`ioengine=rdmablk`, against one rdmablk-target; the two are compared.

What it does
  Starts rdmablk-target on 127.0.0.1 (a free port) with one subsystem and one namespace: a `ram` backend
  (data kept, so verify jobs mean something) of --ns-size bytes with 512-byte blocks (jesd219 issues 512 B
  I/O). Then, for every example of EXAMPLES (fio's examples/ folder; scripts/setup unpacks Debian's fio
  source package, see docs/benchmarking.md#fio-ioengine):
    rdmablk bench  FILE' -a 127.0.0.1 -s PORT -n NQN --output-format=json
    fio            FILE'' --output-format=json
  FILE'  = the example with its size= lines set to the case's size and its runtime=/timeout= lines set
           to --runtime (time_based jobs) or to --cap (jobs that end by size: the cap never ends them
           first, so both runners move exactly `size` bytes), and runtime=--cap added to rate-limited
           jobs without one; every other line as fio ships it (`directory=`, `filename=/dev/sda`,
           `ioengine=libaio`, `direct=1` ... are accepted and ignored by rdmablk bench, with a note).
  FILE'' = FILE' with its ioengine=, filename= and directory= lines replaced by ioengine=rdmablk (the
           engine found by name through a symlink on LD_LIBRARY_PATH, as the install does it) and
           filename=trtype=tcp traddr=... (the engine's SPDK-style string).
  Checks (the exit status): both runners exit 0 with no job error; every job moved data; for jobs that
  end by size, rdmablk bench and fio report the same bytes per direction; rate-limited jobs stay at or
  below their rate (+10 %). Throughput is compared (ratio of IOPS rdmablk/fio) and printed, not asserted:
  the machine may be loaded.

Usage
  bench/fio_examples.py --examples /var/cache/rdmablk/fio-3.33/examples --engine build/fio_engine/fio-rdmablk.so
  bench/fio_examples.py ... --size 256m --runtime 5 --target-cpu 1 --client-cpu 0 --markdown table.md
  bench/fio_examples.py ... --only ssd-test butterfly
Exit status: 0 all checks passed, 1 a check failed, 77 fio, its examples or the engine are missing.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import cleanup_procs, free_port, log, stop_proc  # noqa: E402

NQN = "nqn.2024-11.io.rdmablk:fio-examples"

# The block-I/O examples of fio 3.33 (issue 14's list; sequence-distribution.fio is not in 3.33).
# size: what size= becomes (None: the example's lines, or none, are kept: the whole namespace).
EXAMPLES = {
    "ssd-test": {"size": "16m"},
    "fio-rand-read": {"size": "16m"},
    "fio-rand-write": {"size": "16m"},
    "fio-rand-RW": {"size": "16m"},
    "fio-seq-read": {"size": "16m"},
    "fio-seq-write": {"size": "16m"},
    "fio-seq-RW": {"size": "16m"},
    "basic-verify": {"size": None},
    "latency-profile": {"size": None},
    "jesd219": {"size": None},
    "surface-scan": {"size": None},
    "tiobench-example": {"size": "16m"},
    "fixed-rate-submission": {"size": "4m", "rated": True},      # 1000 IOPS x 4k: ~1 s
    "poisson-rate-submission": {"size": "256k", "rated": True},  # 50 IOPS x 4k: ~1.3 s
    "backwards-read": {"size": "16m"},
    "butterfly": {"size": None},
}


class Failure(Exception):
    pass


def sections(text):
    """[(name, [lines])] with the text before the first section under name None."""
    out = [(None, [])]
    for line in text.splitlines():
        m = re.match(r"\s*\[([^\]]+)\]", line)
        if m:
            out.append((m.group(1).strip(), []))
        else:
            out[-1][1].append(line)
    return out


def key_of(line):
    s = line.strip()
    if not s or s[0] in ";#":
        return None
    return s.split("=", 1)[0].strip().lower()


def rewrite(text, size, runtime, cap):
    """The example with size/runtime changed as the module doc says. Returns (text, facts)."""
    secs = sections(text)
    glob = {}
    for name, lines in secs:
        if name == "global":
            for ln in lines:
                k = key_of(ln)
                if k:
                    glob[k] = ln
    out = []
    for name, lines in secs:
        if name is not None:
            out.append(f"[{name}]")
        keys = {key_of(ln) for ln in lines} - {None}
        eff = set(glob) | keys if name not in (None, "global") else keys
        time_based = "time_based" in eff
        rated = any(k in eff for k in ("rate", "rate_iops"))
        for ln in lines:
            k = key_of(ln)
            if k == "size" and size is not None:
                out.append(f"size={size}")
            elif k in ("runtime", "timeout"):
                out.append(f"runtime={runtime if time_based else cap}")
            else:
                out.append(ln)
        if name not in (None, "global") and rated and not ({"runtime", "timeout"} & eff):
            out.append(f"runtime={cap}")
    return "\n".join(out) + "\n"


def for_fio(text, port):
    fname = f"trtype=tcp traddr=127.0.0.1 trsvcid={port} subnqn={NQN} ns=1".replace(":", "\\:")
    lines = [ln for ln in text.splitlines() if key_of(ln) not in ("ioengine", "filename", "directory")]
    return f"[global]\nioengine=rdmablk\nfilename={fname}\n" + "\n".join(lines) + "\n"


def run_json(cmd, what, timeout, cwd, env=None):
    t0 = time.monotonic()
    # In the work folder: fio leaves verify state files (and both runners log files) in the cwd.
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise Failure(f"{what} exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    try:
        # fio may print notes before the JSON object.
        js = json.loads(p.stdout[p.stdout.index("{"):])
    except (ValueError, json.JSONDecodeError) as e:
        raise Failure(f"{what}: no JSON on stdout ({e}): {p.stdout[:500]}")
    return js, dt, p.stderr


def offload_guard(cpu):
    """The prefix that runs fio for an io_submit_mode=offload job: one CPU, SCHED_FIFO.

    fio 3.33's start_worker() creates each submit thread and then assigns sw->flags = SW_F_IDLE, erasing
    the SW_F_RUNNING the thread sets once its engine is up if the thread got there first; workqueue_init()
    then waits for it forever (axboe/fio#2053, fixed upstream after 3.33; seen here about once in 130 runs
    of fixed-rate-submission on a loaded machine, fio's main thread in workqueue_init(), every worker
    idle). On one CPU under SCHED_FIFO a new thread never preempts the one that created it, so the
    assignment always comes first: the race cannot happen. fio's threads block between I/Os (rate
    limits, poll()), so the target and other processes still get the CPU."""
    return ["taskset", "-c", cpu or "0", "chrt", "-f", "1"]


def offload_guard_missing():
    """Why offload_guard() cannot run here (a container without CAP_SYS_NICE, no chrt), or None."""
    try:
        p = subprocess.run(offload_guard(None) + ["true"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    return None if p.returncode == 0 else (p.stderr.strip() or f"exit {p.returncode}")


def job_summary(js):
    """[(jobname, {ddir: (io_bytes, iops)}, error, job options)]"""
    out = []
    for j in js.get("jobs", []):
        d = {k: (j[k]["io_bytes"], j[k]["iops"]) for k in ("read", "write", "trim") if k in j}
        out.append((j["jobname"], d, j.get("error", 0), j.get("job options", {})))
    return out


def totals(summary):
    b = {"read": 0, "write": 0, "trim": 0}
    iops = 0.0
    for _, d, _, _ in summary:
        for k, (by, io) in d.items():
            b[k] += by
            iops += io
    return b, iops


def check_example(name, ours, fio, ended_by_size, mixed, variable_bs, rates):
    problems = []
    for who, s in (("rdmablk bench", ours), ("fio", fio)):
        if not s:
            problems.append(f"{who}: no jobs in the JSON")
        for job, d, err, _ in s:
            if err:
                problems.append(f"{who}: job {job} error {err}")
            if sum(by for by, _ in d.values()) == 0:
                problems.append(f"{who}: job {job} moved no data")
    (ob, oi), (fb, fi) = totals(ours), totals(fio)
    if ended_by_size:
        # A job that mixes directions picks each I/O's direction at random: only the total is fixed.
        if variable_bs:
            # Random block sizes: the last I/O of a job overshoots its size by a random amount, both ways.
            if abs(sum(ob.values()) - sum(fb.values())) > 0.001 * max(sum(fb.values()), 1):
                problems.append(f"bytes differ by more than 0.1%: rdmablk bench {sum(ob.values())}, fio {sum(fb.values())}")
        elif mixed:
            if sum(ob.values()) != sum(fb.values()):
                problems.append(f"bytes differ: rdmablk bench {sum(ob.values())}, fio {sum(fb.values())}")
        else:
            for k in ob:
                if ob[k] != fb[k]:
                    problems.append(f"{k} bytes differ: rdmablk bench {ob[k]}, fio {fb[k]}")
    for limit in rates:
        for who, iops in (("rdmablk bench", oi), ("fio", fi)):
            if iops > 1.1 * limit:
                problems.append(f"{who}: {iops:.0f} IOPS above rate_iops={limit}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", required=True, help="fio's examples/ folder")
    ap.add_argument("--engine", required=True, help="fio-rdmablk.so")
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--target", help="rdmablk-target (default BUILD/target/rdmablk-target)")
    ap.add_argument("--rdmablk", help="rdmablk (default BUILD/initiator/rdmablk)")
    ap.add_argument("--fio", default="fio")
    ap.add_argument("--ns-size", default="128MiB")
    ap.add_argument("--size", help="size= for every example that has one (default: the table's)")
    ap.add_argument("--runtime", type=int, default=2, help="seconds, time_based jobs")
    ap.add_argument("--cap", type=int, default=300, help="runtime= for jobs that end by size (never reached)")
    ap.add_argument("--only", nargs="*", help="example names")
    ap.add_argument("--target-cpu", help="pin the target to this CPU (taskset), e.g. 1")
    ap.add_argument("--client-cpu", help="pin rdmablk bench and fio to this CPU, e.g. 0")
    ap.add_argument("--markdown", help="write the comparison table here")
    ap.add_argument("--keep", help="keep the rewritten job files and outputs in this folder")
    args = ap.parse_args()

    target = os.path.abspath(args.target or os.path.join(args.build, "target/rdmablk-target"))
    rdmablk = os.path.abspath(args.rdmablk or os.path.join(args.build, "initiator/rdmablk"))
    missing = [what for what, ok in (
        (f"fio ({args.fio})", shutil.which(args.fio)),
        (f"fio's examples ({args.examples})", os.path.isdir(args.examples)),
        (f"the engine ({args.engine})", os.path.isfile(args.engine))) if not ok]
    if missing:
        print("SKIP: missing " + ", ".join(missing) + " (scripts/setup fetches fio's source; the engine is "
              "built when it is there)")
        return 77
    for b in (target, rdmablk):
        if not os.path.isfile(b):
            print(f"error: {b} not built", file=sys.stderr)
            return 1

    work = args.keep or tempfile.mkdtemp(prefix="rdmablk-fio-examples-")
    os.makedirs(work, exist_ok=True)
    port = free_port()
    cfg = benchlib.write_target_config(
        os.path.join(work, "target.yaml"), port, NQN,
        [{"nsid": 1, "backend": "ram", "size": args.ns_size, "block_size": 512}],
        extra="reactors: 1\nlog_level: warn\n")
    # ioengine=rdmablk by name, as installed: Debian's fio dlopen()s "rdmablk" from the library path (the
    # install puts a symlink LIBDIR/rdmablk there); here a symlink in the work folder. (external:PATH
    # is not used: fio 3.33's io_submit_mode=offload workers lose the path and fail to load it.)
    libdir = os.path.join(work, "lib")
    os.makedirs(libdir, exist_ok=True)
    link = os.path.join(libdir, "rdmablk")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.abspath(args.engine), link)
    fio_env = dict(os.environ, LD_LIBRARY_PATH=libdir + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else ""))
    tlog = os.path.join(work, "target.log")
    open(tlog, "w").close()
    rows, failed, skipped = [], [], []
    proc = None
    try:
        # Ready when it accepts connections (log_level: warn hides the ready line; a loaded machine may take a
        # while).
        pin_t = ["taskset", "-c", args.target_cpu] if args.target_cpu else []
        try:
            proc = benchlib.start_target(pin_t + [target, "--config", cfg, "--control-socket",
                                                  os.path.join(work, "target.sock")], tlog, timeout=120, port=port)
        except benchlib.TargetError as e:
            raise Failure(str(e))
        names = args.only or list(EXAMPLES)
        guard_missing = offload_guard_missing()
        for name in names:
            src = os.path.join(args.examples, name + ".fio")
            if not os.path.isfile(src):
                failed.append(f"{name}: {src} does not exist")
                continue
            case = EXAMPLES.get(name, {})
            # --size scales the examples that have a size, not the rate-limited ones (their size is their duration).
            size = args.size if args.size and case.get("size") and not case.get("rated") else case.get("size")
            with open(src) as f:
                text = rewrite(f.read(), size, args.runtime, args.cap)
            ours_file = os.path.join(work, name + ".rdmablk.fio")
            fio_file = os.path.join(work, name + ".fio.fio")
            with open(ours_file, "w") as f:
                f.write(text)
            with open(fio_file, "w") as f:
                f.write(for_fio(text, port))
            limit = 180 + args.cap  # no job runs past the cap; a runner still going after that is stuck
            offload = re.search(r"^\s*io_submit_mode\s*=\s*offload", text, re.M) is not None
            if offload and guard_missing:
                skipped.append(f"{name}: fio 3.33 can hang starting io_submit_mode=offload workers unless it runs "
                               f"SCHED_FIFO on one CPU (see offload_guard), and that is refused here: {guard_missing}")
                log(f"{name}: SKIPPED: {skipped[-1]}")
                continue
            try:
                pin = ["taskset", "-c", args.client_cpu] if args.client_cpu else []
                # --kato 30, the engine's default (the bench's is 5 s): no lost controller when a loaded machine
                # deschedules the bench or the target for a few seconds.
                ojs, odt, onotes = run_json(pin + [rdmablk, "bench", ours_file, "-a", "127.0.0.1", "-s", str(port), "-n", NQN,
                                             "--kato", "30", "--output-format=json"], f"{name}: rdmablk bench", limit, work)
                fio_pin = offload_guard(args.client_cpu) if offload else pin
                fjs, fdt, _ = run_json(fio_pin + [args.fio, "--output-format=json", fio_file], f"{name}: fio", limit, work, fio_env)
            except (Failure, subprocess.TimeoutExpired) as e:
                failed.append(f"{name}: {e}")
                continue
            ours, fio = job_summary(ojs), job_summary(fjs)
            time_based = "time_based" in text
            rates = [int(m) for m in re.findall(r"^rate_iops=(\d+)\s*$", text, re.M)]
            mixed = re.search(r"^\s*(rw|readwrite)\s*=\s*(rw|readwrite|randrw)\b", text, re.M) is not None
            variable_bs = re.search(r"^\s*(bssplit|bsrange|blocksize_range)\s*=", text, re.M) is not None
            problems = check_example(name, ours, fio, not time_based, mixed, variable_bs, rates)
            (ob, oi), (fb, fi) = totals(ours), totals(fio)
            rows.append((name, len(ours), oi, fi, sum(ob.values()), sum(fb.values()), odt, fdt, problems))
            for p in problems:
                failed.append(f"{name}: {p}")
            log(f"{name}: rdmablk bench {oi:,.0f} IOPS, fio {fi:,.0f} IOPS" + (" - " + "; ".join(problems) if problems else ""))
    except Failure as e:
        failed.append(str(e))
    finally:
        if proc is not None:
            stop_proc(proc)
        cleanup_procs()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    hdr = "| example | jobs | rdmablk bench IOPS | fio + ioengine=rdmablk IOPS | ratio | bytes (bench / fio) | checks |"
    lines = [hdr, "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, jobs, oi, fi, ob, fb, _, _, problems in rows:
        ratio = f"{oi / fi:.2f}" if fi else "-"
        lines.append(f"| {name} | {jobs} | {oi:,.0f} | {fi:,.0f} | {ratio} | {ob / 2**20:.1f} / {fb / 2**20:.1f} MiB | "
                     f"{'ok' if not problems else '; '.join(problems)} |")
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    if skipped:
        print("SKIPPED:\n  " + "\n  ".join(skipped))
    if failed:
        print("FAILED:\n  " + "\n  ".join(failed))
        return 1
    print(f"all {len(rows)} examples passed" + (f", {len(skipped)} skipped" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
