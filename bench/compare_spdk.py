#!/usr/bin/env python3
"""rdmablk-target beside SPDK's nvmf_tgt over NVMe/TCP on 127.0.0.1, with the same clients against both:
SPDK's spdk_nvme_perf and `rdmablk bench`. Each target runs alone, pinned to --target-cpu; the client is
pinned to --client-cpu. Every round runs each case on both targets back to back, a target start each (the
order alternates from case to case and round to round), with every client; the table gives medians over
the rounds and the median of the rounds' paired ratios.

  bench/compare_spdk.py --spdk /work/spdk-peer [--rounds 3] [--runtime 5] [--case 'null 4k randread QD32']
  bench/compare_spdk.py                     # no SPDK build: rdmablk alone, says so

Columns, per case and client: IOPS of each target, the ratio rdmablk / SPDK, each target's CPU use during
the run (SPDK's reactor polls: ~100% whatever the load), IOPS per busy target core and its ratio, and the
mean latency (the QD1 rows' figure of merit). File cases use one preallocated file on --file-dir (a real
file system: O_DIRECT), SPDK's uring bdev and rdmablk's file backend on the same file, plus local fio
(io_uring, O_DIRECT, pinned to the target CPU) on that file as the device's own figure.

SPDK's build (../shared/SPDK-PEER.md) stays outside the project: this script only runs its binaries. It
needs hugepages for nvmf_tgt and spdk_nvme_perf (vm.nr_hugepages >= 1100, hugetlbfs mounted): it sets both
when it can and says so when it cannot.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

NQN = "nqn.2016-06.io.spdk:compare"
HOSTNQN = "nqn.2014-08.org.nvmexpress:uuid:5b0f3b0e-6a4e-4e0b-9c55-2f1d4c7a9e01"
FILE_BYTES = 1 << 30  # the file namespace: 1 GiB, written once so reads hit allocated blocks

# name, backend (null|file), rw (fio / spdk_nvme_perf words), block size, queue depth
CASES = [
    ("null 4k randread QD1", "null", "randread", 4096, 1),
    ("null 4k randread QD32", "null", "randread", 4096, 32),
    ("null 4k randread QD128", "null", "randread", 4096, 128),
    ("null 4k randwrite QD1", "null", "randwrite", 4096, 1),
    ("null 4k randwrite QD32", "null", "randwrite", 4096, 32),
    ("null 128k read QD16", "null", "read", 131072, 16),
    ("null 128k write QD16", "null", "write", 131072, 16),
    ("file 4k randread QD32", "file", "randread", 4096, 32),
    ("file 4k randread QD1", "file", "randread", 4096, 1),
]
CLIENTS = ("spdk_nvme_perf", "rdmablk bench")


# --- the targets -----------------------------------------------------------------------------------------

class Rdmablk:
    name = "rdmablk"

    def __init__(self, args, work, file_path):
        self.args, self.work, self.file_path = args, work, file_path
        self.port = benchlib.free_port()
        self.proc = None

    def start(self):
        cfg = os.path.join(self.work, "rdmablk.yaml")
        namespaces = [{"nsid": 1, "backend": "null", "size": "1GiB"}]
        if self.file_path:
            namespaces.append({"nsid": 2, "backend": "file", "path": self.file_path, "direct": "true"})
        extra = "reactors: 1\n"
        benchlib.write_target_config(cfg, self.port, NQN, namespaces, extra=extra,
                                     listener={"c2h_success": self.args.c2h_success})
        # A log per start: start_target waits for the ready line, which an earlier round's log already has.
        log = os.path.join(self.work, f"rdmablk-{self.port}.log")
        self.proc = benchlib.start_target(["taskset", "-c", str(self.args.target_cpu), self.args.target, "--config",
                                           cfg, "--control-socket", os.path.join(self.work, "ctl.sock")], log)

    def nsid(self, backend):
        return 1 if backend == "null" else 2

    def stop(self):
        benchlib.stop_proc(self.proc, timeout=30)


class Spdk:
    name = "SPDK"

    def __init__(self, args, work, file_path):
        self.args, self.work, self.file_path = args, work, file_path
        self.port = benchlib.free_port()
        self.sock = os.path.join(work, "spdk.sock")
        self.proc = None

    def rpc(self, *words):
        out = subprocess.run([sys.executable, os.path.join(self.args.spdk, "scripts/rpc.py"), "-s", self.sock,
                              *words], capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise benchlib.BenchError(f"SPDK rpc {' '.join(words)} failed: {out.stderr.strip() or out.stdout}")
        return out.stdout

    def start(self):
        log = os.path.join(self.work, f"spdk-{self.port}.log")
        mask = hex(1 << self.args.target_cpu)
        with open(log, "a") as logf:
            self.proc = benchlib.spawn([os.path.join(self.args.spdk, "build/bin/nvmf_tgt"), "-m", mask, "-s", "1024",
                                        "--no-pci", "-r", self.sock], stdout=logf, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=spdk_env(self.args.spdk))
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise benchlib.TargetError(f"nvmf_tgt exited with {self.proc.returncode}:\n{benchlib.tail(log)}")
            if os.path.exists(self.sock):
                try:
                    self.rpc("framework_wait_init")
                    break
                except benchlib.BenchError:
                    pass
            if time.monotonic() > deadline:
                raise benchlib.TargetError(f"nvmf_tgt not ready after 60 s:\n{benchlib.tail(log)}")
            time.sleep(0.2)
        self.rpc("nvmf_create_transport", "-t", "TCP")
        self.rpc("bdev_null_create", "Null0", "1024", "4096")
        if self.file_path:
            self.rpc("bdev_uring_create", self.file_path, "Uring0", "4096")
        self.rpc("nvmf_create_subsystem", NQN, "-a", "-s", "SPDK00000000000001", "-d", "SPDK_compare")
        self.rpc("nvmf_subsystem_add_ns", NQN, "Null0")
        if self.file_path:
            self.rpc("nvmf_subsystem_add_ns", NQN, "Uring0")
        self.rpc("nvmf_subsystem_add_listener", NQN, "-t", "tcp", "-a", "127.0.0.1", "-s", str(self.port), "-f",
                 "ipv4")

    def nsid(self, backend):
        return 1 if backend == "null" else 2

    def stop(self):
        benchlib.stop_proc(self.proc, timeout=30)


def spdk_env(spdk):
    env = dict(os.environ)
    libs = [os.path.join(spdk, d) for d in ("build/lib", "isa-l/.libs", "isa-l-crypto/.libs")]
    env["LD_LIBRARY_PATH"] = ":".join(libs + [env.get("LD_LIBRARY_PATH", "")])
    return env


# --- the clients -----------------------------------------------------------------------------------------

def run_perf(args, target, case):
    """spdk_nvme_perf against TARGET: (IOPS, mean latency in us)."""
    _, backend, rw, bs, qd = case
    trid = (f"trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:{target.port} subnqn:{NQN} hostnqn:{HOSTNQN} "
            f"ns:{target.nsid(backend)}")
    cmd = [os.path.join(args.spdk, "build/bin/spdk_nvme_perf"), "-c", hex(1 << args.client_cpu), "-r", trid,
           "-q", str(qd), "-o", str(bs), "-w", rw, "-t", str(args.runtime), "-s", "256"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.runtime + 90, env=spdk_env(args.spdk))
    m = re.search(r"^Total\s*:\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)", out.stdout, re.M)
    if out.returncode != 0 or m is None:
        raise benchlib.BenchError(f"spdk_nvme_perf failed ({out.returncode}):\n{out.stdout[-2000:]}\n"
                                  f"{out.stderr[-2000:]}")
    return float(m.group(1)), float(m.group(3))


def run_bench(args, target, case, work):
    """`rdmablk bench` against TARGET: (IOPS, mean latency in us)."""
    _, backend, rw, bs, qd = case
    job = os.path.join(work, "job.fio")
    with open(job, "w") as f:
        # hipri: poll without sleeping, as spdk_nvme_perf does, so both clients wait for completions alike.
        f.write(f"[j]\nnamespace={target.nsid(backend)}\nrw={rw}\nbs={bs}\niodepth={qd}\n"
                f"runtime={args.runtime}\ntime_based\nhipri\n")
    out = subprocess.run(["taskset", "-c", str(args.client_cpu), args.cli, "bench", job, "-t", "tcp", "-a",
                          "127.0.0.1", "-s", str(target.port), "-n", NQN, "--hostnqn", HOSTNQN,
                          "--output-format=json"], capture_output=True, text=True, timeout=args.runtime + 90)
    if out.returncode != 0:
        raise benchlib.BenchError(f"rdmablk bench failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr}")
    j = json.loads(out.stdout)["jobs"][0]
    side = j["read"] if rw in ("randread", "read") else j["write"]
    return side["iops"], side["lat_ns"]["mean"] / 1e3


def run_client(args, target, client, case, work):
    """One run: (IOPS, mean latency us, the target's CPU use over the run as a fraction of one core)."""
    t0, c0 = time.monotonic(), benchlib.cpu_seconds(target.proc.pid)
    iops, lat = run_perf(args, target, case) if client == "spdk_nvme_perf" else run_bench(args, target, case, work)
    t1, c1 = time.monotonic(), benchlib.cpu_seconds(target.proc.pid)
    return iops, lat, (c1 - c0) / (t1 - t0)


def local_fio(args, file_path, case):
    """fio with io_uring and O_DIRECT on the file itself, pinned to the target CPU: the device's own IOPS."""
    _, _, rw, bs, qd = case
    out = subprocess.run(["taskset", "-c", str(args.target_cpu), "fio", "--name=local", f"--filename={file_path}",
                          "--ioengine=io_uring", "--direct=1", f"--rw={rw}", f"--bs={bs}", f"--iodepth={qd}",
                          f"--runtime={args.runtime}", "--time_based", "--output-format=json"],
                         capture_output=True, text=True, timeout=args.runtime + 60)
    if out.returncode != 0:
        raise benchlib.BenchError(f"fio failed: {out.stderr}")
    r = json.loads(out.stdout)["jobs"][0]["read"]
    return r["iops"], r["lat_ns"]["mean"] / 1e3


# --- setup and report ------------------------------------------------------------------------------------

def hugepages_ready():
    """SPDK's processes need 2 MiB hugepages: reserve them and mount hugetlbfs when we may."""
    try:
        with open("/proc/sys/vm/nr_hugepages") as f:
            if int(f.read()) < 1100:
                with open("/proc/sys/vm/nr_hugepages", "w") as w:
                    w.write("1100")
        with open("/proc/mounts") as f:
            if " hugetlbfs " not in f.read():
                os.makedirs("/dev/hugepages", exist_ok=True)
                subprocess.run(["mount", "-t", "hugetlbfs", "nodev", "/dev/hugepages"], check=True)
        with open("/proc/sys/vm/nr_hugepages") as f:
            return int(f.read()) >= 1100
    except (OSError, subprocess.CalledProcessError) as e:
        benchlib.log(f"hugepages: {e}")
        return False


def make_file(directory):
    path = os.path.join(directory, "rdmablk-compare.img")
    if not os.path.exists(path) or os.path.getsize(path) != FILE_BYTES:
        with open(path, "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(FILE_BYTES >> 20):
                f.write(chunk)
            os.fsync(f.fileno())
    return path


def fmt_row(name, client, res):
    r, s = res.get("rdmablk"), res.get("SPDK")
    cells = [f"{name:24}", f"{client:15}"]
    if s is None:
        cells += [f"{r['iops'] / 1e3:9.1f}k", f"{100 * r['cpu']:5.0f}%", f"{r['lat']:8.1f}"]
        return " ".join(cells)
    per_core = (r["iops"] / max(r["cpu"], 1e-3)) / (s["iops"] / max(s["cpu"], 1e-3))
    cells += [f"{s['iops'] / 1e3:8.1f}k", f"{r['iops'] / 1e3:8.1f}k", f"{r['iops'] / s['iops']:6.2f}",
              f"{100 * s['cpu']:4.0f}%", f"{100 * r['cpu']:4.0f}%", f"{per_core:6.2f}", f"{s['lat']:7.1f}",
              f"{r['lat']:7.1f}", f"{r['lat'] / s['lat']:5.2f}", f"{res['paired_ratio']:6.2f}"]
    return " ".join(cells)


def parse_args():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spdk", help="SPDK build directory (nvmf_tgt, spdk_nvme_perf, scripts/rpc.py)")
    ap.add_argument("--target", default=os.path.join(root, "build/target/rdmablk-target"))
    ap.add_argument("--cli", default=os.path.join(root, "build/initiator/rdmablk"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=5, help="seconds per run")
    ap.add_argument("--target-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--file-dir", default="/var/tmp", help="where the file namespace's 1 GiB file lives")
    ap.add_argument("--c2h-success", default="auto", choices=["auto", "always", "off"],
                    help="rdmablk listener's c2h_success (auto: as the host's SQ flow control says)")
    ap.add_argument("--case", action="append", choices=[c[0] for c in CASES], help="only this case (repeatable)")
    ap.add_argument("--client", action="append", choices=CLIENTS, help="only this client (repeatable)")
    ap.add_argument("--interleave", default="case", choices=["case", "round"],
                    help="case: both targets run each case back to back (a start per case and target); "
                         "round: each target runs every case in one start per round")
    ap.add_argument("--json", help="also write the medians and every sample here")
    return ap.parse_args()


def run_target(args, t, rnd, cases, clients, work, samples):
    """Starts target T, runs every case with every client against it, and stops it."""
    t.start()
    try:
        for case in cases:
            for client in clients:
                s = run_client(args, t, client, case, work)
                samples.setdefault((case[0], client, t.name), []).append(s)
                benchlib.log(f"round {rnd + 1} {t.name:8} {case[0]:24} {client:15} "
                             f"{s[0] / 1e3:8.1f}k IOPS {s[1]:8.1f} us  cpu {100 * s[2]:4.0f}%")
    finally:
        t.stop()


def main():
    args = parse_args()
    benchlib.exit_on_signals()
    cases = [c for c in CASES if not args.case or c[0] in args.case]
    clients = [c for c in CLIENTS if not args.client or c in args.client]
    have_spdk = bool(args.spdk) and os.path.exists(os.path.join(args.spdk or "", "build/bin/nvmf_tgt"))
    if not have_spdk:
        print(f"no SPDK build ({'--spdk not given' if not args.spdk else args.spdk + ' has no build/bin/nvmf_tgt'}):"
              " rdmablk alone, with rdmablk bench as the client")
        clients = ["rdmablk bench"]
    elif not hugepages_ready():
        sys.exit("SPDK needs vm.nr_hugepages >= 1100 and hugetlbfs mounted (run as root, or set them up)")
    # The 1 GiB file only when a file case runs.
    file_path = make_file(args.file_dir) if any(c[1] == "file" for c in cases) else None
    samples = {}  # (case, client, target) -> [(iops, lat, cpu)]
    local = {}
    try:
        with tempfile.TemporaryDirectory() as work:
            for rnd in range(args.rounds):
                # By case (the default), both targets run a case back to back, so the machine's slow and fast
                # minutes fall on both alike; by round, each target runs every case in one start.
                groups = [[c] for c in cases] if args.interleave == "case" else [cases]
                for i, group in enumerate(groups):
                    targets = [Rdmablk(args, work, file_path)] + ([Spdk(args, work, file_path)] if have_spdk else [])
                    if (rnd + i) % 2 == 1:
                        targets.reverse()
                    for t in targets:
                        run_target(args, t, rnd, group, clients, work, samples)
                for case in cases:
                    if case[1] == "file" and shutil.which("fio"):
                        local.setdefault(case[0], []).append(local_fio(args, file_path, case))
    except benchlib.BenchError as e:
        sys.exit(str(e))
    finally:
        benchlib.cleanup_procs()
    report(args, cases, clients, have_spdk, samples, local)


def report(args, cases, clients, have_spdk, samples, local):
    print(f"\nmedians of {args.rounds} rounds x {args.runtime} s; target on CPU {args.target_cpu}, client on CPU "
          f"{args.client_cpu}; rdmablk c2h_success: {args.c2h_success}")
    if have_spdk:
        print(f"{'case':24} {'client':15} {'SPDK':>9} {'rdmablk':>9} {'ratio':>6} {'cpuS':>5} {'cpuR':>5} "
              f"{'/core':>6} {'latS':>7} {'latR':>7} {'lat':>5} {'paired':>6}")
    else:
        print(f"{'case':24} {'client':15} {'rdmablk':>10} {'cpu':>6} {'lat us':>8}")
    medians = {}
    for case in cases:
        for client in clients:
            res = {}
            for tname in ("rdmablk", "SPDK"):
                got = samples.get((case[0], client, tname))
                if got:
                    res[tname] = {"iops": statistics.median(g[0] for g in got),
                                  "lat": statistics.median(g[1] for g in got),
                                  "cpu": statistics.median(g[2] for g in got)}
            r, sp = samples.get((case[0], client, "rdmablk"), []), samples.get((case[0], client, "SPDK"), [])
            # The i-th samples of the two targets ran next to each other in time: their ratio cancels the
            # machine's drift better than the ratio of the medians.
            if r and sp:
                res["paired_ratio"] = statistics.median(a[0] / b[0] for a, b in zip(r, sp))
            medians[f"{case[0]} / {client}"] = res
            print(fmt_row(case[0], client, res))
        if case[0] in local:
            iops = statistics.median(x[0] for x in local[case[0]])
            lat = statistics.median(x[1] for x in local[case[0]])
            print(f"{case[0]:24} {'local fio':15} {iops / 1e3:8.1f}k (io_uring, O_DIRECT, on the target CPU), "
                  f"{lat:.1f} us")
            medians[f"{case[0]} / local fio"] = {"iops": iops, "lat": lat}
    if have_spdk:
        print("ratio = rdmablk / SPDK IOPS; /core = ratio of IOPS per busy target core; lat = rdmablk / SPDK mean "
              "latency (us); paired = median of the rounds' rdmablk / SPDK IOPS")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"medians": medians,
                       "samples": {" / ".join(k): v for k, v in samples.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
