"""Kafka's own Java producer, consumer and Admin client, driven by a JSON plan
(tests/support/java/KafkaDriver.java; its header documents the plan).

    driver = JavaDriver(dist)                # compiled against the version's jars, once (cached)
    results = driver.run(broker.bootstrap, [create_topics(...), produce(...), consume(...)])

Keys, values and header values are bytes (or None) here; they travel as base64.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.kafka_broker import HEAP, KafkaUnavailable, dist_module

SOURCE = Path(__file__).resolve().parent / "java" / "KafkaDriver.java"
#: the consumer and Admin calls kbatch serve's tests make besides KafkaDriver's (tests/server/test_serve_java.py)
SERVE_SOURCE = SOURCE.with_name("ServeClientDriver.java")
RUN_TIMEOUT_S = 900.0


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


@dataclass
class Send:
    """One ProducerRecord (timestamp None: the producer's clock), sent by producer `p`."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    p: int = 0

    def step(self) -> dict[str, Any]:
        return {"p": self.p, "send": [self.topic, self.partition, b64(self.key), b64(self.value), self.timestamp,
                                      [[k, b64(v)] for k, v in self.headers]]}


def flush(p: int = 0) -> dict[str, Any]:
    return {"p": p, "flush": True}


def begin(p: int = 0) -> dict[str, Any]:
    return {"p": p, "begin": True}


def commit(p: int = 0) -> dict[str, Any]:
    return {"p": p, "commit": True}


def abort(p: int = 0) -> dict[str, Any]:
    return {"p": p, "abort": True}


def create_topics(topics: Iterable[tuple[str, int, dict[str, str]]]) -> dict[str, Any]:
    return {"op": "create_topics",
            "topics": [{"name": n, "partitions": p, "configs": dict(c)} for n, p, c in topics]}


def produce(producers: Sequence[dict[str, str]], steps: Iterable[Send | dict[str, Any]],
            errors: bool = False) -> dict[str, Any]:
    """Producers (their configs) and the steps they take, in order: Send, flush, begin, commit, abort.
    errors=True: a send the broker refuses gives [None] * 4 + [exception class, message] in "sent"
    instead of failing the plan."""
    return {"op": "produce", "producers": [{k: str(v) for k, v in props.items()} for props in producers],
            "steps": [s.step() if isinstance(s, Send) else s for s in steps], "errors": errors}


def consume(topics: Sequence[str], out: str | os.PathLike[str], isolation: str = "read_uncommitted") -> dict[str, Any]:
    return {"op": "consume", "topics": list(topics), "isolation": isolation, "out": str(out)}


def list_offsets(topics: Sequence[str], timestamps: Iterable[int],
                 isolation: str = "read_uncommitted") -> dict[str, Any]:
    return {"op": "list_offsets", "topics": list(topics), "timestamps": [int(t) for t in timestamps],
            "isolation": isolation}


@dataclass(frozen=True)
class Consumed:
    """One record as the Java consumer returned it."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: str  # "CreateTime" / "LogAppendTime"
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int | None


def read_consumed(path: str | os.PathLike[str]) -> list[Consumed]:
    out = []
    with open(path) as f:
        for line in f:
            o = json.loads(line)
            out.append(Consumed(o["t"], o["p"], o["o"], o["ts"], o["tt"], unb64(o["k"]), unb64(o["v"]),
                                tuple((k, unb64(v)) for k, v in o["h"]), o["le"]))
    return out


class JavaDriver:
    """KafkaDriver.java (or another driver source beside it, e.g. SERVE_SOURCE) compiled with javac
    against a Kafka version's jars into the cache (`<cache>/drivers/<version>-<source digest>/`), and
    run with them."""

    def __init__(self, dist: Any, source: Path = SOURCE) -> None:
        self.dist = dist
        self.source, self.main = source, source.stem
        digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
        self.classes = dist_module().cache_root() / "drivers" / f"{dist.version}-{digest}"
        if not (self.classes / f"{self.main}.class").exists():
            self._compile()

    def _compile(self) -> None:
        self.classes.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=self.classes.name + ".", dir=self.classes.parent))
        r = subprocess.run(["javac", "-nowarn", "-d", str(tmp), "-cp", self.dist.classpath, str(self.source)],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise KafkaUnavailable(f"javac of {self.source.name} against Kafka {self.dist.version}'s jars failed:\n"
                                   f"{r.stdout}{r.stderr}")
        try:
            tmp.rename(self.classes)
        except OSError:  # another run compiled it meanwhile
            subprocess.run(["rm", "-rf", str(tmp)], check=False)

    def run(self, bootstrap: str, actions: list[dict[str, Any]],
            timeout: float = RUN_TIMEOUT_S) -> list[dict[str, Any]]:
        """Run the actions in order against `bootstrap`; their results, in order. RuntimeError with
        the driver's output when it fails."""
        with tempfile.TemporaryDirectory(prefix="kafka-driver-") as d:
            plan, result = Path(d) / "plan.json", Path(d) / "result.json"
            plan.write_text(json.dumps({"bootstrap": bootstrap, "actions": actions}))
            cmd = ["java", f"-Xmx{HEAP}", "-Dlog4j2.level=WARN", "-Dlog4j.configuration=file:/dev/null",
                   "-cp", f"{self.classes}{os.pathsep}{self.dist.classpath}", self.main, str(plan), str(result)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if r.returncode != 0 or not result.exists():
                raise RuntimeError(f"{self.main} ({self.dist.version}) exited {r.returncode}:\n"
                                   f"{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
            return list(json.loads(result.read_text())["results"])
