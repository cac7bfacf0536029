"""Shared by the client drivers: read the plan, write the results (stdlib only: these also run
under the system Python with Debian's kafka-python 2.0.2)."""
import json
import sys


def hexb(b):
    return None if b is None else bytes(b).hex()


def unhex(s):
    return None if s is None else bytes.fromhex(s)


def main(run_step):
    bootstrap = sys.argv[1]
    plan = json.loads(sys.stdin.read())
    out = []
    for step in plan:
        try:
            out.append(run_step(bootstrap, step))
        except Exception as e:  # reported, not raised: the test decides
            out.append({"exception": f"{type(e).__name__}: {e}"})
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()
