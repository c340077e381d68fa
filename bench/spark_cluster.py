"""A real Spark standalone cluster for the tests (tests/test_spark_cluster.py) and the bench
(bench/spark_speedup.py --master standalone): a master and two workers, each a JVM of its own
started from pyspark's `bin/spark-class` on 127.0.0.1, with ephemeral ports and their own work
dirs. Each runs in its own process group (executors and their Python workers join their worker's),
so stopping kills whole groups; `leftovers` reads the process list to show nothing stayed behind."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

START_TIMEOUT = 240
"""Seconds for the master and both workers to come up (three JVMs on a busy 2-core machine)."""
STOP_TIMEOUT = 30
WORKER_MEMORY = "1g"
"""What each worker may give its executors (`--memory`); an executor takes `spark.executor.memory`."""
MASTER_PROPERTIES = {
    "spark.master.rest.enabled": "false",  # its fixed port 6066 would clash with any other cluster here
    "spark.worker.cleanup.enabled": "false",
}


def spark_class() -> Path:
    import pyspark

    script = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not script.exists():
        raise FileNotFoundError(f"{script}: pyspark's wheel has no bin/spark-class")
    return script


class StandaloneCluster:
    def __init__(self, root: Path, workers: int = 2, worker_memory: str = WORKER_MEMORY):
        self.root = root
        self.workers = workers
        self.worker_memory = worker_memory
        self.processes: list[subprocess.Popen] = []
        self.url: str | None = None
        self.ui_port: int | None = None
        self.env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(root / "local"),
                    "SPARK_LOG_DIR": str(root / "logs"), "SPARK_PID_DIR": str(root)}

    # -- starting -------------------------------------------------------------------------------

    def start(self) -> "StandaloneCluster":
        (self.root / "local").mkdir(parents=True, exist_ok=True)
        properties = self.root / "spark-defaults.conf"
        properties.write_text("".join(f"{key} {value}\n" for key, value in MASTER_PROPERTIES.items()))
        deadline = time.monotonic() + START_TIMEOUT
        master = self._launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                              "--port", "0", "--webui-port", "0", "--properties-file", str(properties))
        self.url = self._wait_for_line(master, r"Starting Spark master at (spark://\S+)", deadline)
        self.ui_port = int(self._wait_for_line(master, r"Successfully started service 'MasterUI' on port (\d+)",
                                               deadline))
        for number in range(self.workers):
            work = self.root / f"worker-{number}"
            work.mkdir()
            self._launch(f"worker-{number}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                         "--port", "0", "--webui-port", "0", "--cores", "1", "--memory", self.worker_memory,
                         "--work-dir", str(work), "--properties-file", str(properties), self.url)
        while self.state().get("aliveworkers", 0) < self.workers:
            self._check_running(deadline)
            time.sleep(0.5)
        return self

    def __enter__(self) -> "StandaloneCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()  # whatever of it did start
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    def _launch(self, name: str, main_class: str, *args: str) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "wb")
        with log:  # the child keeps its own descriptor
            process = subprocess.Popen([str(spark_class()), main_class, *args], stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.root,
                                       start_new_session=True)
        process.name = name
        self.processes.append(process)
        return process

    def _wait_for_line(self, process: subprocess.Popen, pattern: str, deadline: float) -> str:
        log = self.root / f"{process.name}.log"
        while True:
            found = re.search(pattern, log.read_text(errors="replace"))
            if found:
                return found.group(1)
            self._check_running(deadline)
            time.sleep(0.2)

    def _check_running(self, deadline: float) -> None:
        for process in self.processes:
            if process.poll() is not None:
                raise RuntimeError(f"the Spark {process.name} exited ({process.returncode}): {self.log_tail(process)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Spark cluster did not come up in {START_TIMEOUT} s: "
                               + " | ".join(self.log_tail(p) for p in self.processes))

    def log_tail(self, process: subprocess.Popen, lines: int = 5) -> str:
        text = (self.root / f"{process.name}.log").read_text(errors="replace")
        return " / ".join(text.strip().splitlines()[-lines:])

    def state(self) -> dict:
        """The master's JSON (workers, applications), from its web UI."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=10) as answer:
                return json.load(answer)
        except OSError:
            return {}

    # -- stopping -------------------------------------------------------------------------------

    def stop(self) -> None:
        """SIGTERM to every process group (workers first: they stop their executors), then SIGKILL
        to whatever is left of them."""
        for process in reversed(self.processes):
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        while self.leftovers() and time.monotonic() < deadline:
            time.sleep(0.2)
        for process in self.processes:
            _signal_group(process.pid, signal.SIGKILL)
            process.wait()
        deadline = time.monotonic() + STOP_TIMEOUT
        while self.leftovers() and time.monotonic() < deadline:
            time.sleep(0.2)

    def leftovers(self) -> list[str]:
        """Processes still alive of the cluster's groups, or working in its directories: pid and
        command line."""
        groups = {process.pid for process in self.processes}
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                fields = stat[stat.rindex(")") + 2:].split()
                state, group = fields[0], int(fields[2])
                cwd = os.readlink(entry / "cwd")
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, ValueError):
                continue  # gone meanwhile, or not ours to read
            if state != "Z" and (group in groups or cwd.startswith(str(self.root))):
                found.append(f"{entry.name}: {command[:200]}")
        return found


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
