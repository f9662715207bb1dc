#!/usr/bin/env python3
"""fio itself, running job files with the rdmablk ioengine against a real rdmablk-target over NVMe/TCP.

    tests/fio/fio_engine_test.py --engine build/fio_engine/fio-rdmablk.so \
        --target build/target/rdmablk-target [--wrong-version-engine SO] CASE

Each case starts its own rdmablk-target (127.0.0.1, a free port; null namespace 1 with 4 KiB blocks,
RAM namespace 2 and file namespace 3 with 512-byte blocks; largest transfer 128 KiB), waits until the
target says it is ready (polled), runs fio with --output-format=json --output=FILE, checks fio's exit
status and the JSON report, then stops the target with SIGTERM (it must exit 0 with no warning or
error in its log). Exit status: 0 pass, 1 fail, 77 skipped ("SKIP: reason" says why).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# The bench scripts' helpers (bench/benchlib.py): a free port and rdmablk-target started and waited for.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import benchlib  # noqa: E402

NQN = "nqn.2024-11.io.rdmablk:fio-engine"
NS_SIZE = 64 << 20  # namespaces 2 and 3
FIO_TIMEOUT = 300   # seconds per fio run: a loaded 2-core machine, maybe with qemu beside it


class Fail(Exception):
    pass


def skip(reason):
    print("SKIP: " + reason)
    sys.exit(77)


def log(msg):
    print("fio-test: " + msg, flush=True)


class Target:
    """rdmablk-target in a temporary directory, ready when its log says so."""

    def __init__(self, binary, work):
        self.binary = binary
        self.work = work
        self.proc = None
        self.port = None
        self.log_path = os.path.join(work, "target.log")
        self.ns3 = os.path.join(work, "ns3.img")

    def config(self):
        return f"""listeners:
  - transport: tcp
    address: 127.0.0.1
    port: {self.port}
subsystems:
  - nqn: {NQN}
    serial: RDMABLKFIO0001
    allow_any_host: true
    namespaces:
      - nsid: 1
        backend: null
        size: 1GiB
        block_size: 4096
      - nsid: 2
        backend: ram
        size: {NS_SIZE}
      - nsid: 3
        backend: file
        path: {self.ns3}
        size: {NS_SIZE}
        direct: false
reactors: 1
busy_poll_us: 50
log_level: info
limits:
  max_io_size: 128KiB
"""

    def start(self):
        for attempt in range(5):
            self.port = benchlib.free_port()
            cfg = os.path.join(self.work, "target.yaml")
            with open(cfg, "w") as f:
                f.write(self.config())
            open(self.log_path, "w").close()
            try:
                self.proc = benchlib.start_target([self.binary, "--config", cfg, "--control-socket",
                                                   os.path.join(self.work, "target.sock")], self.log_path, timeout=60)
            except benchlib.TargetError as e:
                if "in use" in self.log() and attempt < 4:  # another process took the port meanwhile
                    continue
                raise Fail(str(e))
            log(f"rdmablk-target ready on tcp://127.0.0.1:{self.port} (pid {self.proc.pid})")
            return

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self, check=True):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Fail("rdmablk-target still running 60 s after SIGTERM")
        if not check:
            return
        if rc != 0:
            raise Fail(f"rdmablk-target exited with status {rc} after SIGTERM:\n" + self.log())
        bad = [l for l in self.log().splitlines() if len(l.split()) > 1 and l.split()[1] in ("warn", "warning", "error", "critical")]
        if bad:
            raise Fail("warnings/errors in the target's log:\n" + "\n".join(bad))

    def controllers(self):
        return sum(1 for l in self.log().splitlines() if " created for " in l and NQN in l)


class Runner:
    def __init__(self, args, work, target):
        self.args = args
        self.work = work
        self.target = target
        self.runs = 0

    def job(self, body, engine=None, global_extra=""):
        """A job file: the engine and the connection in [global], then `body`."""
        engine = engine or self.args.engine
        return f"""[global]
ioengine=external:{engine}
transport=tcp
traddr=127.0.0.1
trsvcid={self.target.port}
subnqn={NQN}
{global_extra}
{body}
"""

    def fio(self, jobfile, expect_ok=True, env=None, extra_args=()):
        """Runs fio; returns (exit status, JSON report or None, stdout + stderr)."""
        self.runs += 1
        name = f"job{self.runs}"
        path = os.path.join(self.work, name + ".fio")
        out = os.path.join(self.work, name + ".json")
        with open(path, "w") as f:
            f.write(jobfile)
        cmd = [self.args.fio, path, "--output-format=json", "--output=" + out, *extra_args]
        log("fio " + " ".join(cmd[1:]))
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, cwd=self.work, capture_output=True, text=True, timeout=FIO_TIMEOUT,
                               env=env)
        except subprocess.TimeoutExpired:
            raise Fail(f"fio did not finish within {FIO_TIMEOUT} s (job file {path})")
        text = p.stdout + p.stderr
        report = None
        try:
            with open(out) as f:
                raw = f.read()
            # fio also writes some warnings into --output, before the report ("fio: multiple writers ...").
            start = raw.find("\n{") + 1 if not raw.startswith("{") else 0
            report = json.loads(raw[start:])
            text += raw[:start]
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        log(f"fio exited {p.returncode} after {time.monotonic() - t0:.1f} s")
        if expect_ok:
            if p.returncode != 0:
                raise Fail(f"fio exited with status {p.returncode}:\n{text}\njob file:\n{jobfile}")
            if report is None:
                raise Fail(f"fio wrote no JSON report:\n{text}")
            for j in report["jobs"]:
                if j["error"] != 0:
                    raise Fail(f"job {j['jobname']}: error {j['error']}:\n{text}")
            if text.strip():
                log("fio said:\n" + text.strip())
            summarize(report)
        return p.returncode, report, text


def summarize(report):
    for j in report["jobs"]:
        parts = []
        for d in ("read", "write", "trim"):
            if j[d]["total_ios"]:
                parts.append(f"{d} {j[d]['total_ios']} ios {j[d]['io_bytes'] >> 10} KiB {j[d]['iops']:.0f} iops")
        log(f"  {j['jobname']}: " + ", ".join(parts) + f", error {j['error']}")


def jobs(report, name):
    found = [j for j in report["jobs"] if j["jobname"] == name]
    if not found:
        raise Fail(f"no job {name} in the report")
    return found


def expect(cond, message):
    if not cond:
        raise Fail(message)


def expect_in(needle, text, what):
    if needle not in text:
        raise Fail(f"{what}: expected '{needle}' in fio's output:\n{text}")


# --- cases ------------------------------------------------------------------------------------------------

def case_read(r):
    """Sequential 128k reads of a whole RAM namespace with no size= (the size comes from the namespace:
    get_file_size), and 4k random reads on the null namespace for 2 s."""
    _, rep, _ = r.fio(r.job("""
[seq]
nsid=2
filename=ram
rw=read
bs=128k
iodepth=8
[rand]
stonewall
nsid=1
filename=null
rw=randread
bs=4k
iodepth=32
runtime=2
time_based
"""))
    seq = jobs(rep, "seq")[0]
    expect(seq["read"]["io_bytes"] == NS_SIZE, f"seq read {seq['read']['io_bytes']} bytes, expected the namespace's {NS_SIZE}")
    expect(seq["write"]["total_ios"] == 0, "seq: writes in a read job")
    rand = jobs(rep, "rand")[0]
    expect(rand["read"]["total_ios"] > 1000, f"rand: only {rand['read']['total_ios']} reads in 2 s")


def case_write(r):
    """Sequential 64k writes of a pattern to the file namespace: the target's backing file holds it."""
    _, rep, _ = r.fio(r.job("""
[w]
nsid=3
filename=file
rw=write
bs=64k
iodepth=16
offset=4m
size=16m
buffer_pattern=0x5a17c3e1
"""))
    w = jobs(rep, "w")[0]
    expect(w["write"]["io_bytes"] == 16 << 20, f"wrote {w['write']['io_bytes']} bytes, expected 16 MiB")
    with open(r.target.ns3, "rb") as f:
        data = f.read()
    want = bytes.fromhex("5a17c3e1") * ((16 << 20) // 4)
    expect(data[4 << 20:20 << 20] == want, "the backing file does not hold the written pattern at 4..20 MiB")
    expect(data[:4 << 20] == bytes(4 << 20), "the backing file changed before offset 4 MiB")


def case_randrw(r):
    """4k random read/write 70/30 on RAM, QD32, 3 s."""
    _, rep, _ = r.fio(r.job("""
[mix]
nsid=2
filename=ram
rw=randrw
rwmixread=70
bs=4k
iodepth=32
runtime=3
time_based
"""))
    j = jobs(rep, "mix")[0]
    rd, wr = j["read"]["total_ios"], j["write"]["total_ios"]
    expect(rd > 1000 and wr > 300, f"randrw: {rd} reads, {wr} writes")
    share = rd / (rd + wr)
    expect(0.62 <= share <= 0.78, f"randrw: reads are {share:.2f} of the I/O, asked for 0.70")


def verify_job(kind, bs, nsid, extra=""):
    return f"""
[verify_{kind}]
nsid={nsid}
filename=ns{nsid}
rw=randwrite
bs={bs}
iodepth=16
size=16m
verify={kind}
verify_fatal=1
do_verify=1
{extra}
"""


def check_verified(rep, name, size):
    j = jobs(rep, name)[0]
    expect(j["write"]["io_bytes"] == size, f"{name}: wrote {j['write']['io_bytes']} bytes, expected {size}")
    expect(j["read"]["io_bytes"] == size, f"{name}: verified {j['read']['io_bytes']} bytes of {size}")


def case_verify_crc32c(r):
    """Random writes then crc32c verification on RAM (4k) and on the file namespace (32k)."""
    _, rep, _ = r.fio(r.job(verify_job("crc32c", "4k", 2) + verify_job("crc32c", "32k", 3).replace(
        "[verify_crc32c]", "[verify_crc32c_file]\nstonewall")))
    check_verified(rep, "verify_crc32c", 16 << 20)
    check_verified(rep, "verify_crc32c_file", 16 << 20)


def case_verify_md5(r):
    """Random writes then md5 verification, 16k on RAM."""
    _, rep, _ = r.fio(r.job(verify_job("md5", "16k", 2)))
    check_verified(rep, "verify_md5", 16 << 20)


def case_verify_detects_corruption(r):
    """The check is real: crc32c-stamped writes to the file namespace, one block corrupted in the target's
    backing file behind its back, then fio's verify pass must fail naming that block."""
    r.fio(r.job("""
[stamp]
nsid=3
filename=file
rw=write
bs=4k
size=1m
iodepth=8
verify=crc32c
do_verify=0
"""))
    bad = 0x46000
    with open(r.target.ns3, "r+b") as f:  # direct: false, so the target reads through this page cache
        f.seek(bad + 100)
        f.write(b"\xff" * 64)
    rc, rep, text = r.fio(r.job("""
[stamp]
nsid=3
filename=file
rw=write
bs=4k
size=1m
iodepth=8
verify=crc32c
verify_only=1
verify_fatal=1
"""), expect_ok=False)
    expect(rc != 0, f"fio passed although block {bad:#x} was corrupted:\n{text}")
    expect_in("verify", text, "corrupted block")
    expect(str(bad) in text or hex(bad) in text, f"fio's error does not name offset {bad} ({bad:#x}):\n{text}")
    if rep is not None:
        expect(any(j["error"] != 0 for j in rep["jobs"]), "the JSON report shows no job error")


def case_trim_zeroes(r):
    """A pattern written, trimmed (Dataset Management, deallocate), read back as zeroes: on the file
    namespace (the target punches a hole) and on RAM. (fio's own trim_percentage / trim_verify_zero cannot
    be used: fio 3.33 trips its own fio_ro_check assertion on the trims it adds to a write job, with any
    engine, psync included.)"""
    for nsid in (3, 2):
        _, rep, _ = r.fio(r.job(f"""
[fill]
nsid={nsid}
filename=ns{nsid}
rw=write
bs=64k
size=16m
iodepth=8
buffer_pattern=0xdeadbeef
[trim]
stonewall
nsid={nsid}
filename=ns{nsid}
rw=randtrim
bs=64k
size=16m
iodepth=8
[zeroes]
stonewall
nsid={nsid}
filename=ns{nsid}
rw=read
bs=64k
size=16m
iodepth=8
verify=pattern
verify_pattern=0x00
verify_fatal=1
"""))
        expect(jobs(rep, "trim")[0]["trim"]["io_bytes"] == 16 << 20, f"nsid {nsid}: trimmed less than 16 MiB")
        expect(jobs(rep, "zeroes")[0]["read"]["io_bytes"] == 16 << 20, f"nsid {nsid}: read back less than 16 MiB")
        if nsid == 3:
            with open(r.target.ns3, "rb") as f:
                expect(f.read(16 << 20) == bytes(16 << 20), "the backing file is not zero where it was trimmed")


def case_bssplit(r):
    """Mixed block sizes (4k/16k/128k) with crc32c verification on RAM."""
    _, rep, _ = r.fio(r.job("""
[split]
nsid=2
filename=ram
rw=randwrite
bssplit=4k/50:16k/30:128k/20
size=32m
iodepth=16
verify=crc32c
verify_fatal=1
"""))
    j = jobs(rep, "split")[0]
    ios, b = j["write"]["total_ios"], j["write"]["io_bytes"]
    expect(ios > 0, "no writes")
    avg = b / ios
    # 0.5 * 4k + 0.3 * 16k + 0.2 * 128k = 32.4 KiB on average
    expect(12 << 10 < avg < 64 << 10, f"average write {avg:.0f} bytes: not the 4k/16k/128k mix")
    expect(j["read"]["io_bytes"] == b, "verify read less than was written")


def case_numjobs(r):
    """numjobs=4 (processes) then numjobs=2 threads with 2 I/O queues each: one controller per job."""
    before = r.target.controllers()
    _, rep, _ = r.fio(r.job("""
[procs]
nsid=1
filename=null
rw=randread
bs=4k
iodepth=8
numjobs=4
runtime=2
time_based
[threads]
stonewall
thread
nsid=2
filename=ram
rw=randrw
bs=8k
iodepth=16
io_queues=2
numjobs=2
offset_increment=16m
size=16m
verify=crc32c
verify_fatal=1
"""))
    procs = jobs(rep, "procs")
    expect(len(procs) == 4, f"{len(procs)} procs jobs in the report")
    for j in procs:
        expect(j["read"]["total_ios"] > 100, f"a procs job did only {j['read']['total_ios']} reads")
    threads = jobs(rep, "threads")
    expect(len(threads) == 2, f"{len(threads)} threads jobs in the report")
    for j in threads:
        expect(j["write"]["total_ios"] > 0 and j["read"]["total_ios"] > 0, "a thread job did no I/O")
    made = r.target.controllers() - before
    # One per job, plus the short connections that learn the namespace sizes (one per namespace).
    expect(made >= 6, f"the target created {made} controllers for 6 jobs")


def case_rate_iops(r):
    """rate_iops=400 for 5 s: fio's rate limiting through the engine (completions reaped while it waits)."""
    _, rep, _ = r.fio(r.job("""
[rate]
nsid=1
filename=null
rw=randread
bs=4k
iodepth=4
rate_iops=400
runtime=5
time_based
"""))
    j = jobs(rep, "rate")[0]
    iops = j["read"]["iops"]
    # The rate is a ceiling (+10 %). The floor only catches an engine that stalls while fio waits (reaping
    # in its 100 ms poll slices would give ~40 IOPS at iodepth 4); it is half the rate because a loaded CI
    # machine (the sanitized suite and qemu beside it) once gave 323 IOPS with nothing wrong.
    expect(200 <= iops <= 440, f"rate_iops=400 gave {iops:.0f} IOPS")


def case_fsync(r):
    """fsync / fdatasync -> Flush, at QD1 (fio issues one sync per 8 writes: 1024 / 8 - 1 = 127)."""
    _, rep, _ = r.fio(r.job("""
[fsync]
nsid=3
filename=file
rw=randwrite
bs=4k
size=4m
iodepth=1
fsync=8
[fdatasync]
stonewall
nsid=3
filename=file
rw=randwrite
bs=4k
size=4m
iodepth=8
fdatasync=4
end_fsync=1
"""))
    j = jobs(rep, "fsync")[0]
    expect(j["sync"]["total_ios"] == 127, f"fsync=8: {j['sync']['total_ios']} syncs for 1024 writes, expected 127")
    expect(jobs(rep, "fdatasync")[0]["write"]["total_ios"] == 1024, "fdatasync job: not 1024 writes")


def case_filenames(r):
    """The target named in the filename: SPDK's key=value form (':' escaped as '\\:') and a namespace
    URI; engine options before ioengine=; digests; io_queues."""
    spdk = f"trtype=tcp traddr=127.0.0.1 trsvcid={r.target.port} subnqn={NQN.replace(':', chr(92) + ':')} ns=2"
    uri = f"tcp://127.0.0.1:{r.target.port}/{NQN}/3".replace(":", "\\:")
    _, rep, _ = r.fio(f"""[global]
rw=randwrite
bs=4k
size=4m
iodepth=8
verify=crc32c
verify_fatal=1
[spdk]
ioengine=external:{r.args.engine}
filename={spdk}
[uri]
stonewall
ioengine=external:{r.args.engine}
filename={uri}
[options_first]
stonewall
traddr=127.0.0.1
trsvcid={r.target.port}
subnqn={NQN}
nsid=2
filename=ram
hdgst=1
ddgst=1
io_queues=3
iodepth=24
ioengine=external:{r.args.engine}
""")
    for name in ("spdk", "uri", "options_first"):
        check_verified(rep, name, 4 << 20)


def case_engine_name(r):
    """ioengine=rdmablk (no path): Debian's fio (built without dynamic engines) dlopen()s the bare name,
    found through the library search path. The install puts LIBDIR/rdmablk -> fio/fio-rdmablk.so there;
    here a symlink in a directory on LD_LIBRARY_PATH stands in for it (nothing outside the test's
    directory is touched)."""
    libdir = os.path.join(r.work, "lib")
    os.makedirs(libdir, exist_ok=True)
    os.symlink(os.path.abspath(r.args.engine), os.path.join(libdir, "rdmablk"))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    job = r.job("""
[byname]
nsid=2
filename=ram
rw=randread
bs=4k
size=4m
iodepth=4
""").replace(f"ioengine=external:{r.args.engine}", "ioengine=rdmablk")
    _, rep, _ = r.fio(job, env=env)
    expect(jobs(rep, "byname")[0]["read"]["total_ios"] == 1024, "ioengine=rdmablk: not 1024 reads")
    expect(rep["global options"]["ioengine"] == "rdmablk", "the report does not name ioengine rdmablk")


def case_refusals(r):
    """Clear fio errors: bs not a multiple of the LBA size, bs above MDTS, an inactive namespace, no
    address, and an engine built for another fio version."""
    checks = [
        ("nsid=1\nfilename=null\nrw=randread\nbs=512\nsize=1m",
         "read block size 512 is not a multiple of namespace 1's logical block size 4096"),
        ("nsid=2\nfilename=ram\nrw=randwrite\nbssplit=4k/50:6000/50\nsize=1m",
         "write block size 6000 is not a multiple of namespace 2's logical block size 512"),
        ("nsid=2\nfilename=ram\nrw=read\nbs=256k\nsize=1m",
         "read block size 262144 exceeds the controller's largest transfer of 131072 bytes (MDTS"),
        ("nsid=9\nfilename=x\nrw=read\nbs=4k\nsize=1m", "namespace 9 is not active (active: 1, 2, 3)"),
    ]
    for body, message in checks:
        rc, _, text = r.fio(r.job("[refused]\n" + body + "\n"), expect_ok=False)
        expect(rc != 0, f"fio exited 0 for a job that must be refused ({message})")
        expect_in("fio: rdmablk: ", text, "refusal")
        expect_in(message, text, "refusal")
        log(f"  refused: {message}")
    rc, _, text = r.fio("[noaddr]\nioengine=external:" + r.args.engine + "\nfilename=x\nrw=read\nbs=4k\nsize=1m\n",
                        expect_ok=False)
    expect(rc != 0, "fio exited 0 without a target address")
    expect_in("no target address for file 'x'", text, "no address")
    if not r.args.wrong_version_engine:
        log("  (no --wrong-version-engine: the version check is not exercised)")
        return
    rc, _, text = r.fio(r.job("[wrongversion]\nnsid=2\nfilename=ram\nrw=read\nbs=4k\nsize=1m\n",
                              engine=r.args.wrong_version_engine), expect_ok=False)
    expect(rc != 0, "fio loaded an engine built for another fio version")
    expect_in("the engine was built against fio-0.0-rdmablk-version-test", text, "version check")
    expect_in("refuses to load", text, "version check")
    log("  refused: an engine built for another fio version")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--wrong-version-engine")
    ap.add_argument("--fio", default=shutil.which("fio"))
    ap.add_argument("case", choices=sorted(CASES))
    args = ap.parse_args()
    if not args.fio:
        skip("fio is not installed (scripts/setup installs it)")
    for what, path in (("engine", args.engine), ("rdmablk-target", args.target)):
        if not os.path.exists(path):
            skip(f"no {what} at {path} (build it first)")
    work = tempfile.mkdtemp(prefix=f"rdmablk-fio-{args.case}-")
    target = Target(args.target, work)
    ok = False
    try:
        target.start()
        runner = Runner(args, work, target)
        CASES[args.case](runner)
        target.stop()
        ok = True
        log(f"PASS {args.case}")
    except Fail as e:
        print(f"FAIL: {args.case}: {e}", flush=True)
        tail = target.log().splitlines()[-40:]
        if tail:
            print("--- rdmablk-target log (last 40 lines) ---\n" + "\n".join(tail))
    finally:
        try:
            target.stop(check=False)
        except Fail as e:
            print(f"FAIL: {e}")
            ok = False
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"fio-test: keeping {work} for inspection")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
