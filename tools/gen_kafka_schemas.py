#!/usr/bin/env python3
"""Generate src/kbatch/schema/_tables.py from Apache Kafka's JSON message schemas.

kbatch decodes the records Kafka keeps in its internal topics and snapshots (KRaft metadata
records, __consumer_offsets and __transaction_state keys and values, raft control records, the
producer-state snapshot) with one schema-driven reader (src/kbatch/schema/__init__.py). This
script turns Kafka's schemas into the compact tables that reader walks, so no layout is written
by hand. It reads the schemas from a Kafka git repository at a given commit:

    python3 tools/gen_kafka_schemas.py --kafka /path/to/kafka/.git --commit 1eb7644349cb

and records the commit in the generated file. Only the schemas listed in SOURCES are taken.
"""
from __future__ import annotations

import argparse
import json
import pprint
import re
import subprocess
import sys
from pathlib import Path

SOURCES = {
    # KRaft metadata records (MetadataRecordType): every file of the directory
    "metadata/src/main/resources/common/metadata/": None,
    # __consumer_offsets (GroupCoordinatorRecordSerde) and __transaction_state (TransactionLog)
    "group-coordinator/src/main/resources/common/message/": None,
    "transaction-coordinator/src/main/resources/common/message/": None,
    # raft control records, the consumer protocol embedded in group metadata
    "clients/src/main/resources/common/message/": ("SnapshotHeaderRecord", "SnapshotFooterRecord",
                                                   "KRaftVersionRecord", "VotersRecord", "LeaderChangeMessage",
                                                   "ConsumerProtocolSubscription", "ConsumerProtocolAssignment"),
    # ProducerStateManager's snapshot file
    "storage/src/main/resources/message/": ("ProducerSnapshot",),
}
MAX_VERSION = 0x7FFF


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True, text=True).stdout


def strip_comments(text: str) -> str:
    """Kafka's schema files are JSON with // comments."""
    return "\n".join(re.sub(r"^\s*//.*$", "", line) for line in text.splitlines())


def versions(spec) -> tuple | None:
    """"0+" -> (0, MAX), "1" -> (1, 1), "0-4" -> (0, 4), "none"/absent -> None."""
    if spec is None or spec == "none":
        return None
    spec = str(spec).strip()
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX_VERSION)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def camel(name: str) -> str:
    """Kafka's JSON converters write field names with the first letter lowercased."""
    return name[0].lower() + name[1:]


def default_value(ftype: str, default, nullable):
    if ftype.startswith("[]"):
        return []
    if default is None:
        return {"bool": False, "string": "", "bytes": b"", "float64": 0.0, "uuid": "AAAAAAAAAAAAAAAAAAAAAA"}.get(
            ftype, 0 if ftype in ("int8", "int16", "int32", "int64", "uint16", "uint32") else None)
    if default == "null":
        return None
    if ftype == "bool":
        return str(default).lower() == "true"
    if ftype in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return int(str(default), 0)
    if ftype == "float64":
        return float(default)
    return default


def convert_fields(fields, structs) -> tuple:
    out = []
    for f in fields:
        ftype = f["type"]
        elem = ftype[2:] if ftype.startswith("[]") else ftype
        sub = None
        if "fields" in f:
            sub = convert_fields(f["fields"], structs)
        elif elem in structs:
            sub = convert_fields(structs[elem]["fields"], structs)
        kind = elem if sub is None else "struct"
        # FieldSpec: a tagged field without "versions" exists in its taggedVersions
        out.append((camel(f["name"]), ftype.startswith("[]"), kind, versions(f.get("versions", f.get("taggedVersions"))),
                    versions(f.get("nullableVersions")), versions(f.get("taggedVersions")), f.get("tag"),
                    default_value(ftype, f.get("default"), f.get("nullableVersions")), sub))
    return tuple(out)


def load(repo: str, commit: str) -> dict:
    files = [p for p in git(repo, "ls-tree", "--name-only", commit, *SOURCES).split() if p.endswith(".json")]
    messages = {}
    for path in sorted(files):
        folder = path[:path.rindex("/") + 1]
        name = Path(path).stem
        wanted = SOURCES[folder]
        if wanted is not None and name not in wanted:
            continue
        spec = json.loads(strip_comments(git(repo, "show", f"{commit}:{path}")))
        structs = {s["name"]: s for s in spec.get("commonStructs", ())}
        messages[spec["name"]] = dict(
            type=spec["type"], api_key=spec.get("apiKey"), valid=versions(spec["validVersions"]),
            flexible=versions(spec.get("flexibleVersions")), fields=convert_fields(spec["fields"], structs),
            source=path)
    return messages


HEADER = '''"""Apache Kafka message schemas as tables for kbatch.schema (generated; do not edit).

Generated by tools/gen_kafka_schemas.py from apache/kafka commit {commit} ({date}).
MESSAGES[name] = dict(type, api_key, valid, flexible, fields, source); each field is
(json name, is array, type or "struct", versions, nullable versions, tagged versions, tag, default,
sub-fields); versions are (low, high) or None.
"""
# flake8: noqa

KAFKA_COMMIT = {commit!r}

MESSAGES = '''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kafka", required=True, help="a Kafka git directory (a clone's .git, or a bare repository)")
    ap.add_argument("--commit", default="HEAD", help="the commit to read the schemas from")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "src/kbatch/schema/_tables.py"))
    a = ap.parse_args(argv)
    commit = git(a.kafka, "rev-parse", a.commit).strip()
    date = git(a.kafka, "show", "-s", "--format=%cs", commit).strip()
    messages = load(a.kafka, commit)
    text = HEADER.format(commit=commit, date=date) + pprint.pformat(messages, width=120, sort_dicts=True) + "\n"
    Path(a.out).write_text(text)
    print(f"{len(messages)} messages from {commit} -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
