"""`kbatch audit`: producer state, transactions, timestamps and storage of log directories, in one
header walk (kbatch.log.audit), each result a finding with topic, partition, offsets, segment and
a severity. Exit 0 when no finding reaches --fail-on (default error), 1 when one does, 2 for a
usage error. Bytes that cannot be read are error findings, never skipped in silence.

`--json` writes one JSON document (docs/cli.md, "kbatch audit --json"): {"version": 1, ...}.
"""

import json
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from ..errors import InvalidConfigurationError
from ._common import (EXIT_OK, EXIT_PROBLEMS, UsageProblem, format_time, progress_bar, resolve_segments, run,
                      time_value, total_size)

if TYPE_CHECKING:
    import typer

    from .._typing import PathLike
    from ..log.audit import AuditConfig, AuditResult
    from ..log.findings import Finding


def audit_config(config_file: str | None = None, *, now: int | None = None, before_max_ms: int | None = None,
                 after_max_ms: int | None = None, transaction_max_timeout_ms: int | None = None,
                 max_message_bytes: int | None = None, backwards_max_ms: int | None = None,
                 no_backwards: bool = False, trust_headers: bool = False,
                 record_timestamps: bool = False) -> "AuditConfig":
    """The AuditConfig of the command line: a --config properties file, then the options over it."""
    from ..log.audit import AuditConfig, read_properties

    props: dict[str, str] = {}
    if config_file is not None:
        try:
            props = read_properties(config_file)
        except OSError as e:
            raise UsageProblem(f"{config_file}: {e.strerror or e}") from None
        except UnicodeDecodeError as e:
            raise UsageProblem(f"{config_file}: not a text properties file ({e})") from None
    kw: dict[str, Any] = {}
    for name, value in (("before_max_ms", before_max_ms), ("after_max_ms", after_max_ms),
                        ("transaction_max_timeout_ms", transaction_max_timeout_ms),
                        ("max_message_bytes", max_message_bytes), ("backwards_max_ms", backwards_max_ms)):
        if value is not None:
            if value < 0:
                raise UsageProblem(f"--{name.replace('_', '-')} must be >= 0")
            kw[name] = value
    if no_backwards:
        kw["backwards_max_ms"] = None
    try:
        return AuditConfig.from_properties(props, now=now, verify_crc=not trust_headers,
                                           record_timestamps=record_timestamps, **kw)
    except InvalidConfigurationError as e:
        raise UsageProblem(f"{config_file}: {e}") from None


def run_audit(paths: "Sequence[PathLike]", config: "AuditConfig", quiet: bool = True,
              label: str = "audit") -> "AuditResult":
    """Resolve the paths (segment, partition or log directories; a usage problem when one is not)
    and audit them; tiered copies left out as incomplete are error findings."""
    from ..log.audit import audit_partitions
    from ..log.findings import Finding, Severity

    import logging

    if not paths:
        raise UsageProblem("give at least one log directory, partition directory or segment")
    # the segment loader logs what it reads around; the audit says it once, as findings
    logging.getLogger("kbatch.log.segment").addHandler(logging.NullHandler())
    left_out: list[str] = []
    parts = []
    for p in paths:
        parts += resolve_segments(p, left_out)
    with progress_bar(total_size(parts), label, quiet) as advance:
        result = audit_partitions(parts, config, advance)
    for text in left_out:
        file, _, why = text.partition(": ")
        result.findings.insert(0, Finding("storage.unreadable", Severity.ERROR, why or text, segment=file))
    result.findings.sort(key=_order)
    return result


def _order(f: "Finding") -> tuple[Any, ...]:
    return (f.topic or "", f.partition if f.partition is not None else -1,
            f.first_offset if f.first_offset is not None else -1, f.segment or "", f.position or 0, f.check)


def audit_document(result: "AuditResult", fail_on: str) -> dict[str, Any]:
    """The --json document (schema in docs/cli.md)."""
    from dataclasses import asdict

    from ..log.findings import FINDINGS_SCHEMA_VERSION, Severity, at_or_above, counts

    level = Severity.parse(fail_on)
    cfg = asdict(result.config)
    totals = dict(partitions=len(result.partitions), segments=sum(len(p.segments) for p in result.partitions),
                  batches=sum(p.rows for p in result.partitions),
                  records=sum(p.summary.get("records", 0) for p in result.partitions),
                  bytes=sum(p.bytes for p in result.partitions),
                  unread_bytes=sum(p.unread_bytes for p in result.partitions))
    failing = at_or_above(result.findings, level)
    return {"version": FINDINGS_SCHEMA_VERSION, "tool": "kbatch audit",
            "clock": {"value": result.clock, "iso": format_time(result.clock) if result.clock is not None else None,
                      "source": result.clock_source},
            "config": cfg, "fail_on": level.label, "ok": not failing,
            "counts": counts(result.findings), "totals": totals,
            "partitions": [p.summary for p in result.partitions],
            "findings": [f.as_json() for f in result.findings]}


def cmd_audit(paths: "Sequence[PathLike]", *, config_file: str | None = None, fail_on: str = "error",
              now: int | None = None, before_max_ms: int | None = None, after_max_ms: int | None = None,
              transaction_max_timeout_ms: int | None = None, max_message_bytes: int | None = None,
              backwards_max_ms: int | None = None, no_backwards: bool = False, trust_headers: bool = False,
              record_timestamps: bool = False, as_json: bool = False, quiet: bool = False, out: IO[str] | None = None,
              err: IO[str] | None = None) -> int:
    from ..log.findings import Severity, at_or_above, counts

    out = out or sys.stdout
    try:
        level = Severity.parse(fail_on)
    except ValueError as e:
        raise UsageProblem(f"--fail-on: {e}") from None
    config = audit_config(config_file, now=now, before_max_ms=before_max_ms, after_max_ms=after_max_ms,
                          transaction_max_timeout_ms=transaction_max_timeout_ms, max_message_bytes=max_message_bytes,
                          backwards_max_ms=backwards_max_ms, no_backwards=no_backwards, trust_headers=trust_headers,
                          record_timestamps=record_timestamps)
    result = run_audit(list(paths), config, quiet)
    failing = at_or_above(result.findings, level)
    if as_json:
        out.write(json.dumps(audit_document(result, level.label), separators=(", ", ": ")) + "\n")
        return EXIT_PROBLEMS if failing else EXIT_OK
    for f in result.findings:
        if not quiet or f.severity >= level:
            out.write(f.text() + "\n")
    n = counts(result.findings)
    if not quiet or failing:
        clock = (f"{result.clock} ({format_time(result.clock)}, {result.clock_source})" if result.clock is not None
                 else "none (no timestamps)")
        verdict = "OK" if not failing else f"{len(failing)} finding(s) at or above {level.label}"
        out.write(f"{verdict}: {n['error']} error(s), {n['warning']} warning(s), {n['info']} info; "
                  f"{len(result.partitions)} partition(s), {sum(len(p.segments) for p in result.partitions)} "
                  f"segment(s), {sum(p.rows for p in result.partitions)} batches, "
                  f"{sum(p.bytes for p in result.partitions)} bytes; clock {clock}\n")
        if not config.verify_crc:
            out.write("note: --trust-headers: CRCs were not checked, so a bit flip inside a batch is not seen\n")
    return EXIT_PROBLEMS if failing else EXIT_OK


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    quiet_flag = typer.Option("--quiet", "-q", help="No progress bar; print only findings at or above --fail-on.")

    @app.command(help="Forensics over log directories, from batch headers (CRCs checked): producer sequence gaps, "
                      "duplicates and fenced epochs; open and hanging transactions (KIP-664, by the log's own clock), "
                      "markers without data, the LSO; timestamps (KIP-937 skew, KIP-228 negative, micro/nanoseconds, "
                      "future ones holding back retention, CreateTime going backwards); storage (CRCs, framing, "
                      "indexes, empty batches, leader epochs going back, batches over max.message.bytes). "
                      "Exit 1 when a finding reaches --fail-on.")
    def audit(paths: Annotated[List[str], typer.Argument(help="Log directories, partition directories or segment .log files.")],
              config_file: Annotated[Optional[str], typer.Option("--config", help="A broker's server.properties or a topic's configs (key=value): message.timestamp.before/after.max.ms, transaction.max.timeout.ms, max.message.bytes, retention.ms (and their log.* broker names). Kafka's defaults otherwise.")] = None,
              fail_on: Annotated[str, typer.Option("--fail-on", help="Exit 1 when a finding is at or above this level: info, warning or error.")] = "error",
              now: Annotated[Optional[str], typer.Option("--now", help="The clock to judge by (epoch ms or ISO-8601); default: the log's own clock (its newest last-batch timestamp).")] = None,
              before_max_ms: Annotated[Optional[int], typer.Option("--before-max-ms", help="message.timestamp.before.max.ms (over --config).")] = None,
              after_max_ms: Annotated[Optional[int], typer.Option("--after-max-ms", help="message.timestamp.after.max.ms (over --config; default 3600000, Kafka 4).")] = None,
              transaction_max_timeout_ms: Annotated[Optional[int], typer.Option("--transaction-max-timeout-ms", help="transaction.max.timeout.ms (over --config; default 900000).")] = None,
              max_message_bytes: Annotated[Optional[int], typer.Option("--max-message-bytes", help="max.message.bytes (over --config; default 1048588).")] = None,
              backwards_max_ms: Annotated[Optional[int], typer.Option("--backwards-max-ms", help="CreateTime going back by more than this is a finding (default 86400000).")] = None,
              no_backwards: Annotated[bool, typer.Option("--no-backwards", help="Do not check CreateTime going backwards.")] = False,
              trust_headers: Annotated[bool, typer.Option("--trust-headers", help="Do not check CRCs (faster; a bit flip inside a batch goes unseen).")] = False,
              record_timestamps: Annotated[bool, typer.Option("--record-timestamps", help="Decode CreateTime batches for every record's timestamp (finds negative, too-old and backwards timestamps between a batch's first and max; slower).")] = False,
              as_json: Annotated[bool, typer.Option("--json", help="One JSON document (schema: docs/cli.md).")] = False,
              quiet: Annotated[bool, quiet_flag] = False) -> None:
        run(cmd_audit, paths, config_file=config_file, fail_on=fail_on, now=time_value(now),
            before_max_ms=before_max_ms, after_max_ms=after_max_ms,
            transaction_max_timeout_ms=transaction_max_timeout_ms, max_message_bytes=max_message_bytes,
            backwards_max_ms=backwards_max_ms, no_backwards=no_backwards, trust_headers=trust_headers,
            record_timestamps=record_timestamps, as_json=as_json, quiet=quiet)
