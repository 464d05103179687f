"""A real single-node Slurm cluster for the tests: munged, slurmctld and slurmd on this host.

Debian's ``slurm-wlm`` and ``munge`` packages (``scripts/test.sh`` installs them when it runs
as root and they are missing). The daemons run as root with every file -- config, state,
spool, logs, pid files -- in one temporary directory and on free ports, so the cluster
touches nothing of the host's own Slurm setup. There is no accounting (``sacct`` does not
work), so ``MinJobAge=600`` keeps finished jobs visible to ``scontrol`` for ten minutes.

``SlurmCluster.start()`` returns once ``sinfo`` shows the node idle; ``stop()`` kills the
daemons it started; ``node_down()`` fails the node for a while (a node failure, for real);
``slurm_jobs`` lists the Slurm jobs a dispatcher submitted for one tracker job.
:func:`skip_reason` says why a cluster cannot run here (not root, packages missing) -- the
only cases in which the tests that need one are skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from tracker.rules.slurm import SQUEUE_FORMAT, parse_comment, parse_squeue
from tracker.runner.dispatcher import store_namespace
from tracker.store import Store

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_SOCKET_DIR = Path("/run/munge")
_UP = ("idle", "mix", "alloc", "comp")  # sinfo %t of a node that takes jobs


def skip_reason() -> str | None:
    """Why no test cluster can start here, or ``None`` when it can."""
    if os.geteuid() != 0:
        return "a test Slurm cluster needs root (slurmd runs jobs as their users)"
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if missing:
        return (
            f"Slurm is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm "
            "munge, or run ./scripts/test.sh as root"
        )
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sbin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class SlurmCluster:
    """One-node cluster in ``root``; ``env`` is what clients need (``SLURM_CONF``)."""

    def __init__(self, root: Path, *, cpus: int | None = None) -> None:
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.cpus = cpus or os.cpu_count() or 1
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._started: list[int] = []  # pids of the daemons this cluster started

    def write_config(self) -> None:
        mem_mb = max(1024, psutil.virtual_memory().total // (2 * 1024 * 1024))
        r = self.root
        for sub in ("state", "spool"):
            (r / sub).mkdir(parents=True, exist_ok=True)
        lines = [
            "ClusterName=trackertest",
            f"SlurmctldHost={self.host}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={r / 'jobcomp.txt'}",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "DefMemPerCPU=512",
            "ReturnToService=2",
            "MinJobAge=600",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=2",
            "KillWait=5",
            "OverTimeLimit=0",
            "InactiveLimit=0",
            "MpiDefault=none",
            f"NodeName={self.host} CPUs={self.cpus} RealMemory={mem_mb} State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def start(self, timeout_s: float = 60.0) -> None:
        """Start munged (unless running), slurmctld and slurmd; wait until the node is idle.

        Raises RuntimeError naming the daemon and the tail of its log when one does not come up.
        """
        self.write_config()
        self._start_munge()
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run([_sbin(daemon), "-f", str(self.conf)], env=self.env, check=True)
        self._started += [self._pid("slurmctld.pid"), self._pid("slurmd.pid")]
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            out = subprocess.run(
                ["sinfo", "-h", "-N", "-o", "%t"], env=self.env, capture_output=True, text=True
            )
            state = out.stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        tail = (self.root / "slurmctld.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(
            f"the test Slurm node is not idle after {timeout_s} s ({state!r}):\n{tail}"
        )

    def _start_munge(self) -> None:
        if any(p.info["name"] == "munged" for p in psutil.process_iter(["name"])):
            return
        if not MUNGE_KEY.exists():
            subprocess.run([_sbin("mungekey"), "--create"], check=True)
        shutil.chown(MUNGE_KEY, "munge")
        MUNGE_KEY.chmod(0o400)
        MUNGE_SOCKET_DIR.mkdir(parents=True, exist_ok=True)
        shutil.chown(MUNGE_SOCKET_DIR, "munge")
        subprocess.run(["runuser", "-u", "munge", "--", _sbin("munged")], check=True)

    def _pid(self, name: str) -> int:
        path = self.root / name
        for _ in range(100):
            if path.exists() and path.read_text().strip():
                return int(path.read_text().strip())
            time.sleep(0.1)
        raise RuntimeError(f"{name} was not written: see the logs in {self.root}")

    def run(self, *argv: str) -> str:
        """Run a Slurm client command against this cluster; returns its stdout."""
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=True)
        return done.stdout

    def node_state(self) -> str:
        """The node's state as ``sinfo`` abbreviates it (``idle``, ``mix``, ``down*``, ...)."""
        return self.run("sinfo", "-h", "-N", "-o", "%t").strip()

    @contextlib.contextmanager
    def node_down(self, reason: str = "tracker-test") -> Iterator[None]:
        """The node is DOWN inside the block (Slurm ends its jobs as NODE_FAIL and requeues
        those submitted with ``--requeue``); after it, the node is resumed and takes jobs again
        (idle, or already running a job that waited for it)."""
        node = f"nodename={self.host}"
        self.run("scontrol", "update", node, "state=down", f"reason={reason}")
        try:
            yield
        finally:
            # ReturnToService=2 may have brought it back already
            with contextlib.suppress(subprocess.CalledProcessError):
                self.run("scontrol", "update", node, "state=resume")
            deadline = time.monotonic() + 60
            while (state := self.node_state()) not in _UP:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the test Slurm node is {state!r} 60 s after resuming it")
                time.sleep(0.2)

    def stop(self) -> None:
        """Kill the daemons this cluster started (its jobs die with slurmd's steps)."""
        # the controller may already be gone; the daemons are killed below
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            self.run("scancel", "--full", "-u", "root")
            deadline = time.monotonic() + 20  # let slurmd see its jobs' steps end
            while time.monotonic() < deadline and self.run("squeue", "-h", "-t", "R,CG,S"):
                time.sleep(0.2)
        for pid in self._started:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for pid in self._started:
            try:
                psutil.Process(pid).wait(timeout=15)
            except psutil.NoSuchProcess:
                continue
            except psutil.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
        self._kill_orphan_steps()

    def _kill_orphan_steps(self) -> None:
        """slurmstepd processes of this cluster that outlived slurmd (they wait for it)."""
        for proc in psutil.process_iter(["name"]):
            if proc.info["name"] != "slurmstepd":
                continue
            try:
                if proc.environ().get("SLURM_CONF") == str(self.conf):
                    proc.kill()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue


def slurm_jobs(
    cluster: SlurmCluster, store: Store, job_id: int
) -> list[tuple[str, str, str | None]]:
    """(slurm id, state, reason) of every Slurm job submitted for ``job_id`` of ``store``."""
    found = parse_squeue(cluster.run("squeue", "-h", "-t", "all", "-O", SQUEUE_FORMAT))
    namespace = store_namespace(store)
    out = []
    for j in found:
        tag = parse_comment(j.comment)
        if tag is not None and tag.job_id == job_id and tag.namespace == namespace:
            out.append((j.slurm_id, j.state, j.reason))
    return out


def start_cluster() -> SlurmCluster:
    """A started cluster in a fresh temporary directory (the caller stops it)."""
    root = Path(tempfile.mkdtemp(prefix="tracker-slurm-"))
    root.chmod(0o755)
    cluster = SlurmCluster(root)
    cluster.start()
    return cluster
