"""A real Apache Kafka broker for the tests: one JVM on loopback over a temporary log directory
(docs/real-kafka.md).

    dist = kafka_dist()                      # the version's jars (tools/kafka_dist.py fetches them)
    broker = KafkaBroker(dist, tmp / "b", config={"log.cleaner.backoff.ms": "500"})
    broker.start()                           # formats the storage the first time; waits until it serves
    broker.bootstrap                         # "127.0.0.1:<port>"
    broker.log_dir                           # its log.dirs: <topic>-<partition>/ folders
    broker.stop()                            # SIGTERM: a clean shutdown (waits for the exit)
    broker.kill()                            # SIGKILL: an unclean one
    broker.start()                           # again on the same directories (recovery runs)
    broker.log_text()                        # what the broker logged (server.log), for assertions

KRaft brokers (3.3+) run as one combined broker+controller node with a static voter set
(`controller.quorum.voters`), formatted with `kafka.tools.StorageTool format -t <cluster id>`;
older ones (2.x) run against a ZooKeeper started beside them from the jars of the same
distribution. Every listener binds 127.0.0.1 on a free port, and every wait has a bound.
"""
from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

from support.paths import tool_module

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = float(os.environ.get("KBATCH_KAFKA_START_TIMEOUT", "180"))
STOP_TIMEOUT_S = 120.0
HEAP = os.environ.get("KBATCH_KAFKA_HEAP", "768m")

#: what every test broker gets (single node: replication factors 1), before the caller's config
BASE_CONFIG = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "2",
    "group.initial.rebalance.delay.ms": "0",
    # the tests write timestamps from the past: nothing may be deleted by time while they look
    "log.retention.ms": "-1",
    # the log cleaner looks for work every half second (default 15 s), so compaction tests wait less
    "log.cleaner.backoff.ms": "500",
}
#: share groups (Kafka 4.x): their state topic, should anything create it
SHARE_CONFIG = {"share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1"}

_LOG4J1 = """log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
"""
_LOG4J2 = """appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
"""
_STARTED = re.compile(r"Kafka Server started|\] started \(kafka\.server\.KafkaServer\)")


class KafkaUnavailable(Exception):
    """No broker can run here (no jars, no Java): the tests skip with this message."""


def dist_module() -> ModuleType:
    """tools/kafka_dist.py of this checkout."""
    try:
        return tool_module("kafka_dist")
    except FileNotFoundError as e:
        raise KafkaUnavailable(str(e)) from None


def kafka_dist(version: str | None = None) -> Any:
    """The KafkaDist of `version` (KBATCH_KAFKA_HOME's distribution, or fetched into the cache);
    KafkaUnavailable saying why when there is none or no Java to run it."""
    for tool in ("java", "javac"):
        if not shutil.which(tool):
            raise KafkaUnavailable(f"no {tool} on PATH: a Kafka broker and its test driver need a JDK (17)")
    mod = dist_module()
    try:
        return mod.dist(version)
    except mod.KafkaFetchError as e:
        raise KafkaUnavailable(str(e)) from None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def new_cluster_id() -> str:
    """A random cluster id as Kafka writes one (16 bytes, URL-safe base64 without padding), not
    starting with '-' (StorageTool's argument parser would take it for an option)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if cid[0].isalnum():
            return cid


class KafkaBroker:
    """One broker JVM (see the module docstring). `work_dir` holds server.properties, the logging
    configuration, server.log and logs/ (log.dirs); a second KafkaBroker on the same work_dir (or
    on a copy made by `copy_to`) starts on what the first one left."""

    def __init__(self, dist: Any, work_dir: str | os.PathLike[str], config: dict[str, str] | None = None,
                 node_id: int = 1) -> None:
        self.dist = dist
        self.version: str = dist.version
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = self.work_dir / "logs"
        self.log_file = self.work_dir / "server.log"
        self.node_id = node_id
        self.port = free_port()
        self.controller_port = free_port() if dist.kraft else None
        self.zk_port = None if dist.kraft else free_port()
        self.extra = dict(config or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.zk: subprocess.Popen[bytes] | None = None
        self._log_start = 0
        self.starts = 0

    # ------------------------------------------------------------------------------ config
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config(self) -> dict[str, str]:
        """server.properties as it is written at the next start."""
        c = dict(BASE_CONFIG)
        if self.dist.kraft:
            c.update({
                "process.roles": "broker,controller",
                "node.id": str(self.node_id),
                "controller.quorum.voters": f"{self.node_id}@127.0.0.1:{self.controller_port}",
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            })
            if self.dist.version.split(".")[0].isdigit() and int(self.dist.version.split(".")[0]) >= 4:
                c.update(SHARE_CONFIG)
        else:
            c.update({
                "broker.id": str(self.node_id),
                "zookeeper.connect": f"127.0.0.1:{self.zk_port}",
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            })
        c["log.dirs"] = str(self.log_dir)
        c.update(self.extra)
        return c

    def _write_config(self) -> Path:
        path = self.work_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.config.items()))
        (self.work_dir / "log4j.properties").write_text(_LOG4J1)
        (self.work_dir / "log4j2.properties").write_text(_LOG4J2)
        return path

    def java_command(self, main: str, *args: str) -> list[str]:
        """`java ... -cp <the version's jars> main args` (the broker's heap and logging settings)."""
        return ["java", f"-Xmx{HEAP}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}",
                f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
                "-cp", self.dist.classpath, main, *args]

    def java_tool(self, main: str, *args: str, timeout: float = 300.0,
                  cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run one of the distribution's tools (a main class) with its jars; stdout and stderr as text."""
        return subprocess.run(self.java_command(main, *args), capture_output=True, text=True, timeout=timeout, cwd=cwd)

    # ------------------------------------------------------------------------------ lifecycle
    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _format(self, props: Path) -> None:
        if (self.log_dir / "meta.properties").exists():
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        r = self.java_tool("kafka.tools.StorageTool", "format", "-t", new_cluster_id(), "-c", str(props), timeout=180)
        with open(self.log_file, "a") as f:
            f.write(f"# kbatch test: StorageTool format exited {r.returncode}\n{r.stdout}{r.stderr}")
        if r.returncode != 0:
            raise RuntimeError(f"Kafka {self.version}: StorageTool format exited {r.returncode}:\n"
                               f"{(r.stdout + r.stderr)[-3000:]}")

    def _start_zookeeper(self) -> None:
        if self.zk is not None and self.zk.poll() is None:
            return
        data = self.work_dir / "zookeeper"
        data.mkdir(exist_ok=True)
        cfg = self.work_dir / "zoo.cfg"
        cfg.write_text(f"dataDir={data}\nclientPort={self.zk_port}\nclientPortAddress=127.0.0.1\n"
                       "tickTime=2000\nmaxClientCnxns=0\nadmin.enableServer=false\n")
        with open(self.work_dir / "zookeeper.log", "ab") as out:
            self.zk = subprocess.Popen(self.java_command("org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)),
                                       stdout=out, stderr=subprocess.STDOUT, cwd=self.work_dir,
                                       start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.zk_port is not None
        while not _accepts(self.zk_port):
            if self.zk.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited {self.zk.returncode}: "
                                   f"{(self.work_dir / 'zookeeper.log').read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"ZooKeeper did not listen within {START_TIMEOUT_S} s")
            time.sleep(0.2)
        # a killed broker's registration (an ephemeral node) outlives it until its session expires;
        # the next broker with the same id would refuse to start meanwhile: remove it (the
        # ZooKeeper CLI of the same jars; nothing to do when there is none)
        with open(self.work_dir / "zookeeper.log", "ab") as out:
            subprocess.run(self.java_command("org.apache.zookeeper.ZooKeeperMain", "-server",
                                             f"127.0.0.1:{self.zk_port}", "delete", f"/brokers/ids/{self.node_id}"),
                           stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)

    def start(self, timeout: float = START_TIMEOUT_S) -> "KafkaBroker":
        """Start the broker (formatting the storage of a new KRaft node first) and wait until it
        logs that it started and its port accepts connections; RuntimeError with the log's tail
        when it exits or does not get there within `timeout` seconds."""
        if self.running:
            return self
        props = self._write_config()
        if self.dist.kraft:
            self._format(props)
        else:
            self._start_zookeeper()
        self._log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
        with open(self.log_file, "ab") as out:
            out.write(f"# kbatch test: starting Kafka {self.version} (start {self.starts + 1})\n".encode())
            out.flush()
            self.proc = subprocess.Popen(self.java_command("kafka.Kafka", str(props)), stdout=out,
                                         stderr=subprocess.STDOUT, cwd=self.work_dir, start_new_session=True)
        self.starts += 1
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka {self.version} exited {self.proc.returncode} while starting:\n"
                                   f"{self.log_text(since_start=True)[-4000:]}")
            if _STARTED.search(self.log_text(since_start=True)) and _accepts(self.port):
                return self
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"Kafka {self.version} did not start within {timeout} s:\n"
                                   f"{self.log_text(since_start=True)[-4000:]}")
            time.sleep(0.2)

    def _signal(self, sig: int, timeout: float) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
                raise RuntimeError(f"Kafka {self.version} did not exit within {timeout} s of signal {sig}; killed")
        return self.proc.returncode

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait for the exit: the broker's clean shutdown (it writes
        `.kafka_cleanshutdown` into its log directory). Returns the exit code."""
        try:
            return self._signal(signal.SIGTERM, timeout)
        finally:
            self._stop_zookeeper()

    def kill(self) -> int | None:
        """SIGKILL: an unclean shutdown (nothing flushed, trimmed or checkpointed)."""
        try:
            return self._signal(signal.SIGKILL, 30)
        finally:
            self._stop_zookeeper()

    def _stop_zookeeper(self) -> None:
        if self.zk is not None and self.zk.poll() is None:
            self.zk.terminate()
            try:
                self.zk.wait(30)
            except subprocess.TimeoutExpired:
                self.zk.kill()
                self.zk.wait(30)

    def close(self) -> None:
        """Whatever is still running goes (SIGKILL): for fixture teardown."""
        self.kill()

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------ files
    def log_text(self, since_start: bool = False) -> str:
        """server.log (the broker's log4j output; each start appends), or only since the last start."""
        try:
            with open(self.log_file, "rb") as f:
                if since_start:
                    f.seek(self._log_start)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.log_dir / f"{topic}-{partition}"

    @property
    def clean_shutdown_file(self) -> Path:
        """What a clean shutdown leaves in the log directory (3.x and 4.x: `.kafka_cleanshutdown`)."""
        return self.log_dir / ".kafka_cleanshutdown"

    def copy_to(self, work_dir: str | os.PathLike[str], config: dict[str, str] | None = None) -> "KafkaBroker":
        """A new (stopped) broker over a copy of this one's log directory (and ZooKeeper data), with
        new ports and the same config unless `config` overrides it. This broker must be stopped."""
        if self.running:
            raise RuntimeError("copy_to: stop or kill the broker first")
        other = KafkaBroker(self.dist, work_dir, {**self.extra, **(config or {})}, node_id=self.node_id)
        shutil.copytree(self.log_dir, other.log_dir, symlinks=True)
        if (self.work_dir / "zookeeper").is_dir():
            shutil.copytree(self.work_dir / "zookeeper", other.work_dir / "zookeeper", symlinks=True)
        return other
