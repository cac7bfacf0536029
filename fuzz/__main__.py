"""Run every fuzz target (or the ones named) for a time each, in its own process.

  python -m fuzz [SECONDS] [TARGET ...]     coverage-guided run (atheris), corpus in fuzz/corpus/<target>
  python -m fuzz --replay                   run every corpus file through its target once (a regression test)
  python -m fuzz --seed                     (re)write the seed corpus from kbatch-built and real-broker batches

Each target runs both backends on every input and fails on a disagreement; -timeout makes a hang a
failure. A summary line per target gives executions, coverage (edges), features, corpus size and
exec/s. With a native-instrumented build (`python3 dev.py build --fuzz [--sanitize]`) the children
get the runtime it needs (fuzz/native.py: LD_PRELOAD of atheris' asan_with_fuzzer.so for the ASan
variant) and the C kernels' edges count in the coverage.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from fuzz.native import child_env, describe, load_libfuzzer

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"


def run_target(name: str, seconds: int) -> dict:
    corpus = CORPUS / name
    corpus.mkdir(parents=True, exist_ok=True)
    work = HERE / "work" / name  # new inputs found in this run (not committed)
    work.mkdir(parents=True, exist_ok=True)
    artifacts = HERE / "crashes"
    artifacts.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "fuzz.run", name, f"-max_total_time={seconds}", "-timeout=10",
           "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={artifacts}/{name}-",
           str(work), str(corpus)]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent, env=child_env())
    log = p.stdout + p.stderr
    (HERE / "work" / f"{name}.log").write_text(log)
    execs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
    cov = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)/", log)
    cov, ft, corp = (int(x) for x in cov[-1]) if cov else (0, 0, 0)
    return {"target": name, "rc": p.returncode, "execs": int(execs[-1]) if execs else 0,
            "cov": cov, "ft": ft, "corp": corp, "seconds": round(time.time() - t0, 1),
            "tail": log[-3000:] if p.returncode else ""}


def replay() -> int:
    from fuzz.targets import TARGETS

    failures = 0
    for name, fn in TARGETS.items():
        files = sorted((CORPUS / name).glob("*")) if (CORPUS / name).exists() else []
        for f in files:
            try:
                fn(f.read_bytes())
            except Exception as e:  # noqa: BLE001 - report every failing seed
                failures += 1
                print(f"FAIL {name} {f.name}: {type(e).__name__}: {e}")
        print(f"{name}: {len(files)} inputs replayed")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    env = child_env()
    if env.get("LD_PRELOAD") != os.environ.get("LD_PRELOAD"):
        # a sanitizer build: this process (replay, seeding) and the fuzz.run children run under its runtime
        os.execve(sys.executable, [sys.executable, "-m", "fuzz", *argv], env)
    load_libfuzzer()  # a --fuzz build imports only with libFuzzer's callbacks in place (fuzz/native.py)
    if "--replay" in argv:
        return replay()
    if "--seed" in argv:
        from fuzz.seeds import write_seeds

        write_seeds(CORPUS)
        return 0
    from fuzz.targets import TARGETS

    seconds = int(argv[0]) if argv and argv[0].isdigit() else 60
    names = [a for a in argv if not a.isdigit()] or list(TARGETS)
    print(describe(), flush=True)
    results = [run_target(n, seconds) for n in names]
    print(f"{'target':<16}{'execs':>12}{'cov':>8}{'ft':>8}{'corp':>6}{'exec/s':>10}  status")
    for r in results:
        rate = r["execs"] / r["seconds"] if r["seconds"] else 0
        print(f"{r['target']:<16}{r['execs']:>12}{r['cov']:>8}{r['ft']:>8}{r['corp']:>6}{rate:>10.0f}  "
              f"{'ok' if r['rc'] == 0 else 'FAILED'}")
        if r["rc"]:
            print(r["tail"])
    print(f"total executions: {sum(r['execs'] for r in results)}")
    return 0 if all(r["rc"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
