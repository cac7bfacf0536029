#!/usr/bin/env python3
"""franz-go's client tests (pkg/kgo, the integration tests that run against seed brokers) against
`kbatch serve --writable` (issue 43; docs/serve.md's conformance matrix).

  python3 tools/franz_go_suite.py build     fetch the module from the Go module proxy and compile its test binary
  python3 tools/franz_go_suite.py run [--json OUT] [--run REGEX]

`go mod download github.com/twmb/franz-go@VERSION` brings the module (its _test.go files included)
into Go's module cache; it is copied to `<cache>/franz-go-<version>` (writable: `go test` resolves its
dependencies there, from the proxy) and `go test -c ./pkg/kgo` compiles `kgo.test` once. A run starts
one `python -m kbatch serve DIR --writable --auto-create-topics` on a free loopback port and runs the
binary in pkg/kgo with KGO_SEEDS naming it, KGO_TEST_RF=1 (the tests create their topics with that
replication factor; the default is 3, for a 3-broker cluster) and KGO_TEST_RECORDS=50000. Every top-level test's outcome
is read from `-test.v`; the tests that need an API or broker feature serve does not have are
excluded up front (EXCLUDED, with the reason) and not run. The cache is `~/.cache/kbatch` or
`$KBATCH_CONFORMANCE_CACHE`; nothing is written into the repository.

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

MODULE = "github.com/twmb/franz-go"
VERSION = "v1.22.3"
RECIPE = 1
#: KGO_TEST_RECORDS: records per ETL test (franz-go's default 500,000 is sized for a broker cluster;
#: this keeps the run within minutes on 2 cores)
RECORDS = 50_000

_TXN = ("transactions: the transaction coordinator (AddPartitionsToTxn, EndTxn, TxnOffsetCommit) is not "
        "implemented")
#: top-level test -> why it is not run against serve
EXCLUDED: dict[str, str] = {
    "TestTxnEtl": _TXN,
    "TestShareGroup": "share groups (KIP-932: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge) are not implemented",
    "TestShareGroupETL": "share groups (KIP-932) are not implemented",
    "TestShareGroupAckOnClose": "share groups (KIP-932) are not implemented",
    "TestShareGroupOffsetsAdmin": "share groups (KIP-932) are not implemented",
    "TestConsumeRegexShareSkipsInternal": "share groups (KIP-932) are not implemented",
    "Test848RegexBrokerResolves": "the KIP-848 consumer group protocol (ConsumerGroupHeartbeat) is not implemented",
    "TestSCRAMAuth": "SASL/SCRAM: serve listens on PLAINTEXT only",
    "TestSCRAMAuthBadCredentials": "SASL/SCRAM: serve listens on PLAINTEXT only",
    "TestOAuthAuth": "SASL/OAUTHBEARER: serve listens on PLAINTEXT only",
}


class SuiteError(RuntimeError):
    """The suite cannot be built or run here; the message says why."""


def cache_root() -> Path:
    env = os.environ.get("KBATCH_CONFORMANCE_CACHE", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kbatch"


def home() -> Path:
    return cache_root() / f"franz-go-{VERSION}"


def binary() -> Path:
    return home() / "kgo.test"


def _say(msg: str) -> None:
    print(f"[franz-go] {msg}", flush=True)


def build(say=_say) -> Path:
    stamp = home() / "built.json"
    want = {"recipe": RECIPE, "version": VERSION}
    if stamp.is_file() and binary().is_file():
        try:
            if json.loads(stamp.read_text()) == want:
                return binary()
        except ValueError:
            pass
    go = shutil.which("go")
    if go is None:
        raise SuiteError("no go on PATH: franz-go's tests are Go tests")
    dl = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{VERSION}"], capture_output=True, text=True,
                        timeout=900, cwd=tempfile.gettempdir())
    if dl.returncode != 0:
        raise SuiteError(f"go mod download {MODULE}@{VERSION} failed:\n{(dl.stdout + dl.stderr)[-2000:]}")
    src = Path(json.loads(dl.stdout)["Dir"])
    dst = home() / "src"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    for f in dst.rglob("*"):
        f.chmod(f.stat().st_mode | 0o200)
    say(f"go test -c ./pkg/kgo in {dst}")
    t0 = time.monotonic()
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    proc = subprocess.run([go, "test", "-c", "-o", str(binary()), "./pkg/kgo"], cwd=dst, capture_output=True,
                          text=True, timeout=1800, env=env)
    if proc.returncode != 0:
        raise SuiteError(f"go test -c failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
    say(f"compiled in {time.monotonic() - t0:.0f} s: {binary()}")
    stamp.write_text(json.dumps(want))
    return binary()


def test_names() -> list[str]:
    """Every top-level Test function of pkg/kgo's _test.go files."""
    names = []
    for f in sorted((home() / "src" / "pkg" / "kgo").glob("*_test.go")):
        names += re.findall(r"^func (Test\w*)\(t \*testing\.T\)", f.read_text(errors="replace"), re.M)
    return names


@dataclass
class Outcome:
    program: str
    result: str
    seconds: float
    reason: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"program": self.program, "result": self.result, "seconds": round(self.seconds, 1),
                "reason": self.reason}


_RESULT = re.compile(r"^--- (PASS|FAIL|SKIP): (Test\w*) \(([\d.]+)s\)", re.M)


def run(out_json: Path | None, *, python: str, pythonpath: str | None, pattern: str | None = None,
        timeout: float = 1800, say=_say) -> list[Outcome]:
    exe = build(say)
    names = test_names()
    run_names = [n for n in names if n not in EXCLUDED and (pattern is None or re.search(pattern, n))]
    work = Path(tempfile.mkdtemp(prefix="kbatch-franz-go-"))
    (work / "logs").mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    serve = subprocess.Popen([python, "-m", "kbatch", "serve", str(work / "logs"), "--writable",
                              "--auto-create-topics", "--listen", f"127.0.0.1:{port}", "--json",
                              "--group-initial-rebalance-delay-ms", "0"],
                             stdout=subprocess.PIPE, stderr=open(work / "serve.log", "w"), text=True, env=env)
    assert serve.stdout is not None
    line = serve.stdout.readline()
    if not line:
        raise SuiteError(f"kbatch serve did not start: {(work / 'serve.log').read_text()[-2000:]}")
    bootstrap = json.loads(line)["bootstrap"]
    test_env = {**os.environ, "KGO_SEEDS": bootstrap, "KGO_TEST_RF": "1", "KGO_TEST_RECORDS": str(RECORDS),
                "KGO_LOG_LEVEL": "warn"}
    regex = "^(" + "|".join(run_names) + ")$"
    say(f"{len(run_names)} tests against {bootstrap} (log: {work})")
    try:
        with open(work / "go-test.log", "w") as out:
            proc = subprocess.run([str(exe), "-test.v", "-test.count=1", f"-test.timeout={int(timeout)}s",
                                   "-test.run", regex], cwd=home() / "src" / "pkg" / "kgo", env=test_env,
                                  stdout=out, stderr=subprocess.STDOUT, timeout=timeout + 60)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        serve.terminate()
        try:
            serve.wait(30)
        except subprocess.TimeoutExpired:
            serve.kill()
    text = (work / "go-test.log").read_text(errors="replace")
    seen = {m.group(2): (m.group(1), float(m.group(3))) for m in _RESULT.finditer(text)}
    outcomes = []
    for name in names:
        if name in EXCLUDED:
            outcomes.append(Outcome(name, "excluded", 0.0, EXCLUDED[name]))
        elif name in seen:
            state, secs = seen[name]
            result = {"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}[state]
            outcomes.append(Outcome(name, result, secs, _reason(text, name) if result != "passed" else ""))
        elif name in run_names:
            why = "timed out" if rc is None else f"no result (test binary exit {rc})"
            outcomes.append(Outcome(name, "failed", 0.0, why))
    if out_json is not None:
        out_json.write_text(json.dumps([o.as_dict() for o in outcomes], indent=1))
    return outcomes


def _reason(text: str, name: str) -> str:
    """The first line a failing or skipped test logged (go test indents them under its name)."""
    m = re.search(r"^--- (?:FAIL|SKIP): " + re.escape(name) + r" \([\d.]+s\)\n((?:\s+.*\n){1,3})", text, re.M)
    return " ".join(line.strip() for line in m.group(1).splitlines())[:400] if m else ""


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="franz_go_suite.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build")
    r = sub.add_parser("run")
    r.add_argument("--json", type=Path)
    r.add_argument("--run", help="only the tests whose name matches this regular expression")
    r.add_argument("--python", default=sys.executable)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "build":
            print(build())
            return 0
        outcomes = run(args.json, python=args.python, pythonpath=os.environ.get("PYTHONPATH"), pattern=args.run)
    except SuiteError as e:
        print(f"[franz-go] {e}", file=sys.stderr)
        return 1
    for o in outcomes:
        print(f"{o.program}\t{o.result}\t{o.seconds}\t{o.reason}")
    c = {k: sum(o.result == k for o in outcomes) for k in ("passed", "failed", "skipped", "excluded")}
    print(f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped, {c['excluded']} excluded")
    return 1 if c["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
