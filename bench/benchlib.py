"""What the bench scripts share: a free port, the child processes they start (killed on exit), and
rdmablk-target started from a YAML config and waited for.

  import benchlib                       # the scripts run from anywhere: each puts bench/ on sys.path
  port = benchlib.free_port()
  benchlib.write_target_config(cfg, port, NQN, [{"nsid": 1, "backend": "null", "size": "1GiB"}])
  target = benchlib.start_target([binary, "--config", cfg], log_path)
  ...
  benchlib.stop_proc(target)
"""
import os
import signal
import socket
import subprocess
import sys
import time

READY = "rdmablk-target ready"  # the target's log line once every listener is up (sd_notify READY=1)


class BenchError(Exception):
    """A run that cannot go on; the scripts report it and stop."""


class TargetError(BenchError):
    """rdmablk-target exited, or never became ready; the message ends with its log's tail."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel's choice; another process may still
    take it before the target binds it, which the target then reports)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def cpu_ticks(pid):
    """utime + stime (fields 14, 15) of /proc/PID/stat, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # fields[0] is field 3 (state)
    return int(fields[11]) + int(fields[12])


def cpu_seconds(pid):
    return cpu_ticks(pid) / os.sysconf("SC_CLK_TCK")


# --- child processes ----------------------------------------------------------------------------------

_procs = []  # every child started with spawn(); stopped (by PID) by cleanup_procs()


def spawn(cmd, **kw):
    p = subprocess.Popen(cmd, **kw)
    _procs.append(p)
    return p


def stop_proc(p, timeout=15):
    """SIGTERM (the target drains and exits 0), then SIGKILL. Returns the exit status."""
    if p.poll() is None:
        try:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    forget(p)
    return p.returncode


def forget(p):
    """A child the caller collected itself (communicate(), wait()): no longer stopped by cleanup_procs()."""
    if p in _procs:
        _procs.remove(p)


def cleanup_procs():
    for p in list(_procs):
        stop_proc(p, timeout=5)


def _raise_exit(signum, _frame):
    raise SystemExit(128 + signum)


def exit_on_signals():
    """SIGTERM and SIGHUP end the script through SystemExit, so that `finally:` and cleanup_procs() run."""
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _raise_exit)


# --- the target ---------------------------------------------------------------------------------------

def write_target_config(path, port, nqn, namespaces, hosts=None, tls=None, extra="", listener=None):
    """One TCP listener on 127.0.0.1:PORT and one subsystem NQN. namespaces: dicts of the namespace keys
    (nsid first), written in their order; hosts: None for allow_any_host, else the YAML of the `hosts:`
    list's items (indented for the subsystem); tls: the listener's tls: value; listener: more of the
    listener's keys (a dict, e.g. {"c2h_success": "always"}); extra: top-level lines.
    The file is 0600 (it may hold a PSK)."""
    ns = "".join("      - " + "\n        ".join(f"{k}: {v}" for k, v in n.items()) + "\n" for n in namespaces)
    who = f"    hosts:\n{hosts}" if hosts is not None else "    allow_any_host: true\n"
    text = (f"listeners:\n  - transport: tcp\n    address: 127.0.0.1\n    port: {port}\n"
            + (f"    tls: {tls}\n" if tls else "")
            + "".join(f"    {k}: {v}\n" for k, v in (listener or {}).items())
            + f"subsystems:\n  - nqn: {nqn}\n{who}    namespaces:\n{ns}{extra}")
    with open(path, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)
    return path


def start_target(cmd, log_path, timeout=20, what="rdmablk-target", ready=READY, starts=1, port=None):
    """Starts CMD (rdmablk-target's argv, a taskset prefix included) with its output appended to LOG_PATH and
    waits until it is ready: its log holds STARTS lines with READY (a log appended to by several starts
    counts them), or, with PORT, until 127.0.0.1:PORT accepts a connection (for a config whose log_level
    hides the ready line). Raises TargetError when it exits first or is not ready after TIMEOUT seconds."""
    with open(log_path, "a") as logf:
        proc = spawn(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            forget(proc)
            raise TargetError(f"{what} exited with status {proc.returncode} before it was ready; its log:\n"
                              f"{tail(log_path)}")
        if port is not None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return proc
            except OSError:
                pass
        else:
            with open(log_path, errors="replace") as f:
                if f.read().count(ready) >= starts:
                    return proc
        if time.monotonic() > deadline:
            stop_proc(proc, timeout=5)
            how = f"not listening on port {port}" if port is not None else f"no '{ready}' in its log"
            raise TargetError(f"{what} not ready after {timeout} s ({how}); its log:\n{tail(log_path)}")
        time.sleep(0.05)
