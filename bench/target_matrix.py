#!/usr/bin/env python3
"""Per-core efficiency of rdmablk-target over NVMe/TCP on 127.0.0.1: a fixed benchmark matrix.

What it measures
  One rdmablk-target (`reactors: 1`, pinned with `taskset -c TARGET_CPU`, default CPU 1) serving two
  namespaces of one subsystem on 127.0.0.1:
    nsid 1  null backend, 4 KiB blocks, 1 GiB: the cost of the NVMe/TCP path itself;
    nsid 2  file backend, O_DIRECT (`direct: true`), a 1 GiB file on a real filesystem (DIR, default
            /var/tmp/rdmablk-bench, tmpfs refused), pre-filled with real (random) data so reads hit
            allocated blocks. The file is kept in DIR for the next run (--rm-file deletes it).
  and driven by `rdmablk bench JOB --output-format=json` pinned with `taskset -c CLIENT_CPU` (default 0):

    case                    namespace  rw         bs    iodepth
    4k randread QD1         null       randread   4k    1
    4k randread QD32        null       randread   4k    32
    4k randread QD128       null       randread   4k    128
    128k read QD16          null       read       128k  16   (sequential)
    4k randwrite QD32       null       randwrite  4k    32
    128k write QD16         null       write      128k  16   (sequential)
    file 4k randread QD32   file       randread   4k    32
    file 4k randread QD1    file       randread   4k    1
    idle                    -          a host connected, no I/O: the target's CPU when nothing happens

  For every run: IOPS, bandwidth (MiB/s), average and p99 completion latency (us) from the bench JSON;
  target CPU-us per I/O, client CPU-us per I/O and the target's busy ratio (see below). Each case runs
  --rounds times; the table shows medians (each metric's median over the rounds).

  idle: `rdmablk` has no command that keeps a connection open without I/O (no rate_iops/thinktime in
  bench jobs; `attach --userspace` needs ublk, `connect` the kernel host). So this script connects its
  own minimal NVMe/TCP host (stdlib sockets: ICReq, Fabrics Connect of the admin queue with KATO 5 s,
  Property Set CC.EN=1, wait for CSTS.RDY, Connect of one I/O queue, then a Keep Alive every KATO/2 as
  the Linux host sends them) and measures the target's CPU while it sits there. If that host cannot
  connect, the idle row is measured with no host at all and the row's note says so.

How CPU per I/O is computed
  CPU time is utime+stime of a process from /proc/PID/stat (fields 14 and 15, clock ticks of
  SC_CLK_TCK, all threads of the process), sampled twice around a measured window:
  * default (--ramp R > 0): the client starts, the script sleeps R seconds (the bench job's ramp_time,
    excluded from the client's statistics), samples, sleeps --runtime seconds and samples again. The
    client's own measured window starts at the same point plus its start-up/connect time, so the
    sampled window lies in steady-state I/O. I/Os in the window = IOPS (bench JSON) x window seconds.
  * --ramp 0: samples right before starting the client and right after it exits, and I/Os = the
    JSON's total_ios (connection set-up/teardown included in the CPU, as a small overhead).
  target us/IO   = target CPU-us in the window / I/Os in the window.
  busy           = target CPU seconds / wall seconds of the window (1.0 = one core fully used; a
                   busy-polling reactor shows ~1.0 whatever the load).
  client us/IO   = (usr_cpu + sys_cpu) / 100 / IOPS x 1e6, from the bench JSON: usr/sys_cpu are the job
                   thread's CPU share over its whole run, so this assumes that share was steady. (The
                   JSON output also has client_us_per_io_window: the client process's /proc ticks over
                   the same window as the target's.)
  Baseline (--baseline-target, optionally --baseline-client): every round starts our target, runs all
  selected cases, stops it, then does the same with the baseline target (the order alternates each
  round: ours/base, base/ours, ...), so only one target process is ever alive; each start gets a fresh
  port. Ratios: IOPS ours/baseline, and the per-core efficiency ratio baseline_target_us_per_io /
  ours_target_us_per_io (> 1: ours spends less target CPU per I/O). File rows also get a local fio
  baseline, run while no target is alive: fio --ioengine=io_uring --direct=1 on the same file, same
  rw/bs/iodepth/runtime/ramp, pinned to the client CPU; ratio IOPS ours/fio.
  The binaries are copied to a temporary directory when the script starts, so a rebuild in the middle of
  a run does not mix builds; the copies, configs and logs are removed on exit (also on Ctrl-C/SIGTERM).
  The machine may be shared and noisy: compare ratios of the same run rather than absolute figures.

Usage
  bench/target_matrix.py                                    # full matrix, 3 rounds of 5 s, build/
  bench/target_matrix.py --runtime 1 --rounds 1 --cases QD1 idle
  bench/target_matrix.py --baseline-target /opt/old/rdmablk-target [--baseline-client /opt/old/rdmablk] \\
      --json results.json --markdown results.md
  bench/target_matrix.py --cases file --dir /mnt/nvme/bench --target-cpu 3 --client-cpu 2
  bench/target_matrix.py --tls --cases "4k randread QD32" "128k read QD8" --rounds 5

TLS (--tls)
  The same binaries twice: "ours" is the target with `tls: required` on its listener and a host PSK
  (`rdmablk gen-tls-key`, hosts: [{nqn, tls_psk}]), driven by `rdmablk bench -q HOST --tls-key-file KEY`; the
  baseline is plain NVMe/TCP (allow_any_host). Rounds alternate as with --baseline-target, so "IOPS ours/base"
  is TLS/plain and "per-core eff. base/ours" is plain target us/IO / TLS target us/IO. The target log says
  whether the records went through kernel TLS or userspace TLS. The idle row's python host speaks no TLS
  (its note says so on the TLS side).
"""
import argparse
import datetime
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import cleanup_procs, cpu_ticks, forget, free_port, log, spawn, stop_proc, tail  # noqa: E402,F401

NQN = "nqn.2024-11.io.rdmablk:matrix"
TLS_HOSTNQN = "nqn.2024-11.io.rdmablk:matrix-host"
NSID_NULL, NSID_FILE = 1, 2
NS_SIZE = 1 << 30
TICK = os.sysconf("SC_CLK_TCK")

# name, namespace kind, rw, bs, iodepth
CASES = [
    ("4k randread QD1", "null", "randread", "4k", 1),
    ("4k randread QD32", "null", "randread", "4k", 32),
    ("4k randread QD128", "null", "randread", "4k", 128),
    ("128k read QD16", "null", "read", "128k", 16),
    ("128k read QD8", "null", "read", "128k", 8),
    ("4k randwrite QD32", "null", "randwrite", "4k", 32),
    ("128k write QD16", "null", "write", "128k", 16),
    ("file 4k randread QD32", "file", "randread", "4k", 32),
    ("file 4k randread QD1", "file", "randread", "4k", 1),
    ("idle", "idle", None, None, 0),
]


# The processes, the port, the log and the target's start: bench/benchlib.py.
BenchError = benchlib.BenchError


# --- binaries, data file -----------------------------------------------------------------------------

def snapshot_binary(src, dst_dir, name):
    """Copy a binary (retrying while it is being rewritten by a rebuild) and check that it runs."""
    if not os.path.isfile(src):
        sys.exit(f"error: {src} does not exist (build it, or pass --build/--target/--client)")
    os.makedirs(dst_dir, exist_ok=True)
    dst = os.path.join(dst_dir, name)
    last = ""
    for attempt in range(30):
        try:
            before = os.stat(src)
            shutil.copy2(src, dst)
            after = os.stat(src)
            if (before.st_mtime_ns, before.st_size) != (after.st_mtime_ns, after.st_size):
                raise OSError("changed while copying")
            r = subprocess.run([dst, "--version"], capture_output=True, text=True, timeout=30)
            if r.returncode == 0:
                return dst
            last = (r.stderr or r.stdout).strip() or f"--version exited with {r.returncode}"
            if time.time() - os.stat(src).st_mtime > 60:
                break  # not being rebuilt: broken, waiting will not help
        except (OSError, subprocess.SubprocessError) as e:
            last = str(e)
        log(f"  {src} not usable yet ({last}); retrying (rebuild in progress?)")
        time.sleep(2)
    sys.exit(f"error: cannot snapshot {src}: {last}")


def fs_type(path):
    path = os.path.realpath(path)
    best, kind = "", "?"
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            mnt = parts[1].replace("\\040", " ")
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, kind = mnt, parts[2]
    return kind


def prepare_file(directory):
    os.makedirs(directory, exist_ok=True)
    kind = fs_type(directory)
    if kind in ("tmpfs", "ramfs"):
        sys.exit(f"error: {directory} is on {kind}; the file backend case needs a real filesystem (--dir)")
    path = os.path.join(directory, "target_matrix-1g.img")
    try:
        st = os.stat(path)
        if st.st_size == NS_SIZE and st.st_blocks * 512 >= NS_SIZE:
            return path, kind
    except FileNotFoundError:
        pass
    log(f"filling {path} with 1 GiB of data ({kind}) ...")
    tmp = path + ".filling"
    subprocess.run(["fio", "--name=fill", f"--filename={tmp}", f"--size={NS_SIZE}", "--rw=write", "--bs=1m",
                    "--ioengine=io_uring", "--direct=1", "--iodepth=8", "--refill_buffers",
                    "--output-format=terse"], check=True, stdout=subprocess.DEVNULL)
    os.rename(tmp, path)
    return path, kind


# --- the target --------------------------------------------------------------------------------------

class Target:
    def __init__(self, label, binary, src, workdir, data_file, cpu, tls_key=None):
        self.label, self.binary, self.data_file, self.cpu = label, binary, data_file, cpu
        self.tls_key = tls_key  # (interchange text, file path) of the host PSK: tls: required
        self.what = f"{label} target {src} (run from the copy {binary})"
        self.dir = os.path.join(workdir, label)
        os.makedirs(self.dir, exist_ok=True)
        self.proc = None
        self.port = None
        self.log_path = os.path.join(self.dir, "target.log")
        self.starts = 0

    def start(self):
        self.port = free_port()
        self.starts += 1
        config = os.path.join(self.dir, "target.yaml")
        hosts = f"      - nqn: {TLS_HOSTNQN}\n        tls_psk: \"{self.tls_key[0]}\"\n" if self.tls_key else None
        benchlib.write_target_config(
            config, self.port, NQN,
            [{"nsid": NSID_NULL, "backend": "null", "size": NS_SIZE, "block_size": 4096},
             {"nsid": NSID_FILE, "backend": "file", "path": self.data_file, "size": NS_SIZE, "direct": "true"}],
            hosts=hosts, tls="required" if self.tls_key else None, extra="reactors: 1\nlog_level: info\n")
        with open(self.log_path, "a") as logf:
            logf.write(f"=== start {self.starts} on port {self.port}\n")
        # The log keeps every start's lines: this start is ready at its own ready line, the starts-th.
        self.proc = benchlib.start_target(
            ["taskset", "-c", str(self.cpu), self.binary, "--config", config, "--control-socket",
             os.path.join(os.path.dirname(config), "target.sock")],
            self.log_path, timeout=20, what=self.what, starts=self.starts)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self):
        if not self.alive():
            raise BenchError(f"{self.label} target died (status {self.proc.returncode}); its log:\n"
                             f"{tail(self.log_path)}")

    def stop(self):
        if self.proc is None:
            return
        rc = stop_proc(self.proc)
        self.proc = None
        if rc not in (0, -signal.SIGTERM):
            log(f"warning: {self.label} target exited with status {rc}; log tail:\n{tail(self.log_path)}")


# --- a minimal NVMe/TCP host that holds an idle connection -------------------------------------------

class IdleHost:
    """Admin queue + one I/O queue, connected and enabled, sending Keep Alive every KATO/2."""

    def __init__(self, port, kato_ms=5000):
        self.port, self.kato_ms = port, kato_ms
        self.hostid = uuid.uuid4()
        self.hostnqn = f"nqn.2014-08.org.nvmexpress:uuid:{self.hostid}"
        self.cid = 0
        self.admin = self.io = None

    @staticmethod
    def _recv(s, n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise BenchError("idle host: target closed the connection")
            buf += chunk
        return buf

    def _socket(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        icreq = bytearray(128)
        struct.pack_into("<BBBBI", icreq, 0, 0x00, 0, 128, 0, 128)  # ICReq, PFV 0, HPDA 0, no digests
        s.sendall(icreq)
        resp = self._recv(s, 128)
        if resp[0] != 0x01:
            raise BenchError(f"idle host: expected ICResp, got PDU type {resp[0]:#x}")
        return s

    def _command(self, s, sqe, data=b""):
        self.cid = (self.cid + 1) & 0xFFFF
        struct.pack_into("<H", sqe, 2, self.cid)
        sqe[1] = 0x40  # PSDT: SGL
        if not data:  # SGL1: transport SGL data block, no data
            struct.pack_into("<QI3xB", sqe, 24, 0, 0, 0x5A)
        else:  # SGL1: data block, offset into the in-capsule data
            struct.pack_into("<QI3xB", sqe, 24, 0, len(data), 0x01)
        hdr = struct.pack("<BBBBI", 0x04, 0, 72, 72 if data else 0, 72 + len(data))
        s.sendall(hdr + bytes(sqe) + data)
        ch = self._recv(s, 8)
        ptype, _, _, _, plen = struct.unpack("<BBBBI", ch)
        body = self._recv(s, plen - 8)
        if ptype != 0x05:
            raise BenchError(f"idle host: expected a CapsuleResp, got PDU type {ptype:#x}")
        dw0, dw1, _sqhd, _sqid, _cid, status = struct.unpack_from("<IIHHHH", body, 0)
        if status >> 1:
            raise BenchError(f"idle host: command {sqe[0]:#x}/{sqe[4]:#x} failed with status {status >> 1:#x}")
        return dw0 | (dw1 << 32)

    def _connect(self, s, qid, sqsize, kato, cntlid):
        sqe = bytearray(64)
        sqe[0], sqe[4] = 0x7F, 0x01
        struct.pack_into("<HHHBxI", sqe, 40, 0, qid, sqsize - 1, 0, kato)
        data = bytearray(1024)
        data[0:16] = self.hostid.bytes
        struct.pack_into("<H", data, 16, cntlid)
        nqn = NQN.encode()
        data[256:256 + len(nqn)] = nqn
        data[512:512 + len(self.hostnqn)] = self.hostnqn.encode()
        return self._command(s, sqe, bytes(data)) & 0xFFFF

    def _property(self, s, offset, value=None, size8=False):
        sqe = bytearray(64)
        sqe[0], sqe[4] = 0x7F, 0x04 if value is None else 0x00
        sqe[40] = 1 if size8 else 0
        struct.pack_into("<I", sqe, 44, offset)
        if value is not None:
            struct.pack_into("<Q", sqe, 48, value)
        return self._command(s, sqe)

    def connect(self):
        self.admin = self._socket()
        cntlid = self._connect(self.admin, 0, 32, self.kato_ms, 0xFFFF)
        self._property(self.admin, 0x0, size8=True)                       # CAP
        self._property(self.admin, 0x14, (4 << 20) | (6 << 16) | 1)       # CC: IOCQES 4, IOSQES 6, EN
        deadline = time.monotonic() + 10
        while not self._property(self.admin, 0x1C) & 1:                   # CSTS.RDY
            if time.monotonic() > deadline:
                raise BenchError("idle host: CSTS.RDY not set 10 s after CC.EN")
            time.sleep(0.01)
        self.io = self._socket()
        self._connect(self.io, 1, 32, 0, cntlid)
        return cntlid

    def keep_alive(self):
        sqe = bytearray(64)
        sqe[0] = 0x18
        self._command(self.admin, sqe)

    def idle_for(self, seconds):
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, self.kato_ms / 2000))
            if time.monotonic() < end:
                self.keep_alive()

    def close(self):
        if self.admin is not None:
            try:
                self._property(self.admin, 0x14, (4 << 20) | (6 << 16) | 1 | (1 << 14))  # CC.SHN normal
            except (OSError, BenchError):
                pass
        for s in (self.io, self.admin):
            if s is not None:
                s.close()
        self.admin = self.io = None


# --- runs --------------------------------------------------------------------------------------------

def summarize(job, rw):
    d = job["write" if "write" in rw else "read"]
    clat = d.get("clat_ns", {})
    pct = clat.get("percentile", {})
    iops = job["read"]["iops"] + job["write"]["iops"]
    return {"iops": iops, "mib_s": (job["read"]["bw_bytes"] + job["write"]["bw_bytes"]) / 2**20,
            "clat_avg_us": clat.get("mean", 0) / 1000, "clat_p99_us": pct.get("99.000000", 0) / 1000,
            "total_ios": job["read"]["total_ios"] + job["write"]["total_ios"],
            "client_usr_cpu": job["usr_cpu"], "client_sys_cpu": job["sys_cpu"],
            "client_us_per_io": (job["usr_cpu"] + job["sys_cpu"]) / 100 / iops * 1e6 if iops else None}


def run_bench(args, client, target, case, workdir):
    name, kind, rw, bs, qd = case
    nsid = NSID_FILE if kind == "file" else NSID_NULL
    job = os.path.join(workdir, "job.fio")
    with open(job, "w") as f:
        f.write(f"[{name.replace(' ', '-')}]\nrw={rw}\nbs={bs}\niodepth={qd}\nruntime={args.runtime}\n"
                f"ramp_time={args.ramp}\ntime_based=1\n"
                f"filename=tcp://127.0.0.1:{target.port}/{NQN}/{nsid}\n")
    cmd = ["taskset", "-c", str(args.client_cpu), client, "bench", job, "--output-format=json"]
    if target.tls_key:
        cmd += ["-q", TLS_HOSTNQN, "--tls-key-file", target.tls_key[1]]
    tpid = target.proc.pid
    if args.ramp > 0:
        p = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t_start = time.monotonic()
        time.sleep(args.ramp)
        w0, c0, k0 = time.monotonic(), cpu_ticks(tpid), cpu_ticks(p.pid)
        time.sleep(max(0.0, t_start + args.ramp + args.runtime - time.monotonic()))
        w1, c1, k1 = time.monotonic(), cpu_ticks(tpid), cpu_ticks(p.pid)
        client_alive_at_end = p.poll() is None
    else:
        w0, c0 = time.monotonic(), cpu_ticks(tpid)
        p = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        k0 = 0
    try:
        out, err = p.communicate(timeout=args.ramp + args.runtime + 120)
    except subprocess.TimeoutExpired:
        stop_proc(p)
        raise BenchError(f"{case[0]}: rdmablk bench did not finish")
    if args.ramp <= 0:
        w1, c1 = time.monotonic(), cpu_ticks(tpid)
        k1, client_alive_at_end = None, True
    forget(p)
    target.check_alive()
    if p.returncode != 0:
        raise BenchError(f"{case[0]}: rdmablk bench exited with {p.returncode}: {err.strip()[-2000:]}")
    try:
        res = summarize(json.loads(out)["jobs"][0], rw)
    except (ValueError, KeyError, IndexError) as e:
        raise BenchError(f"{case[0]}: cannot parse the bench JSON ({e}): {out[:500]!r}")
    if not client_alive_at_end:
        log(f"  warning: {case[0]}: the client exited before the end of the sampled window")
    window = w1 - w0
    ios = res["iops"] * window if args.ramp > 0 else res["total_ios"]
    tcpu_us = (c1 - c0) / TICK * 1e6
    res.update({"window_s": window, "window_ios": ios, "target_cpu_s": tcpu_us / 1e6,
                "target_us_per_io": tcpu_us / ios if ios else None, "target_busy": tcpu_us / 1e6 / window,
                "client_us_per_io_window": ((k1 - k0) / TICK * 1e6 / ios) if (k1 is not None and ios) else None})
    return res


def run_idle(args, target):
    host, note = IdleHost(target.port), None
    try:
        try:
            cntlid = host.connect()
            note = "python NVMe/TCP host connected (admin + 1 I/O queue, CC.EN=1, KATO 5 s, Keep Alive every 2.5 s)"
        except (OSError, BenchError) as e:
            host.close()
            host = None
            note = f"NO host connected (the python host failed: {e})"
            log(f"  warning: idle: {note}")
        settle = max(args.ramp, 0.5)
        (host.idle_for if host else time.sleep)(settle)
        w0, c0 = time.monotonic(), cpu_ticks(target.proc.pid)
        (host.idle_for if host else time.sleep)(args.runtime)
        w1, c1 = time.monotonic(), cpu_ticks(target.proc.pid)
    finally:
        if host:
            host.close()
    target.check_alive()
    cpu = (c1 - c0) / TICK
    return {"window_s": w1 - w0, "target_cpu_s": cpu, "target_busy": cpu / (w1 - w0), "note": note}


def run_fio(args, data_file, case):
    _name, _kind, rw, bs, qd = case
    cmd = ["taskset", "-c", str(args.client_cpu), "fio", "--name=local", f"--filename={data_file}",
           "--ioengine=io_uring", "--direct=1", f"--rw={rw}", f"--bs={bs}", f"--iodepth={qd}",
           f"--size={NS_SIZE}", f"--runtime={args.runtime}", f"--ramp_time={args.ramp}", "--time_based",
           "--output-format=json"]
    p = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=args.ramp + args.runtime + 120)
    forget(p)
    if p.returncode != 0:
        raise BenchError(f"{case[0]}: fio exited with {p.returncode}: {err.strip()[-2000:]}")
    res = summarize(json.loads(out[out.index("{"):])["jobs"][0], rw)
    return res


def with_retries(what, fn, attempts=3):
    for i in range(attempts):
        try:
            return fn()
        except BenchError as e:
            if i == attempts - 1 or "target died" in str(e):
                raise
            log(f"  {what} failed ({str(e).splitlines()[0]}); retrying")
            time.sleep(2)


# --- report ------------------------------------------------------------------------------------------

def med(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def aggregate(runs):
    keys = ["iops", "mib_s", "clat_avg_us", "clat_p99_us", "target_us_per_io", "client_us_per_io",
            "client_us_per_io_window", "target_busy", "target_cpu_s", "window_s"]
    return {k: med(runs, k) for k in keys if any(k in r for r in runs)}


def fmt(v, digits=1):
    if v is None:
        return "-"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def ratio(a, b):
    return a / b if a is not None and b else None


def build_rows(results, have_base, have_fio):
    rows = []
    for case in results:
        o = case["ours"]["median"]
        b = case.get("baseline", {}).get("median") if have_base else None
        f = case.get("fio", {}).get("median") if have_fio else None
        idle = case["kind"] == "idle"
        row = [case["case"], fmt(o.get("iops"), 0), fmt(o.get("mib_s")), fmt(o.get("clat_avg_us")),
               fmt(o.get("clat_p99_us")), fmt(o.get("target_us_per_io"), 2), fmt(o.get("client_us_per_io"), 2),
               fmt(o.get("target_busy"), 3)]
        if have_base:
            row += [fmt(b.get("iops"), 0) if b else "-", fmt(b.get("target_us_per_io"), 2) if b else "-",
                    fmt(b.get("target_busy"), 3) if b else "-"]
            row += ["-", "-"] if idle or not b else [fmt(ratio(o.get("iops"), b.get("iops")), 2),
                                                     fmt(ratio(b.get("target_us_per_io"), o.get("target_us_per_io")), 2)]
        if have_fio:
            row += [fmt(f.get("iops"), 0), fmt(ratio(o.get("iops"), f.get("iops")), 2)] if f else ["-", "-"]
        rows.append(row)
    return rows


def markdown(meta, results):
    have_base = meta["baseline_target"] is not None
    have_fio = any("fio" in c for c in results)
    head = ["case", "IOPS", "MiB/s", "avg us", "p99 us", "target us/IO", "client us/IO", "target busy"]
    if have_base:
        head += ["base IOPS", "base target us/IO", "base busy", "IOPS ours/base", "per-core eff. base/ours"]
    if have_fio:
        head += ["local fio IOPS", "IOPS ours/fio"]
    lines = [f"## rdmablk-target matrix, NVMe/TCP 127.0.0.1 ({meta['date']})", "",
             f"- target `{meta['target']}` (reactors: 1, taskset -c {meta['target_cpu']}), "
             f"client `{meta['client']}` (taskset -c {meta['client_cpu']})"]
    if have_base:
        lines.append(f"- baseline target `{meta['baseline_target']}`, client `{meta['baseline_client']}`; "
                     "rounds alternate ours/baseline, one target alive at a time")
    lines += [f"- {meta['rounds']} round(s) x {meta['runtime']} s (ramp {meta['ramp']} s), medians; "
              f"file namespace: `{meta['data_file']}` ({meta['data_fs']}, O_DIRECT)",
              f"- CPU from /proc/PID/stat utime+stime: {meta['window_mode']}",
              "- target us/IO = target CPU-us / I/Os in that window; target busy = target CPU s / wall s; "
              "client us/IO = bench JSON (usr_cpu+sys_cpu)/100/IOPS"]
    if have_base:
        lines.append("- per-core eff. = base target us/IO / ours (> 1: ours uses less target CPU per I/O)")
    if meta.get("tls"):
        lines.append("- --tls: ours = `tls: required` with a TLS 1.3 PSK (TLS_AES_128_GCM_SHA256), baseline = the same "
                     "binaries over plain NVMe/TCP: IOPS ours/base = TLS/plain")
    if meta.get("idle_note"):
        lines.append(f"- idle: {meta['idle_note']}")
    lines += ["", "| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in build_rows(results, have_base, have_fio)]
    return "\n".join(lines) + "\n"


# --- main --------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--build", default=os.path.join(root, "build"), help="build directory (default: %(default)s)")
    ap.add_argument("--target", help="rdmablk-target binary (default: BUILD/target/rdmablk-target)")
    ap.add_argument("--client", help="rdmablk binary (default: BUILD/initiator/rdmablk)")
    ap.add_argument("--baseline-target", help="another rdmablk-target binary to compare with")
    ap.add_argument("--baseline-client", help="rdmablk binary that drives the baseline target (default: --client)")
    ap.add_argument("--target-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--runtime", type=int, default=5, help="measured seconds per run (default 5)")
    ap.add_argument("--ramp", type=int, default=1,
                    help="ramp_time seconds before the measured window (default 1); 0: sample around the whole run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", nargs="+", metavar="SUBSTR",
                    help="only cases whose name contains one of these, or equals one (case-insensitive; commas also split)")
    ap.add_argument("--dir", default="/var/tmp/rdmablk-bench", help="directory of the 1 GiB file (not tmpfs)")
    ap.add_argument("--rm-file", action="store_true", help="delete the 1 GiB file at the end")
    ap.add_argument("--no-fio", action="store_true", help="skip the local fio baseline of the file rows")
    ap.add_argument("--json", metavar="PATH", help="write all results (every run and the medians) as JSON")
    ap.add_argument("--markdown", metavar="PATH", help="also write the markdown table to PATH")
    ap.add_argument("--tls", action="store_true",
                    help="compare TLS (tls: required, ours) with plain NVMe/TCP (baseline), same binaries")
    ap.add_argument("--keep-workdir", action="store_true",
                    help="keep the temporary directory (target configs and logs, job files) and print its path")
    args = ap.parse_args()
    if args.runtime < 1 or args.rounds < 1 or args.ramp < 0:
        ap.error("--runtime and --rounds must be >= 1, --ramp >= 0")

    cases = CASES
    if args.cases:
        subs = [s.strip().lower() for a in args.cases for s in a.split(",") if s.strip()]
        picked = set()
        for s in subs:  # an exact case name selects only that case; anything else is a substring
            exact = [c[0] for c in CASES if c[0].lower() == s]
            picked.update(exact or [c[0] for c in CASES if s in c[0].lower()])
        cases = [c for c in CASES if c[0] in picked]
        if not cases:
            ap.error(f"--cases {args.cases} matches none of: {', '.join(c[0] for c in CASES)}")
    for tool in ("taskset", "fio"):
        if not shutil.which(tool):
            sys.exit(f"error: {tool} not found")

    benchlib.exit_on_signals()
    workdir = tempfile.mkdtemp(prefix="rdmablk-matrix-")
    targets = []
    data_file = None
    try:
        target_src = args.target or os.path.join(args.build, "target/rdmablk-target")
        client_src = args.client or os.path.join(args.build, "initiator/rdmablk")
        log("snapshotting binaries ...")
        variants = [{"label": "ours", "target_src": target_src, "client_src": client_src,
                     "target": snapshot_binary(target_src, os.path.join(workdir, "bin/ours"), "rdmablk-target"),
                     "client": snapshot_binary(client_src, os.path.join(workdir, "bin/ours"), "rdmablk")}]
        if args.baseline_target:
            bclient_src = args.baseline_client or client_src
            variants.append({"label": "baseline", "target_src": args.baseline_target, "client_src": bclient_src,
                             "target": snapshot_binary(args.baseline_target, os.path.join(workdir, "bin/base"),
                                                       "rdmablk-target"),
                             "client": snapshot_binary(bclient_src, os.path.join(workdir, "bin/base"), "rdmablk")})
        elif args.baseline_client:
            ap.error("--baseline-client needs --baseline-target")
        tls_key = None
        if args.tls:
            if args.baseline_target:
                ap.error("--tls compares the same binaries with and without TLS: no --baseline-target")
            key = subprocess.run([variants[0]["client"], "gen-tls-key"], capture_output=True, text=True,
                                 check=True).stdout.strip()
            key_path = os.path.join(workdir, "host.psk")
            with open(key_path, "w") as f:
                os.fchmod(f.fileno(), 0o600)
                f.write(key + "\n")
            tls_key = (key, key_path)
            variants.append(dict(variants[0], label="baseline"))
        data_file, data_fs = prepare_file(args.dir)
        for v in variants:
            v["t"] = Target(v["label"], v["target"], v["target_src"], workdir, data_file, args.target_cpu,
                            tls_key if v["label"] == "ours" else None)
            targets.append(v["t"])

        window_mode = (f"sampled after the {args.ramp} s ramp and again {args.runtime} s later; I/Os in the window "
                       "= IOPS x window" if args.ramp > 0 else
                       "sampled right before the client starts and right after it exits (ramp_time=0); "
                       "I/Os = total_ios")
        meta = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "target": target_src,
                "client": client_src, "baseline_target": args.baseline_target or (f"{target_src} without TLS" if args.tls else None),
                "baseline_client": variants[1]["client_src"] if len(variants) > 1 else None,
                "tls": args.tls,
                "target_cpu": args.target_cpu, "client_cpu": args.client_cpu, "runtime": args.runtime,
                "ramp": args.ramp, "rounds": args.rounds, "data_file": data_file, "data_fs": data_fs,
                "window_mode": window_mode, "clk_tck": TICK}
        runs = {c[0]: {v["label"]: [] for v in variants} for c in cases}
        fio_runs = {c[0]: [] for c in cases if c[1] == "file"} if not args.no_fio else {}
        idle_notes = set()
        total = args.rounds * (len(variants) * len(cases) + len(fio_runs))
        done = 0
        for rnd in range(args.rounds):
            order = variants if rnd % 2 == 0 else list(reversed(variants))
            for v in order:
                t = v["t"]
                t.start()
                log(f"round {rnd + 1}/{args.rounds}: {v['label']} target pid {t.proc.pid} on port {t.port}")
                try:
                    for case in cases:
                        done += 1
                        if case[1] == "idle":
                            r = run_idle(args, t)
                            idle_notes.add(r["note"])
                            log(f"  [{done}/{total}] {v['label']:8} {case[0]:22} target busy {r['target_busy']:.3f}")
                        else:
                            r = with_retries(case[0], lambda: run_bench(args, v["client"], t, case, workdir))
                            log(f"  [{done}/{total}] {v['label']:8} {case[0]:22} {r['iops']:>10.0f} IOPS  "
                                f"avg {r['clat_avg_us']:7.1f} us  target {fmt(r['target_us_per_io'], 2)} us/IO  "
                                f"busy {r['target_busy']:.2f}  client {fmt(r['client_us_per_io'], 2)} us/IO")
                        r["round"] = rnd + 1
                        runs[case[0]][v["label"]].append(r)
                finally:
                    t.stop()
            for case in cases:  # no target alive now
                if case[0] in fio_runs:
                    done += 1
                    r = with_retries(case[0] + " (fio)", lambda: run_fio(args, data_file, case))
                    r["round"] = rnd + 1
                    fio_runs[case[0]].append(r)
                    log(f"  [{done}/{total}] {'fio':8} {case[0]:22} {r['iops']:>10.0f} IOPS  "
                        f"avg {r['clat_avg_us']:7.1f} us  client {fmt(r['client_us_per_io'], 2)} us/IO")

        meta["idle_note"] = "; ".join(sorted(idle_notes)) if idle_notes else None
        results = []
        for case in cases:
            name, kind, rw, bs, qd = case
            entry = {"case": name, "kind": kind, "rw": rw, "bs": bs, "iodepth": qd}
            for v in variants:
                rs = runs[name][v["label"]]
                entry["ours" if v["label"] == "ours" else "baseline"] = {"median": aggregate(rs), "runs": rs}
            if name in fio_runs:
                entry["fio"] = {"median": aggregate(fio_runs[name]), "runs": fio_runs[name]}
            o, b = entry["ours"]["median"], entry.get("baseline", {}).get("median")
            if b and kind != "idle":
                entry["iops_ratio_ours_base"] = ratio(o.get("iops"), b.get("iops"))
                entry["per_core_efficiency_ratio"] = ratio(b.get("target_us_per_io"), o.get("target_us_per_io"))
            if "fio" in entry:
                entry["iops_ratio_ours_fio"] = ratio(o.get("iops"), entry["fio"]["median"].get("iops"))
            results.append(entry)
        md = markdown(meta, results)
        print(md, end="")
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(md)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"meta": meta, "results": results}, f, indent=2)
                f.write("\n")
    except BenchError as e:
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:
        sys.exit("interrupted")
    finally:
        for t in targets:
            t.stop()
        cleanup_procs()
        if args.keep_workdir:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        if args.rm_file and data_file and os.path.exists(data_file):
            os.unlink(data_file)


if __name__ == "__main__":
    main()
