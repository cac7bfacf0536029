"""`kbatch cat`: records of segment files printed as kcat's consumer mode prints them.

    kbatch cat s3://bucket/logs/ -t orders -o s@1714554000000 -o e@1714557600000 -f '%o %T %k %s\\n'

Options follow kcat (`kcat -C`): -t topic, -p partition, -o beginning|end|N|-N|s@T|e@T (-o may be
given twice: a start and an e@ stop), -c count, -f format with kcat's tokens (%s %S %R %k %K %T %h
%t %p %o %%, escapes \\n \\r \\t \\xHH \\NNN), -J JSON envelope, -D and -K delimiters, -Z to print
empty keys and values as NULL, -s key=/value= deserializers, -e, -u, -q, and
--isolation-level (or -X isolation.level=) read_uncommitted|read_committed.

Files are not a broker, so where kcat's answer comes from librdkafka, kbatch does what librdkafka
does with the log's own data (docs/cli.md lists each):
- s@T starts at the first record with timestamp >= T (ListOffsets through .timeindex/.index); a
  partition without one starts at its end. e@T stops before that same record: kcat stops at the
  first message whose timestamp >= T, which is exactly it.
- an absolute offset outside [log start, log end] starts at the end (auto.offset.reset=latest,
  librdkafka's default); -N starts N records before the end, at the log start at the earliest.
- records are read through kbatch.log.fetch, the read path every reader takes. The isolation
  level defaults to read_uncommitted, what Kafka's console consumer shows (librdkafka, and so
  kcat, default to read_committed: give --isolation-level read_committed for kcat's answer).
  Control records are never printed; under read_committed neither are records of aborted
  transactions (from .txnindex, else from the log's ABORT markers), and printing stops at the
  last stable offset (before the first transaction with no marker yet).
- bytes that cannot be read (a torn or corrupt middle segment, a bad length field) are named on
  stderr, with the offsets behind them, and make the exit code 1; only a partial batch at the
  very end of the last segment is ignored, as Kafka ignores it.
- partitions are printed one after another in (topic, partition) order (kcat interleaves them as
  fetches arrive); -c counts over all of them, as kcat's does.
- a record whose key or value a -s deserializer cannot format prints nothing and the next record
  follows (kcat writes its line up to the failing token, then stops the consume: docs/cli.md):
  stderr names it (the first SHOWN_ERRORS, then a count) and the exit code is 1; -J keeps its
  line with key_error / payload_error.
- a log directory's internal topics (__consumer_offsets, _schemas, ...: kbatch.log.topics) are
  left out unless -t names them or --include-internal; -t is repeatable and takes globs.
- JSON: "broker" is -1 (no broker served the record); keys and values go through -s as well
  (kcat applies only Avro there), and bytes that are not UTF-8 become U+FFFD (kcat writes them
  raw, which is not valid JSON).
"""

import base64
import io
import json
import logging
import re
import struct
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Literal, Protocol, Union

from .. import _wire as W
from ..errors import KBatchError, StorageError
from ._common import (EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, UsageProblem, log_bytes, progress_bar, run,
                      selected_partitions, topic_list)

if TYPE_CHECKING:
    from ..record.batch import Batch
    import typer

    from .._core import ByteView, Record
    from .._typing import PathLike
    from ..log.fetch import FetchResult, Lookup
    from ..log.layout import Partition
    from ..log.unified_log import Log

#: a piece of a kcat -f format: literal bytes, or a token letter (TOKENS)
FormatPart = Union[tuple[Literal["str"], bytes], tuple[Literal["tok"], str]]
#: -o's start: ("beginning",), ("end",), ("abs", N), ("tail", N) or ("time", T)
Start = Union[tuple[Literal["beginning", "end"]], tuple[Literal["abs", "tail", "time"], int]]


class _BytesOut(Protocol):
    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> object: ...

TOKENS = "sSRkKThtpo%"
_NULL = b"NULL"


# ------------------------------------------------------------------------------------ kcat's formats
def parse_escapes(text: str) -> bytes:
    """kcat's format-string escapes: \\n \\r \\t, \\xHH (hex), \\NNN (C strtoul base 0: octal with a
    leading 0, else decimal) and \\c for any other c."""
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            i += 1
            c = text[i]
            simple = {"t": 9, "n": 10, "r": 13}
            if c in simple:
                out.append(simple[c])
                i += 1
                continue
            if c == "x":
                m = re.match(r"[0-9A-Fa-f]+", text[i + 1:])
                if m:
                    out.append(int(m.group(0), 16) & 0xFF)
                    i += 1 + len(m.group(0))
                else:
                    out += b"x"
                    i += 1
                continue
            m = re.match(r"\d+", text[i:])
            if m:
                digits = m.group(0)
                out.append((int(digits, 8) if digits.startswith("0") and len(digits) > 1 and
                            all(d in "01234567" for d in digits) else int(digits)) & 0xFF)
                i += len(digits)
                continue
            out += c.encode("utf-8")
            i += 1
            continue
        out += c.encode("utf-8")
        i += 1
    return bytes(out)


def parse_delim(text: str) -> bytes:
    """kcat's -D/-K delimiters: \\n, \\t and \\xHH."""
    out = text.replace("\\n", "\n").replace("\\t", "\t")

    def hexchar(m: re.Match[str]) -> str:
        return chr(int(m.group(1), 16) & 0xFF)
    if re.search(r"\\x(?![0-9A-Fa-f])", out):
        raise UsageProblem(f"delimiter {text!r}: \\x expects a hex number")
    out = re.sub(r"\\x([0-9A-Fa-f]+)", hexchar, out)
    return out.encode("latin-1", errors="strict") if all(ord(ch) < 256 for ch in out) else out.encode("utf-8")


def parse_format(fmt: str) -> list[FormatPart]:
    """A kcat -f string -> [("str", bytes) | ("tok", letter)]."""
    parts: list[FormatPart] = []
    s = fmt
    while s:
        i = s.find("%")
        if i < 0:
            parts.append(("str", parse_escapes(s)))
            break
        if i > 0:
            parts.append(("str", parse_escapes(s[:i])))
        if i + 1 >= len(s):
            raise UsageProblem("format: empty formatter at the end (a lone %)")
        tok = s[i + 1]
        if tok not in TOKENS:
            raise UsageProblem(f"format: unsupported formatter %{tok} (kcat's tokens: "
                               f"{' '.join('%' + t for t in TOKENS)})")
        parts.append(("str", b"%") if tok == "%" else ("tok", tok))
        s = s[i + 2:]
    return parts


class Serdes:
    """A -s deserializer for keys or values: text (the bytes as they are), hex, base64, or a kcat
    pack-format string (<, >, b B h H i I q Q c s $ and spaces)."""

    NAMES = ("text", "hex", "base64")
    _PACK = {"b": "b", "B": "B", "h": "h", "H": "H", "i": "i", "I": "I", "q": "q", "Q": "Q"}

    def __init__(self, spec: str = "text") -> None:
        self.spec = spec
        if spec not in self.NAMES:
            bad = [c for c in spec if c not in " <>bBhHiIqQcs$"]
            if not spec or bad:
                raise UsageProblem(f"-s {spec!r}: a deserializer is text, hex, base64, a kcat pack-format "
                                   f"(<>bBhHiIqQcs$), avro, json, protobuf (with --schemas or -r), or "
                                   f"json-plain[:SCHEMA.json]")

    def __call__(self, data: bytes) -> bytes:
        if self.spec == "text":
            return data
        if self.spec == "hex":
            return data.hex().encode()
        if self.spec == "base64":
            return base64.b64encode(data)
        return self._unpack(data)

    def _unpack(self, data: bytes) -> bytes:
        out: list[str] = []
        pos, endian = 0, ">"
        for t in self.spec:
            if t == " ":
                out.append(" ")
            elif t in "<>":
                endian = t
            elif t in self._PACK:
                size = struct.calcsize(t)
                if pos + size > len(data):
                    raise ValueError(f"truncated, expected {size} bytes to unpack {t} but only {len(data) - pos} "
                                     f"bytes remaining")
                out.append(str(struct.unpack_from(endian + t, data, pos)[0]))
                pos += size
            elif t == "c":
                out.append(chr(data[pos]) if pos < len(data) else "")
                pos += 1
            elif t == "s":
                out.append(data[pos:].decode("utf-8", "replace"))
                pos = len(data)
            elif t == "$" and pos < len(data):
                raise ValueError(f"expected end-of-input, but {len(data) - pos} bytes remaining")
        return "".join(out).encode("utf-8")


#: format errors written in full on stderr; past these, only the closing count (a wrong schema
#: source can fail every record of a topic)
SHOWN_ERRORS = 20


class Formatter:
    """One record -> bytes, as kcat's fmt_msg_output_str / fmt_msg_output_json write it; a record
    whose key or value cannot be formatted gives no bytes at all (kcat writes its line up to the
    failing token and stops): its error goes to stderr (the first SHOWN_ERRORS in full, then a
    count: `close()`) and the exit code is 1. In -J's envelope such a record keeps its line, with
    `key_error` / `payload_error` in place of the field."""

    def __init__(self, fmt: str | None, *, as_json: bool = False, delim: bytes = b"\n", key_delim: bytes | None = None,
                 null: bool = False, key_serdes: Serdes | None = None, value_serdes: Serdes | None = None) -> None:
        self.as_json = as_json
        self.delim = delim
        self.null = null
        self.key_serdes = key_serdes or Serdes()
        self.value_serdes = value_serdes or Serdes()
        if fmt is None:
            fmt = "%s" if key_delim is None else "%k" + key_delim.decode("latin-1") + "%s"
            self.parts = parse_format(fmt) + [("str", delim)]
        else:
            self.parts = parse_format(fmt)
        self.errors = 0
        self._failed = False
        self._err: IO[str] | None = None

    def _error(self, err: IO[str] | None, where: str, what: str, e: ValueError) -> None:
        self.errors += 1
        self._failed = True
        if err is not None and self.errors <= SHOWN_ERRORS:
            from ..values.errors import SchemaError

            # a schema decoder's error already says key/value (and the schema id)
            said = str(e) if isinstance(e, SchemaError) else f"{what}: {e}"
            fate = f"(its line has {'payload' if what == 'value' else 'key'}_error)" if self.as_json else "(not printed)"
            err.write(f"% ERROR: Failed to format message in {where}: {said} {fate}\n")

    def close(self, err: IO[str]) -> None:
        """The closing count of records not printed (none: nothing)."""
        if self.errors:
            more = f"; the first {SHOWN_ERRORS} are above" if self.errors > SHOWN_ERRORS else ""
            fate = "printed with key_error/payload_error" if self.as_json else "not printed"
            err.write(f"% ERROR: {self.errors} record(s) could not be formatted and were {fate}{more}\n")

    def _blob(self, data: "ByteView | None", serdes: Serdes, what: str, where: str, err: IO[str]) -> bytes:
        if data is None or len(data) == 0:  # kcat: an empty and a NULL key print alike
            return _NULL if self.null else b""
        try:
            return serdes(bytes(data))
        except ValueError as e:
            self._error(err, where, what, e)
            return b""

    def format(self, topic: str, partition: int, rec: "Record", tstype: str | None, err: IO[str]) -> bytes:
        self._failed = False
        if self.as_json:
            self._err = err  # _json's errors go there too (cli/_schemas.py wraps _json with 4 arguments)
            return self._json(topic, partition, rec, tstype) + self.delim
        where = f"{topic} [{partition}] at offset {rec.offset}"
        out: list[bytes] = []
        for part in self.parts:
            if part[0] == "str":
                out.append(part[1])
                continue
            v = part[1]
            if v == "s":
                out.append(self._blob(rec.value, self.value_serdes, "value", where, err))
            elif v == "k":
                out.append(self._blob(rec.key, self.key_serdes, "key", where, err))
            elif v == "S":
                out.append(str(-1 if rec.value is None else len(rec.value)).encode())
            elif v == "K":
                out.append(str(-1 if rec.key is None else len(rec.key)).encode())
            elif v == "R":
                out.append(struct.pack(">i", -1 if rec.value is None else len(rec.value)))
            elif v == "T":
                out.append(str(-1 if rec.timestamp is None else rec.timestamp).encode())
            elif v == "h":
                out.append(b",".join(k.encode("utf-8") + b"=" + (_NULL if hv is None else bytes(hv))
                                     for k, hv in rec.headers))
            elif v == "t":
                out.append(topic.encode("utf-8"))
            elif v == "p":
                out.append(str(partition).encode())
            elif v == "o":
                out.append(str(rec.offset).encode())
        return b"" if self._failed else b"".join(out)

    def _text(self, data: "ByteView | None", serdes: Serdes) -> str | None:
        if data is None:
            return None
        raw = serdes(bytes(data))
        return raw.decode("utf-8", "replace")

    def _json(self, topic: str, partition: int, rec: "Record", tstype: str | None) -> bytes:
        obj: dict[str, Any] = {"topic": topic, "partition": partition, "offset": rec.offset}
        if rec.timestamp is not None and tstype is not None:
            obj["tstype"] = tstype
            obj["ts"] = rec.timestamp
        obj["broker"] = -1
        if rec.headers:
            flat: list[str | None] = []
            for k, hv in rec.headers:
                flat += [k, None if hv is None else bytes(hv).decode("utf-8", "replace")]
            obj["headers"] = flat
        where = f"{topic} [{partition}] at offset {rec.offset}"
        for name, data, serdes, what in (("key", rec.key, self.key_serdes, "key"),
                                         ("payload", rec.value, self.value_serdes, "value")):
            try:
                obj[name] = self._text(data, serdes)
            except ValueError as e:
                self._error(self._err, where, what, e)
                obj[name] = None
                obj[f"{name}_error"] = str(e)
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# ------------------------------------------------------------------------------------ offsets
def parse_offsets(specs: Iterable[str] | None) -> tuple[Start, int | None]:
    """-o values -> (start, stop_ts): start is ("beginning",), ("end",), ("abs", N), ("tail", N)
    or ("time", T); stop_ts an e@ timestamp or None."""
    start: Start = ("beginning",)
    stop: int | None = None
    for spec in specs or ():
        s = spec.strip()
        if s.startswith("e@"):
            stop = _ms(s[2:], spec)
        elif s.startswith("s@"):
            start = ("time", _ms(s[2:], spec))
        elif s == "beginning":
            start = ("beginning",)
        elif s == "end":
            start = ("end",)
        elif s == "stored":
            raise UsageProblem("-o stored: files have no committed offsets (kcat reads them from a consumer group)")
        elif re.fullmatch(r"[+-]?\d+", s):
            v = int(s)
            start = ("tail", -v) if v < 0 else ("abs", v)
        else:
            raise UsageProblem(f"-o {spec!r}: expected beginning, end, an offset, -N (N before the end), s@TIME or "
                               f"e@TIME")
    return start, stop


def _ms(text: str, spec: str) -> int:
    from ._common import parse_time

    try:
        return parse_time(text)
    except UsageProblem:
        raise UsageProblem(f"-o {spec!r}: the time is epoch milliseconds (kcat) or ISO-8601") from None


def start_offset(log: "Log", start: Start, err: IO[str], name: str, lookups: "list[Lookup] | None" = None) -> int:
    """Where -o's start is in `log`; an s@T lookup is added to `lookups` (its answer's verdict)."""
    lo, hi = log.beginning_offset(), log.end_offset()
    if start[0] == "beginning":
        return lo
    if start[0] == "end":
        return hi
    if start[0] == "tail":
        return max(lo, hi - start[1])
    if start[0] == "time":
        hit = log.offset_for(start[1])
        if lookups is not None:
            lookups.append((f"s@{start[1]}", start[1], hit))
        return hi if hit is None else hit.offset
    v = start[1]
    if v < lo or v > hi:
        err.write(f"% {name}: offset {v} is out of range [{lo}, {hi}]: starting at the end "
                  f"(auto.offset.reset=latest, librdkafka's default)\n")
        return hi
    return v


def _tstype(batch: "Batch") -> str | None:
    if batch.magic == 0:
        return None
    return "logappend" if batch.timestamp_type == W.TimestampType.LOG_APPEND_TIME else "create"


def records_from(log: "Log", offset: int, stop: int | None, read_committed: bool) -> "FetchResult":
    """The read of `log` from `offset` to `stop` (exclusive) through kbatch.log.fetch, the read path
    every reader takes: `.records()` gives (batch, record) in offset order, control batches and
    (read_committed) aborted transactions left out, up to the last stable offset; bytes it cannot
    read raise UnreadableDataError (a partial batch at the end of the active segment excepted)."""
    from ..log.fetch import IsolationLevel, read_log

    return read_log(log, offset, stop, isolation=IsolationLevel.READ_COMMITTED if read_committed
                    else IsolationLevel.READ_UNCOMMITTED)


# ------------------------------------------------------------------------------------ the command
class _TextOut:
    """Bytes onto a text stream that has no binary buffer (a StringIO): decoded as UTF-8, bytes
    that are not UTF-8 kept as surrogate escapes."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, data: bytes) -> None:
        self.stream.write(data.decode("utf-8", "surrogateescape"))

    def flush(self) -> None:
        self.stream.flush()


def _binary(stream: IO[Any]) -> _BytesOut:
    """Where record bytes go: a binary stream as it is, a text stream's buffer, or the text stream."""
    if isinstance(stream, io.TextIOBase) or hasattr(stream, "encoding"):
        buf: BinaryIO | None = getattr(stream, "buffer", None)
        return buf if buf is not None else _TextOut(stream)
    return stream


def cmd_cat(path: "PathLike", *, topic: str | Sequence[str] | None = None, partition: int | None = None,
            offsets: Sequence[str] = (), include_internal: bool = False,
            count: int | None = None, fmt: str | None = None, as_json: bool = False, delim: str = "\\n",
            key_delim: str | None = None, null: bool = False, serdes: Sequence[str] = (), exit_at_end: bool = True,
            unbuffered: bool = False, quiet: bool = False, properties: Sequence[str] = (),
            isolation_level: str | None = None, out: IO[str] | BinaryIO | None = None,
            err: IO[str] | None = None, schemas: str | None = None, registry: str | None = None) -> int:

    dest = _binary(out if out is not None else sys.stdout)
    err = err if err is not None else sys.stderr
    start, stop_ts = parse_offsets(offsets)
    read_committed = True  # librdkafka's default, and so kcat's (-X isolation.level=read_uncommitted for all)
    for prop in properties or ():
        k, _, v = prop.partition("=")
        if k.strip() == "isolation.level" and v.strip() in ("read_committed", "read_uncommitted"):
            read_committed = v.strip() == "read_committed"
        else:
            raise UsageProblem(f"-X {prop!r}: files take only isolation.level=read_committed|read_uncommitted")
    if isolation_level is not None:
        if isolation_level not in ("read_committed", "read_uncommitted"):
            raise UsageProblem(f"--isolation-level {isolation_level!r}: expected read_uncommitted or read_committed")
        read_committed = isolation_level == "read_committed"
    from ._schemas import cat_serdes  # -s key=/value= avro|json|protobuf, with --schemas / -r

    serdes, with_schemas = cat_serdes(serdes or (), schemas, registry)
    key_s, value_s = Serdes(), Serdes()
    for spec in serdes or ():
        field, eq, what = spec.partition("=")
        if not eq:
            key_s = value_s = Serdes(spec)
        elif field == "key":
            key_s = Serdes(what)
        elif field == "value":
            value_s = Serdes(what)
        else:
            raise UsageProblem(f"-s {spec!r}: expected key=<serdes>, value=<serdes> or <serdes>")
    if count is not None and count < 0:
        raise UsageProblem("-c must be >= 0")
    formatter = Formatter(fmt, as_json=as_json, delim=parse_delim(delim),
                          key_delim=None if key_delim is None else parse_delim(key_delim), null=null,
                          key_serdes=key_s, value_serdes=value_s)
    formatter = with_schemas(formatter)
    logging.getLogger("kbatch.log.segment").addHandler(logging.NullHandler())
    topics = topic_list(topic)
    parts = selected_partitions(path, topics, include_internal=include_internal)
    if partition is not None:
        parts = [p for p in parts if p.partition == partition]
    if not parts:
        raise UsageProblem(f"{path}: no partition{'' if topics is None else ' of topic ' + ', '.join(topics)}"
                           f"{'' if partition is None else f' numbered {partition}'} there"
                           f"{'' if include_internal or topics else ' (internal topics need -t or --include-internal)'}")
    code = EXIT_OK
    printed = 0
    from ._schemas import SourceStopped

    try:
        with progress_bar(log_bytes([p.path for p in parts]), "cat", quiet) as advance:
            code, printed = _cat_parts(parts, start, stop_ts, count, read_committed, unbuffered, quiet, formatter,
                                       dest, err, advance)
    except SourceStopped as e:  # a schema source that cannot answer: the first failure ends the run
        dest.flush()
        err.write(f"kbatch: {e} (stopped)\n")
        return EXIT_PROBLEMS
    dest.flush()
    formatter.close(err)
    if formatter.errors:
        code = max(code, EXIT_PROBLEMS)
    return code


#: records read ahead of printing when typed values are decoded as columns (cli/_schemas.py)
AHEAD = 2048


def _ahead(items: "Iterable[tuple[Batch, Record]]", prepare: Callable[[list[Any]], None], n: int
           ) -> "Iterable[tuple[Batch, Record]]":
    """The (batch, record) pairs as they come, read `n` at a time, each run's records handed to
    prepare() before the first is printed; a read error comes after the records read before it."""
    it = iter(items)
    while True:
        chunk: list[tuple[Batch, Record]] = []
        error: Exception | None = None
        try:
            for item in it:
                chunk.append(item)
                if len(chunk) >= n:
                    break
        except Exception as e:  # noqa: BLE001 (raised again below, after the records before it)
            error = e
        if chunk:
            prepare([r for _, r in chunk])
            yield from chunk
        if error is not None:
            raise error
        if len(chunk) < n:
            return


def _cat_parts(parts: "list[Partition]", start: Start, stop_ts: int | None, count: int | None, read_committed: bool,
               unbuffered: bool, quiet: bool, formatter: "Formatter", dest: _BytesOut, err: IO[str],
               advance: Callable[[int], object]) -> tuple[int, int]:
    """Print the partitions' records one partition after another; (exit code, records printed)."""
    from ..log.unified_log import Log

    from ..log.fetch import damage_verdict

    code = EXIT_OK
    printed = 0
    for n, part in enumerate(parts):
        if count is not None and printed >= count:
            break
        t = part.topic if part.topic is not None else ""
        p = part.partition if part.partition is not None else -1
        name = f"{t} [{p}]"
        try:
            log = Log.open(part.path)
        except StorageError as e:
            err.write(f"kbatch: {part.path}: {e}\n")
            code = max(code, EXIT_USAGE)
            continue
        except KBatchError as e:
            err.write(f"kbatch: {part.path}: {e}\n")
            code = max(code, EXIT_PROBLEMS)
            continue
        last: int | None = None
        stop: int | None = None
        fetch: FetchResult | None = None
        failed = False
        lookups: list[Lookup] = []
        try:
            first = start_offset(log, start, err, name, lookups)
            if stop_ts is not None:
                hit = log.offset_for(stop_ts)
                lookups.append((f"e@{stop_ts}", stop_ts, hit))
                stop = None if hit is None else hit.offset
            fetch = records_from(log, first, stop, read_committed)
            seen: Batch | None = None
            records: Iterable[tuple[Batch, Record]] = fetch.records()
            prepare = getattr(formatter, "prepare", None)  # typed -s: values decoded a run at a time
            if prepare is not None:
                records = _ahead(records, prepare, AHEAD if count is None else max(1, min(AHEAD, count - printed)))
            for b, r in records:
                if b is not seen:  # the bar moves by the bytes of the batches read
                    advance(b.size_in_bytes)
                    seen = b
                dest.write(formatter.format(t, p, r, _tstype(b), err))
                if unbuffered:
                    dest.flush()
                last = r.offset
                printed += 1
                if count is not None and printed >= count:
                    break
        except KBatchError as e:
            err.write(f"kbatch: {part.path}: {e}\n")
            code = max(code, EXIT_USAGE if isinstance(e, StorageError) else EXIT_PROBLEMS)
            failed = True  # the partition was not read to its end
        finally:
            # the one rule for what the damage met means to this answer (kbatch.log.fetch.damage_verdict)
            problems, notes = fetch.verdict(lookups) if fetch is not None else damage_verdict(log, lookups)
            for problem in problems + notes:
                err.write(f"kbatch: {problem}\n")
            if problems:
                code = max(code, EXIT_PROBLEMS)
            if not quiet and not failed and (count is None or printed < count):
                end = fetch.upper_offset if fetch is not None else log.end_offset()
                at = end if stop is None or last is None else last + 1
                tail = ": exiting" if n == len(parts) - 1 else ""
                err.write(f"% Reached {'stop timestamp' if stop_ts is not None and stop is not None else 'end'} "
                          f"of topic {name} at offset {at}{tail}\n")
            log.close()
    return code, printed


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    @app.command(help="Print records as kcat's consumer mode does (kcat -C): offsets by number, from the end "
                      "(-N) or by time (s@T / e@T through the time index), kcat's -f tokens %s %S %R %k %K %T %h "
                      "%t %p %o, -J JSON. PATH: a partition or log directory, local or s3:// gs:// hdfs://.")
    def cat(path: Annotated[str, typer.Argument(help="Partition directory or log directory (local or a URI).")],
            topic: Annotated[Optional[List[str]], typer.Option("--topic", "-t", help="Only this topic, or topics matching this glob (repeatable).")] = None,
            partition: Annotated[Optional[int], typer.Option("--partition", "-p", help="Only this partition.")] = None,
            offset: Annotated[Optional[List[str]], typer.Option("--offset", "-o", help="beginning | end | N | -N | s@TIME | e@TIME (repeatable: a start and an e@ stop).")] = None,
            count: Annotated[Optional[int], typer.Option("--count", "-c", help="Exit after this many records.")] = None,
            fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="kcat format string, e.g. '%t [%p] %o: %k %s\\n'.")] = None,
            as_json: Annotated[bool, typer.Option("--json", "-J", help="kcat's JSON envelope, one object per line.")] = False,
            delim: Annotated[str, typer.Option("-D", help="Delimiter after each record (default \\n).")] = "\\n",
            key_delim: Annotated[Optional[str], typer.Option("-K", help="Print keys, then this delimiter, then values.")] = None,
            null: Annotated[bool, typer.Option("-Z", help="Print NULL for empty and null keys and values.")] = False,
            serdes: Annotated[Optional[List[str]], typer.Option("-s", help="key=S / value=S / S: text, hex, base64, a kcat pack-format (e.g. '>i'), avro, json, protobuf (Schema Registry framing, with --schemas or -r), or json-plain[:SCHEMA.json] (unframed JSON).")] = None,
            schemas: Annotated[Optional[str], typer.Option("--schemas", help="Where -s avro/json/protobuf find schemas: a _schemas partition directory, a registry URL or a folder of <id>.avsc/.json/.proto files.")] = None,
            registry: Annotated[Optional[str], typer.Option("-r", help="A Schema Registry URL (kcat's option; the same as --schemas URL).")] = None,
            exit_at_end: Annotated[bool, typer.Option("-e", help="Exit at the end (always: files end).")] = False,
            unbuffered: Annotated[bool, typer.Option("-u", help="Flush after each record.")] = False,
            quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No 'Reached end' lines on stderr.")] = False,
            include_internal: Annotated[bool, typer.Option("--include-internal", help="Also __consumer_offsets, __transaction_state, __cluster_metadata, _schemas and other __ topics that no --topic names (left out by default, as Kafka's exclude.internal.topics).")] = False,
            prop: Annotated[Optional[List[str]], typer.Option("-X", help="isolation.level=read_committed (default, as kcat) or read_uncommitted.")] = None,
            isolation_level: Annotated[Optional[str], typer.Option("--isolation-level", help="read_committed (default, as kcat: records of aborted transactions left out, stop at the last stable offset) or read_uncommitted (everything, as Kafka's console consumer).")] = None) -> None:
        run(cmd_cat, path, topic=topic, partition=partition, include_internal=include_internal, offsets=list(offset or []), count=count, fmt=fmt,
            as_json=as_json, delim=delim, key_delim=key_delim, null=null, serdes=list(serdes or []),
            exit_at_end=exit_at_end, unbuffered=unbuffered, quiet=quiet, properties=list(prop or []), schemas=schemas,
            registry=registry, isolation_level=isolation_level)
