#!/usr/bin/env python3
"""librdkafka's own test programs against `kbatch serve --writable` (issue 43; docs/serve.md's
conformance matrix).

  python3 tools/librdkafka_suite.py build              fetch librdkafka's source and build its test-runner
  python3 tools/librdkafka_suite.py run [--tests N,..] [--json OUT] [--timeout-multiplier X]
                                                       run each test program against its own serve
  python3 tools/librdkafka_suite.py list               every test program with what the run does with it

Source: the crates.io package rdkafka-sys vendors librdkafka with its `tests/` (the Debian source
package would need deb-src lines this machine's apt does not have). `cargo fetch` brings the crate
into cargo's registry cache; its `librdkafka/` is copied to `<cache>/librdkafka-<version>/src` and
built there (`./configure` without SSL, SASL, curl and zstd: no test this matrix runs needs them;
`make -C src`, `make -C src-cpp`, `make -C tests build`); a stamp file makes the next build free.
The cache is `~/.cache/kbatch` or `$KBATCH_CONFORMANCE_CACHE`; nothing is written into the repo.

Each test program (one `_TEST(...)` entry of tests/test.c) runs on its own: a fresh, empty log
directory served by `python -m kbatch serve DIR --writable --auto-create-topics --num-partitions 4` on a
free loopback port (librdkafka's "default" test scenario: auto-creation on, 4 partitions; a broker's
group.initial.rebalance.delay.ms of 3 s, which its group tests count on),
a `test.conf` naming it, and `test-runner` with `TESTS=<number>` and `TEST_KAFKA_VERSION` (the
broker version the runner gates tests on). Its outcome is read from the runner's summary table.
Programs that need no broker (TEST_F_LOCAL: librdkafka's mock cluster or pure unit tests) and
those listed in EXCLUDED (each with the API or broker feature it needs that serve does not have)
are not run; the matrix lists them with the reason.

Standard library only (the conformance test imports it).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: rdkafka-sys <crate version>+<librdkafka version>: the newest on crates.io when this was written
CRATE = "rdkafka-sys"
CRATE_VERSION = "4.10.0+2.12.1"
LIBRDKAFKA_VERSION = CRATE_VERSION.split("+", 1)[1]
#: the broker version the runner is told (it skips tests needing a newer one): a pinned Kafka
#: version serve is checked against (tools/kafka_dist.py)
KAFKA_VERSION = "3.9.2"
CONFIGURE = ["--no-download", "--disable-ssl", "--disable-gssapi", "--disable-curl", "--disable-zstd",
             "--disable-lz4-ext", "--disable-syslog"]
#: librdkafka's "default" test scenario (tests/scenarios/default.json): auto-created topics get 4
SCENARIO_PARTITIONS = 4
#: bumped when what a build produces changes
RECIPE = 1
BUILD_TIMEOUT_S = 3600

_NO_BROKER = "no broker: runs against librdkafka's mock cluster or tests the client alone (TEST_F_LOCAL)"
_TXN = ("transactions: the transaction coordinator (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, "
        "TxnOffsetCommit) is not implemented; serve reads and serves transactional data, it does not coordinate it")
_ACL = "ACLs and SASL/SSL: serve listens on PLAINTEXT only, with no authorizer (broker-internal security)"
_RF3 = "creates its topic with replication factor 3: needs three brokers (replication)"
#: test program -> why it is not run against serve. Every reason names an API serve does not
#: implement or a broker feature outside a read-and-replay server; each was confirmed by a run.
EXCLUDED: dict[str, str] = {
    "0019_list_groups": "ListGroups (16) and DescribeGroups (15) are not implemented",
    "0077_compaction": "the log cleaner: serve does not compact a topic while serving it (a broker's background "
                       "work; kbatch compacts a stopped log directory)",
    "0081_admin": "AlterConfigs, DeleteRecords, DescribeGroups, DeleteGroups, ACLs and other admin APIs "
                  "are not implemented",
    "0052_msg_timestamps": "Produce v0-v2 (message formats v0 and v1 from clients, which Kafka 4 removed by KIP-896): "
                           "serve's Produce starts at v3",
    "0055_producer_latency": "a sub-test is transactional: " + _TXN,
    "0061_consumer_lag": "a sub-test is transactional: " + _TXN,
    "0092_mixed_msgver": "AlterConfigs (33) is not implemented, and the config it sets (message.format.version: "
                         "magic 0, 1 and 2 mixed in one topic) went with Kafka 4 (KIP-724)",
    "0097_ssl_verify": _ACL,
    "0137_barrier_batch_consume": "a sub-test is transactional: " + _TXN,
    "0098_consumer_txn": _TXN,
    "0101_fetch_from_follower": "fetch from follower (KIP-392) needs replicas on other brokers with racks (replication)",
    "0103_transactions": _TXN,
    "0107_topic_recreate": _RF3,
    "0111_delay_create_topics": _RF3,
    "0109_auto_create_topics": "sets a deny-all ACL with kafka-acls.sh: " + _ACL,
    "0115_producer_auth": _ACL,
    "0119_consumer_auth": _ACL,
    "0126_oauthbearer_oidc": _ACL,
    "0129_fetch_aborted_msgs": _TXN,
    "0135_sasl_credentials": _ACL,
    "0142_reauthentication": _ACL,
}


class SuiteError(RuntimeError):
    """The suite cannot be built or run here; the message says why."""


def cache_root() -> Path:
    env = os.environ.get("KBATCH_CONFORMANCE_CACHE", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kbatch"


def home() -> Path:
    return cache_root() / f"librdkafka-{LIBRDKAFKA_VERSION}"


def runner_path() -> Path:
    return home() / "src" / "tests" / "test-runner"


def _say(msg: str) -> None:
    print(f"[librdkafka] {msg}", flush=True)


def _crate_source() -> Path:
    """The rdkafka-sys crate's unpacked source, fetched by cargo into its registry cache."""
    cargo = shutil.which("cargo")
    if cargo is None:
        raise SuiteError("no cargo on PATH: the librdkafka source comes from crates.io's rdkafka-sys")
    proj = home() / "crate"
    (proj / "src").mkdir(parents=True, exist_ok=True)
    (proj / "src" / "lib.rs").write_text("")
    (proj / "Cargo.toml").write_text(
        '[package]\nname = "kbatch-librdkafka-source"\nversion = "0.0.0"\nedition = "2021"\n\n'
        f'[dependencies]\n{CRATE} = {{ version = "={CRATE_VERSION}", default-features = false }}\n')
    run = subprocess.run([cargo, "fetch", "--manifest-path", str(proj / "Cargo.toml")], capture_output=True,
                         text=True, timeout=600)
    if run.returncode != 0:
        raise SuiteError(f"cargo fetch {CRATE} {CRATE_VERSION} failed:\n{run.stderr[-2000:]}")
    meta = subprocess.run([cargo, "metadata", "--format-version", "1", "--manifest-path", str(proj / "Cargo.toml")],
                          capture_output=True, text=True, timeout=600)
    if meta.returncode != 0:
        raise SuiteError(f"cargo metadata failed:\n{meta.stderr[-2000:]}")
    for pkg in json.loads(meta.stdout)["packages"]:
        if pkg["name"] == CRATE:
            src = Path(pkg["manifest_path"]).parent / "librdkafka"
            if not (src / "tests" / "test.c").is_file():
                raise SuiteError(f"{src} has no tests/test.c: this {CRATE} does not vendor librdkafka's tests")
            return src
    raise SuiteError(f"cargo metadata does not list {CRATE}")


def build(say=_say) -> Path:
    """The test-runner, built once into the cache (a stamp records the recipe)."""
    stamp = home() / "built.json"
    want = {"recipe": RECIPE, "crate": CRATE_VERSION, "configure": CONFIGURE}
    if stamp.is_file() and runner_path().is_file():
        try:
            if json.loads(stamp.read_text()) == want:
                return runner_path()
        except ValueError:
            pass
    src = _crate_source()
    dst = home() / "src"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    for f in dst.rglob("*"):  # cargo's registry copies are read-only; the build writes beside them
        if f.is_file() or f.is_dir():
            f.chmod(f.stat().st_mode | 0o200)
    log = home() / "build.log"
    steps = [["./configure", *CONFIGURE], ["make", "-j2", "-C", "src"], ["make", "-j2", "-C", "src-cpp"],
             ["make", "-j2", "-C", "tests", "build"]]
    t0 = time.monotonic()
    with open(log, "w") as out:
        for step in steps:
            say(f"{' '.join(step)} (log: {log})")
            rc = subprocess.run(step, cwd=dst, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S).returncode
            if rc != 0:
                raise SuiteError(f"{' '.join(step)} failed (exit {rc}); see {log}")
    say(f"built in {time.monotonic() - t0:.0f} s: {runner_path()}")
    stamp.write_text(json.dumps(want))
    return runner_path()


# ------------------------------------------------------------------------------------------ the programs
@dataclass(frozen=True)
class Program:
    name: str       # 0001_multiobj
    flags: str      # the _TEST flags as written (0, TEST_F_LOCAL, ...)
    scenario: str = "default"  # the trivup scenario it runs in (tests/scenarios/)

    @property
    def number(self) -> str:
        return self.name[:4]

    @property
    def local(self) -> bool:
        return "TEST_F_LOCAL" in self.flags

    @property
    def manual(self) -> bool:
        return "TEST_F_MANUAL" in self.flags

    def disposition(self) -> str | None:
        """Why it is not run against serve, or None when it is."""
        if self.manual:
            return "manual: run only when named (TEST_F_MANUAL)"
        if self.name.startswith("0000"):
            return "librdkafka's unit tests: no broker"
        if self.local:
            return _NO_BROKER
        if "_mock" in self.name:
            return "runs against a mock cluster it starts itself (rd_kafka_mock), not the configured broker"
        if re.search(r"\bTEST_F_KNOWN_ISSUE\b", self.flags):
            return "librdkafka marks it TEST_F_KNOWN_ISSUE: its own runs skip it"
        return EXCLUDED.get(self.name)


_TEST_RE = re.compile(r"_TEST\(\s*(\d{4}_\w+)\s*,\s*([^,)]*)((?:[^()]|\([^()]*\))*)\)", re.S)
_SCENARIO_RE = re.compile(r'\.scenario\s*=\s*"([^"]*)"')
#: the scenarios serve is started in: (--auto-create-topics?) as tests/scenarios/<name>.json says
SCENARIOS = {"default": True, "noautocreate": False}


def programs(src: Path | None = None) -> list[Program]:
    """Every _TEST(...) entry of tests/test.c, in order."""
    test_c = (src or home() / "src") / "tests" / "test.c"
    text = test_c.read_text(errors="replace")
    start = text.index("struct test tests[]")
    out = []
    for m in _TEST_RE.finditer(text, start):
        sc = _SCENARIO_RE.search(m.group(3))
        scenario = "default" if sc is None else sc.group(1).split(",")[0]
        out.append(Program(m.group(1), m.group(2).strip(), scenario))
    return out


# ------------------------------------------------------------------------------------------ a run
_ROW = re.compile(r"\|\S*\s+(\d{4}_\w+)\s+\|\S*\s+(PASSED|FAILED|SKIPPED|RUNNING|NOT STARTED)\s+\|\s*([\d.]+)s\s*\|"
                  r"(?:\S*\s*([^|\n]*?)\s*$)?", re.M)
_SKIP_REASON = re.compile(r"(?:SKIPPING|skipped|Skipping)[^\n]*", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\(B")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """`python -m kbatch serve DIR --writable --auto-create-topics` on a free loopback port."""

    def __init__(self, work: Path, python: str, pythonpath: str | None, auto_create: bool = True) -> None:
        self.dir = work / "logs"
        self.dir.mkdir(parents=True)
        self.log = work / "serve.log"
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [python, "-m", "kbatch", "serve", str(self.dir), "--writable",
             *(["--auto-create-topics"] if auto_create else []),
             "--num-partitions", str(SCENARIO_PARTITIONS), "--listen", f"127.0.0.1:{self.port}", "--json"],
            stdout=subprocess.PIPE, stderr=open(self.log, "w"), text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SuiteError(f"kbatch serve did not start: {self.log.read_text()[-2000:]}")
        self.bootstrap = json.loads(line)["bootstrap"]

    def stop(self) -> int | None:
        self.proc.terminate()
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(30)


@dataclass
class Outcome:
    program: str
    result: str          # passed / failed / skipped / excluded
    seconds: float
    reason: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"program": self.program, "result": self.result, "seconds": round(self.seconds, 1),
                "reason": self.reason}


def run_program(prog: Program, runner: Path, work: Path, *, python: str, pythonpath: str | None,
                multiplier: float, timeout: float) -> list[Outcome]:
    """One test number (every program of that number that is not local) against a fresh serve."""
    work.mkdir(parents=True, exist_ok=True)
    try:
        serve = Serve(work, python, pythonpath, auto_create=SCENARIOS.get(prog.scenario, True))
    except SuiteError as e:
        return [Outcome(prog.name, "failed", 0.0, str(e)[:400])]
    conf = work / "test.conf"
    conf.write_text(f"bootstrap.servers={serve.bootstrap}\ntest.timeout.multiplier={multiplier}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TESTS", "TESTS_SKIP", "KAFKA_PATH", "CI")}
    src = runner.parent.parent
    env.update({"RDKAFKA_TEST_CONF": str(conf), "TEST_KAFKA_VERSION": KAFKA_VERSION, "TESTS": prog.number,
                "LD_LIBRARY_PATH": f"{src / 'src'}:{src / 'src-cpp'}", "TEST_LEVEL": "2",
                "TEST_SCENARIO": prog.scenario, "BROKERS": serve.bootstrap})
    kpath = kafka_path(work.parent)
    if kpath is not None:
        env["KAFKA_PATH"] = str(kpath)
    t0 = time.monotonic()
    out_file = work / "runner.log"
    try:
        with open(out_file, "w") as out:
            proc = subprocess.run([str(runner), "-L"], cwd=runner.parent, env=env,
                                  stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        serve.stop()
    took = time.monotonic() - t0
    text = _ANSI.sub("", out_file.read_text(errors="replace"))
    rows = {m.group(1): (m.group(2), float(m.group(3)), (m.group(4) or "").strip()) for m in _ROW.finditer(text)}
    found = []
    for name, (state, secs, note) in rows.items():
        if not name.startswith(prog.number) or state == "SKIPPED" and "scenario" in note:
            continue
        result = {"PASSED": "passed", "FAILED": "failed", "SKIPPED": "skipped"}.get(state, "failed")
        reason = ""
        if result == "failed":
            reason = _failure_reason(text, name) or f"runner exit {rc}"
        elif result == "skipped":
            reason = f"the runner skipped it: {note}" if note else "the runner skipped it"
        found.append(Outcome(name, result, secs, reason))
    if not found:  # a failed assertion aborts the runner before its summary
        why = "timed out" if rc is None else _failure_reason(text, prog.number) or f"runner exit {rc}"
        found.append(Outcome(prog.name, "failed", took, why))
    return found


def _failure_reason(text: str, name: str) -> str:
    """The runner's first failure report of `name` (a program name or number): where, and what."""
    m = re.search(r'### Test "(' + re.escape(name) + r'[^"]*)" failed at ([^\n]*?)(?: at \w{3} \w{3} [^\n]*)?: ###\n([^\n]*)',
                  text)
    return f"{m.group(1)}: {m.group(2)}: {m.group(3).strip()}"[:400] if m else ""


#: Kafka KAFKA_VERSION's command-line tools (its kafka-topics.sh / kafka-configs.sh run these)
_KAFKA_TOOLS = {"kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
                "kafka-configs.sh": "kafka.admin.ConfigCommand"}


def kafka_path(work_root: Path) -> Path | None:
    """A KAFKA_PATH for the programs that shell out to Kafka's scripts (0045, 0052, 0077 create and
    alter topics with kafka-topics.sh): bin/kafka-topics.sh and bin/kafka-configs.sh running Kafka's
    own TopicCommand / ConfigCommand of KAFKA_VERSION (the version the runner is told; Kafka 4's
    tools refuse the small segment.bytes these programs give) from the cached jars
    (tools/kafka_dist.py), or None."""
    out = work_root / "kafka"
    if (out / "bin" / "kafka-topics.sh").is_file():
        return out
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import kafka_dist

        lib = kafka_dist.dist(KAFKA_VERSION).lib
    except Exception as e:  # noqa: BLE001 - the programs needing it then fail, saying KAFKA_PATH is unset
        _say(f"no Kafka jars for KAFKA_PATH: {e}")
        return None
    (out / "bin").mkdir(parents=True, exist_ok=True)
    for script, cls in _KAFKA_TOOLS.items():
        path = out / "bin" / script
        path.write_text(f'#!/bin/sh\nexec java -Xmx256m -cp "{lib}/*" {cls} "$@"\n')
        path.chmod(0o755)
    return out


def run(selected: list[str] | None, out_json: Path | None, *, python: str, pythonpath: str | None,
        multiplier: float, timeout: float, start: str | None = None, say=_say) -> list[Outcome]:
    runner = build(say)
    progs = programs()
    outcomes: list[Outcome] = []
    done_numbers: set[str] = set()  # "<number>-<scenario>" already run
    work_root = Path(tempfile.mkdtemp(prefix="kbatch-librdkafka-"))
    for prog in progs:
        if selected and prog.number not in selected and prog.name not in selected:
            continue
        if start and prog.number < start:
            continue
        why = prog.disposition()
        if why is not None:
            outcomes.append(Outcome(prog.name, "excluded", 0.0, why))
            continue
        key = f"{prog.number}-{prog.scenario}"
        if key in done_numbers:
            continue  # run with the first program of its number and scenario
        done_numbers.add(key)
        say(f"{prog.number} ({prog.scenario}) ...")
        got = run_program(prog, runner, work_root / key, python=python, pythonpath=pythonpath,
                          multiplier=multiplier, timeout=timeout)
        for o in got:
            say(f"  {o.program}: {o.result} ({o.seconds:.1f} s) {o.reason}")
            if o.program in EXCLUDED or any(p.name == o.program and (p.disposition() or p.scenario != prog.scenario)
                                            for p in progs):
                continue  # reported with its exclusion, or by its own scenario's run
            outcomes.append(o)
    by_name = {o.program: o for o in outcomes}
    ordered = [by_name[p.name] for p in progs if p.name in by_name]
    ordered += [o for o in outcomes if o.program not in {p.name for p in progs}]
    if out_json is not None:
        out_json.write_text(json.dumps({"suite": "librdkafka", "version": LIBRDKAFKA_VERSION,
                                        "kafka_version_told": KAFKA_VERSION, "work": str(work_root),
                                        "outcomes": [o.as_dict() for o in ordered]}, indent=1))
    return ordered


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="librdkafka_suite.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="fetch and build the test-runner into the cache")
    r = sub.add_parser("run", help="run the test programs against kbatch serve")
    r.add_argument("--tests", help="comma-separated test numbers or names (default: all)")
    r.add_argument("--from", dest="start", help="skip the test numbers before this one")
    r.add_argument("--json", type=Path, help="write the outcomes here")
    r.add_argument("--timeout-multiplier", type=float, default=2.0)
    r.add_argument("--timeout", type=float, default=1800.0, help="seconds per test number")
    r.add_argument("--python", default=sys.executable, help="the interpreter that runs kbatch serve")
    sub.add_parser("list", help="every test program and whether it is run")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "build":
            print(build())
            return 0
        if args.cmd == "list":
            build()
            for p in programs():
                print(f"{p.name}\t{p.disposition() or 'run'}")
            return 0
        selected = [t.strip() for t in args.tests.split(",")] if args.tests else None
        outcomes = run(selected, args.json, python=args.python, pythonpath=os.environ.get("PYTHONPATH"),
                       multiplier=args.timeout_multiplier, timeout=args.timeout, start=args.start)
        counts = {k: sum(o.result == k for o in outcomes) for k in ("passed", "failed", "skipped", "excluded")}
        print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, "
              f"{counts['excluded']} excluded")
        return 1 if counts["failed"] else 0
    except SuiteError as e:
        print(f"[librdkafka] {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
