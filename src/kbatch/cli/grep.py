"""`kbatch grep`: the records that hold a pattern in their key, value or header values.

    kbatch grep 'order-42' /var/lib/kafka/data -t 'orders*' --from 2024-05-01T09:00:00Z -J

The records searched are exactly those `kbatch cat` prints with the same options: read through
kbatch.log.fetch (the read path every reader takes), control records never, records of aborted
transactions not under read_committed (the default, as cat's), up to the last stable offset; the
search itself is kbatch.record.search (a fixed string: the grep_records_v2 kernel, memmem over each
batch's records; -E / -i: Python's `re` over the decoded fields).

- where: keys, values and every header's value by default; --key, --value, --headers, --header
  NAME (repeatable) restrict it to those (together: any of them). A null field holds nothing; an
  occurrence across two fields does not count.
- bounds: --from beginning|end|N|-N|TIME and --until N|TIME, TIME an ISO-8601 date/time or @MS
  (epoch ms; s@MS / e@MS as in cat's -o): a time is the first offset whose timestamp >= TIME,
  looked up through .timeindex/.index (KIP-79), as cat's s@ / e@; --until is exclusive.
- topics: a log directory's partitions as cat selects them (--topic globs, repeatable;
  --exclude-topic; --partition; internal topics only when named or with --include-internal).
- output: kcat's -f tokens (cat's formatter; the default names topic, partition and offset), -J
  cat's JSON lines, --count (per partition, then the total), -l the partition directories with a
  match, -q nothing.
- exit codes, as grep's: 0 a record matched, 1 none did, 2 a usage error or a path that cannot be
  opened, 3 bytes that could not be read (named on stderr, as cat names them; a `FAILED` count line
  / an `error` JSON line), whatever matched before or after them.
"""
import logging
import re
import sys
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Literal, NamedTuple

from ..errors import KBatchError, StorageError
from ._common import UsageProblem, log_bytes, parse_time, progress_bar, selected_partitions, topic_list
from .cat import Formatter, Start, _binary, _tstype, start_offset

if TYPE_CHECKING:
    import typer

    from ..log.fetch import FetchResult, Lookup, Select
    from ..log.layout import Partition
    from ..record.search import RecordSearch
    from .cat import _BytesOut

EXIT_MATCH = 0
EXIT_NO_MATCH = 1
EXIT_USAGE = 2
EXIT_UNREADABLE = 3

#: grep's default line: where the record is, its key and value (kcat -f tokens)
DEFAULT_FORMAT = "%t [%p] at offset %o: key %k: %s\\n"

#: --until: ("offset", N) or ("time", T)
Until = tuple[Literal["offset", "time"], int]


def _time(text: str, option: str) -> int:
    try:
        return parse_time(text)
    except UsageProblem:
        raise UsageProblem(f"{option} {text!r}: expected an offset, or a time as ISO-8601 (2024-05-01T09:00:00Z) "
                           f"or @MS (epoch milliseconds)") from None


def parse_from(text: str | None) -> Start:
    """--from -> cat's start: beginning, end, N, -N (N before the end) or a time."""
    if text is None:
        return ("beginning",)
    s = text.strip()
    if s in ("beginning", "end"):
        return (s,)  # type: ignore[return-value]
    if re.fullmatch(r"[+-]?\d+", s):
        v = int(s)
        return ("tail", -v) if v < 0 else ("abs", v)
    return ("time", _time(re.sub(r"^s?@", "", s), "--from"))


def parse_until(text: str | None) -> Until | None:
    """--until -> ("offset", N) (exclusive) or ("time", T) (before the first record with ts >= T)."""
    if text is None:
        return None
    s = text.strip()
    if re.fullmatch(r"\d+", s):
        return ("offset", int(s))
    return ("time", _time(re.sub(r"^e?@", "", s), "--until"))


class PartitionResult(NamedTuple):
    topic: str
    partition: int
    path: str
    matches: int
    failed: str | None    # why it could not be read in full (said on stderr), None when it was
    unopened: bool        # the directory could not be opened (exit 2, as cat)


class _Run:
    """One grep over the selected partitions: what goes out, what was met."""

    def __init__(self, search: "RecordSearch", start: Start, until: Until | None, read_committed: bool,
                 formatter: Formatter, dest: "_BytesOut", err: IO[str], mode: str, max_count: int | None) -> None:
        self.search, self.start, self.until, self.read_committed = search, start, until, read_committed
        self.formatter, self.dest, self.err, self.mode, self.max_count = formatter, dest, err, mode, max_count
        self.total = 0

    def full(self) -> bool:
        return self.max_count is not None and self.total >= self.max_count

    def partition(self, part: "Partition", advance: Callable[[int], object]) -> PartitionResult:
        from ..log.fetch import IsolationLevel, damage_verdict, read_log
        from ..log.unified_log import Log

        t = part.topic if part.topic is not None else ""
        p = part.partition if part.partition is not None else -1
        name = f"{t} [{p}]"
        try:
            log = Log.open(part.path)
        except KBatchError as e:
            self.err.write(f"kbatch: {part.path}: {e}\n")
            return PartitionResult(t, p, part.path, 0, None if isinstance(e, StorageError) else str(e),
                                   isinstance(e, StorageError))
        found = 0
        failed: str | None = None
        unopened = False
        fetch: "FetchResult | None" = None
        lookups: "list[Lookup]" = []
        try:
            first = start_offset(log, self.start, self.err, name, lookups)
            stop: int | None = None
            if self.until is not None and self.until[0] == "offset":
                stop = self.until[1]
            elif self.until is not None:
                hit = log.offset_for(self.until[1])
                lookups.append((f"--until {self.until[1]}", self.until[1], hit))
                stop = None if hit is None else hit.offset
            level = IsolationLevel.READ_COMMITTED if self.read_committed else IsolationLevel.READ_UNCOMMITTED
            fetch = read_log(log, first, stop, isolation=level)
            for b, r in fetch.records(self._select(advance)):
                found += 1
                self.total += 1
                if self.mode == "lines":
                    self.dest.write(self.formatter.format(t, p, r, _tstype(b), self.err))
                if self.mode == "list" or self.full():
                    break
        except KBatchError as e:
            self.err.write(f"kbatch: {part.path}: {e}\n")
            if isinstance(e, StorageError):
                unopened = True
            else:
                failed = str(e)
        finally:
            # the one rule for what the damage met means to this answer, as cat takes it
            problems, notes = fetch.verdict(lookups) if fetch is not None else damage_verdict(log, lookups)
            for problem in problems + notes:
                self.err.write(f"kbatch: {problem}\n")
            if problems and failed is None:
                failed = problems[0]
            log.close()
        return PartitionResult(t, p, part.path, found, failed, unopened)

    def _select(self, advance: Callable[[int], object]) -> "Select":
        search = self.search

        def select(window: Any, rows: Any) -> Any:
            advance(int(window["size"][rows].sum()))  # the bar moves by the bytes of the batches read
            return search.select(window, rows)
        return select


def cmd_grep(pattern: str, paths: Sequence[str], *, regex: bool = False, ignore_case: bool = False,
             key: bool = False, value: bool = False, headers: bool = False, header_names: Sequence[str] = (),
             topic: str | Sequence[str] | None = None, exclude_topic: Sequence[str] = (),
             partition: int | None = None, include_internal: bool = False, from_: str | None = None,
             until: str | None = None, isolation_level: str | None = None, fmt: str | None = None,
             as_json: bool = False, count: bool = False, list_partitions: bool = False, quiet: bool = False,
             max_count: int | None = None, out: IO[str] | BinaryIO | None = None, err: IO[str] | None = None) -> int:
    """Search the partitions under `paths` (see the module docstring); the exit code."""
    try:
        return _grep(pattern, paths, regex, ignore_case, key, value, headers, header_names, topic, exclude_topic,
                     partition, include_internal, from_, until, isolation_level, fmt, as_json, count,
                     list_partitions, quiet, max_count, out, err)
    except StorageError as e:  # a directory that cannot be listed: cat's exit 2
        (err if err is not None else sys.stderr).write(f"kbatch: {e}\n")
        return EXIT_USAGE
    except KBatchError as e:   # never exit 1 (no match) for a failure
        (err if err is not None else sys.stderr).write(f"kbatch: {e}\n")
        return EXIT_UNREADABLE


def _grep(pattern: str, paths: Sequence[str], regex: bool, ignore_case: bool, key: bool, value: bool, headers: bool,
          header_names: Sequence[str], topic: str | Sequence[str] | None, exclude_topic: Sequence[str],
          partition: int | None, include_internal: bool, from_: str | None, until: str | None,
          isolation_level: str | None, fmt: str | None, as_json: bool, count: bool, list_partitions: bool,
          quiet: bool, max_count: int | None, out: IO[str] | BinaryIO | None, err: IO[str] | None) -> int:
    from ..record.search import RecordSearch

    dest = _binary(out if out is not None else sys.stdout)
    err = err if err is not None else sys.stderr
    if not paths:
        raise UsageProblem("grep: give at least one log directory or partition directory")
    try:
        search = RecordSearch(pattern, regex=regex, ignore_case=ignore_case, key=key, value=value, headers=headers,
                              header_names=header_names)
    except ValueError as e:
        raise UsageProblem(f"grep: {e}") from None
    start, stop = parse_from(from_), parse_until(until)
    read_committed = True  # cat's default (librdkafka's)
    if isolation_level is not None:
        if isolation_level not in ("read_committed", "read_uncommitted"):
            raise UsageProblem(f"--isolation-level {isolation_level!r}: expected read_uncommitted or read_committed")
        read_committed = isolation_level == "read_committed"
    if max_count is not None and max_count < 1:
        raise UsageProblem("--max-count must be >= 1")
    if sum((count, list_partitions, quiet)) > 1:
        raise UsageProblem("--count, -l and -q are different outputs: give one")
    mode = "count" if count else "list" if list_partitions else "quiet" if quiet else "lines"
    formatter = Formatter(DEFAULT_FORMAT if fmt is None and not as_json else fmt, as_json=as_json)
    logging.getLogger("kbatch.log.segment").addHandler(logging.NullHandler())
    topics = topic_list(topic)
    parts: "list[Partition]" = []
    for path in paths:
        parts += selected_partitions(path, topics, exclude=list(exclude_topic) or None,
                                     include_internal=include_internal)
    if partition is not None:
        parts = [p for p in parts if p.partition == partition]
    if not parts:
        raise UsageProblem(f"{', '.join(map(str, paths))}: no partition"
                           f"{'' if topics is None else ' of topic ' + ', '.join(topics)}"
                           f"{'' if partition is None else f' numbered {partition}'} there"
                           f"{'' if include_internal or topics else ' (internal topics need -t or --include-internal)'}")
    run = _Run(search, start, stop, read_committed, formatter, dest, err, mode, max_count)
    results: list[PartitionResult] = []
    with progress_bar(log_bytes([p.path for p in parts]), "grep", quiet) as advance:
        for part in parts:
            if run.full():
                break
            res = run.partition(part, advance)
            results.append(res)
            _report(res, mode, as_json, dest)
            if mode == "lines" and as_json and res.failed is not None:
                dest.write(_json({"topic": res.topic, "partition": res.partition, "error": res.failed}))
    if mode == "count":
        total = sum(r.matches for r in results)
        failed = sum(r.failed is not None or r.unopened for r in results)
        dest.write(_json({"total": total, "partitions": len(results), "failed": failed}) if as_json else
                   f"total: {total}{f' ({failed} partition(s) FAILED)' if failed else ''}\n".encode())
    dest.flush()
    if any(r.failed is not None for r in results):
        return EXIT_UNREADABLE
    if any(r.unopened for r in results):
        return EXIT_USAGE
    return EXIT_MATCH if run.total else EXIT_NO_MATCH


def _json(obj: dict[str, Any]) -> bytes:
    import json

    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _report(res: PartitionResult, mode: str, as_json: bool, dest: "_BytesOut") -> None:
    """A partition's --count line (or -l's), after it is read."""
    if mode == "count":
        bad = res.failed is not None or res.unopened
        if as_json:
            obj: dict[str, Any] = {"topic": res.topic, "partition": res.partition, "count": res.matches}
            if bad:
                obj["error"] = res.failed or "the partition directory could not be opened"
            dest.write(_json(obj))
        else:
            dest.write(f"{res.topic} [{res.partition}]: {res.matches}{' FAILED' if bad else ''}\n".encode())
    elif mode == "list" and res.matches:
        dest.write(_json({"topic": res.topic, "partition": res.partition, "path": res.path}) if as_json
                   else f"{res.path}\n".encode())


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    @app.command(help="Print the records whose key, value or header values hold PATTERN (a fixed string, or a "
                      "regular expression with -E), read as `kbatch cat` reads them (isolation level, offset and "
                      "time bounds through the indexes). Exit codes: 0 a match, 1 none, 2 usage error, 3 bytes that "
                      "could not be read.")
    def grep(pattern: Annotated[str, typer.Argument(help="What to look for: a fixed string (bytes as UTF-8), or a Python regular expression with -E.")],
             paths: Annotated[List[str], typer.Argument(help="Log directories or partition directories (local or a URI).")],
             regex: Annotated[bool, typer.Option("--regex", "-E", help="PATTERN is a regular expression (Python's re, over bytes).")] = False,
             fixed: Annotated[bool, typer.Option("--fixed-strings", "-F", help="PATTERN is a fixed string (the default).")] = False,
             ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i", help="ASCII letters match either case.")] = False,
             key: Annotated[bool, typer.Option("--key", help="Look in keys (with --value/--header: in any of them).")] = False,
             value: Annotated[bool, typer.Option("--value", help="Look in values.")] = False,
             headers: Annotated[bool, typer.Option("--headers", help="Look in every header's value.")] = False,
             header: Annotated[Optional[List[str]], typer.Option("--header", help="Look in the values of headers with this key (repeatable).")] = None,
             topic: Annotated[Optional[List[str]], typer.Option("--topic", "-t", help="Only this topic, or topics matching this glob (repeatable).")] = None,
             exclude_topic: Annotated[Optional[List[str]], typer.Option("--exclude-topic", help="Leave out topics matching this glob (repeatable).")] = None,
             partition: Annotated[Optional[int], typer.Option("--partition", "-p", help="Only this partition.")] = None,
             include_internal: Annotated[bool, typer.Option("--include-internal", help="Also internal topics (__consumer_offsets, _schemas, ...) that no --topic names.")] = False,
             from_: Annotated[Optional[str], typer.Option("--from", help="beginning | end | N | -N (N before the end) | TIME (ISO-8601 or @MS: the first record with timestamp >= TIME).")] = None,
             until: Annotated[Optional[str], typer.Option("--until", help="N (stop before offset N) | TIME (stop before the first record with timestamp >= TIME).")] = None,
             isolation_level: Annotated[Optional[str], typer.Option("--isolation-level", help="read_committed (default, as cat) or read_uncommitted.")] = None,
             fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="kcat format string (default '%t [%p] at offset %o: key %k: %s\\n').")] = None,
             as_json: Annotated[bool, typer.Option("--json", "-J", help="cat's JSON lines (kcat's envelope).")] = False,
             count: Annotated[bool, typer.Option("--count", "-c", help="Print the number of matches per partition, then the total.")] = False,
             list_partitions: Annotated[bool, typer.Option("--files-with-matches", "-l", help="Print the directories of the partitions with a match.")] = False,
             quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing: the exit code says.")] = False,
             max_count: Annotated[Optional[int], typer.Option("--max-count", "-m", help="Stop after this many matches (over all partitions).")] = None) -> None:
        from ._common import run

        del fixed  # the default; accepted for grep's habit
        run(cmd_grep, pattern, paths, regex=regex, ignore_case=ignore_case, key=key, value=value, headers=headers,
            header_names=list(header or []), topic=topic, exclude_topic=list(exclude_topic or []), partition=partition,
            include_internal=include_internal, from_=from_, until=until, isolation_level=isolation_level, fmt=fmt,
            as_json=as_json, count=count, list_partitions=list_partitions, quiet=quiet, max_count=max_count)
