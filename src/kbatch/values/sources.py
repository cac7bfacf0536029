"""Where writer schemas come from: one interface (`SchemaSource`), three backends.

- `TopicSchemas`: the registry's own storage, the `_schemas` topic, read offline from its partition
  directory (`TopicSchemas.open(path)`, through `kbatch.Log.open`) or from any (offset, key, value)
  records (`TopicSchemas.from_records`). The records are the ones Confluent's Schema Registry and
  Karapace write: JSON keys `{"keytype": "SCHEMA", "subject": ..., "version": ..., "magic": ...}`,
  JSON values `{"subject", "version", "id", "schema", "schemaType" (absent: AVRO), "references",
  "deleted"}`. A null value (a tombstone) is a hard delete of that subject version, `"deleted": true`
  a soft delete, and a `DELETE_SUBJECT` record soft-deletes the subject's versions up to the one it
  names. Other key types (CONFIG, MODE, NOOP, CLEAR_SUBJECT, CONTEXT, ...) say nothing about schemas
  and are passed over. A soft-deleted schema still decodes (a registry's `/schemas/ids/{id}` still
  serves it: records written with it are still in the topics); a hard-deleted one does not, unless
  another subject version still holds its id.
- `RegistrySchemas`: a Schema Registry's REST API (`GET /schemas/ids/{id}`, references through
  `GET /subjects/{subject}/versions/{version}`), each answer cached for the source's life.
- `DirectorySchemas`: a folder of schema files named by id: `<id>.avsc` (Avro), `<id>.json` (JSON
  Schema), `<id>.proto` (Protobuf text) or `<id>.desc` / `<id>.pb` (a serialized Protobuf
  FileDescriptorSet). A reference is a file of the folder, by its path relative to the folder
  (Protobuf imports and JSON Schema `$ref`s), or by `<subject>/<version>.<ext>` for a reference
  with a subject.

`open_schemas(spec)` picks the backend from a string: an http(s) URL, a partition directory (it
holds `.log` segments), else a schema folder.
"""
from __future__ import annotations

import base64
import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .errors import SchemaSourceError, UnknownSchemaError
from .limits import MAX_SCHEMA_JSON_DEPTH, JsonDepthError, json_loads


class SchemaSourceUnavailable(SchemaSourceError):
    """The source cannot answer at all (a registry that refuses connections, answers with something
    that is not the registry's JSON, or an HTTP error other than 404): no later lookup can succeed,
    so the run stops here instead of failing one record at a time. The source remembers it: later
    lookups raise it again without asking."""

if TYPE_CHECKING:
    from .._typing import PathLike

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
SCHEMA_TYPES = (AVRO, JSON, PROTOBUF)
#: schema file suffix -> schema type, for DirectorySchemas
SUFFIXES = {".avsc": AVRO, ".json": JSON, ".proto": PROTOBUF, ".desc": PROTOBUF, ".pb": PROTOBUF}


@dataclass(frozen=True)
class Reference:
    """A schema's reference to another: `name` is how the schema names it (a Protobuf import path,
    a JSON Schema `$ref` URL, an Avro full type name), `subject`/`version` where it is registered."""
    name: str
    subject: str | None = None
    version: int | None = None


@dataclass(frozen=True)
class RegisteredSchema:
    """One schema as a registry keeps it. `schema` is the text (Avro JSON, JSON Schema JSON,
    Protobuf .proto text); `descriptor_set` the bytes of a FileDescriptorSet when the schema came
    as one (a `.desc` file) instead of .proto text."""
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    subject: str | None = None
    version: int | None = None
    deleted: bool = False
    descriptor_set: bytes | None = field(default=None, repr=False)


class SchemaSource:
    """Writer schemas by id. Subclasses fill `_fetch` (and `_fetch_reference`, `_latest` where the
    backend knows subjects); answers are cached, and the source is safe to share between threads."""

    #: what the source is, for messages ("the _schemas topic at ...", "registry http://...")
    name = "schema source"

    def __init__(self) -> None:
        self._cache: dict[int, RegisteredSchema] = {}
        self._missing: set[int] = set()
        self._lock = threading.Lock()
        #: the failure that made the source unusable (raised again by every later lookup)
        self.failure: SchemaSourceUnavailable | None = None

    def get(self, schema_id: int) -> RegisteredSchema:
        """The schema registered under `schema_id`; `UnknownSchemaError` when there is none."""
        hit = self._cache.get(schema_id)
        if hit is not None:
            return hit
        if self.failure is not None:
            raise self._again()
        found = None if schema_id in self._missing else self._fetch(schema_id)
        if found is None:
            self._missing.add(schema_id)  # asked once: a registry is not asked again for each record
            raise UnknownSchemaError(f"no schema with id {schema_id} in {self.name}{self._why_unknown(schema_id)}",
                                     schema_id=schema_id)
        with self._lock:
            self._cache[schema_id] = found
        return found

    def _again(self) -> SchemaSourceUnavailable:
        assert self.failure is not None
        return SchemaSourceUnavailable(self.failure.detail)

    def reference(self, ref: Reference) -> RegisteredSchema:
        """The schema a reference names."""
        if self.failure is not None:
            raise self._again()
        found = self._fetch_reference(ref)
        if found is None:
            raise UnknownSchemaError(f"reference {ref.name!r} (subject {ref.subject!r} version {ref.version}) "
                                     f"is not in {self.name}")
        return found

    def latest(self, subject: str) -> RegisteredSchema | None:
        """The newest version of `subject` that is not deleted, or None (also for a source that has no
        subjects, a folder of schema files)."""
        if self.failure is not None:
            raise self._again()
        return self._latest(subject)

    def version(self, subject: str, version: int | None) -> RegisteredSchema | None:
        """Version `version` of `subject` (None: its newest live version), or None when the source
        does not hold it."""
        if version is None or version == -1:
            return self.latest(subject)
        if self.failure is not None:
            raise self._again()
        return self._fetch_reference(Reference(subject, subject, version))

    def resolve(self, schema: RegisteredSchema) -> list[tuple[Reference, RegisteredSchema]]:
        """Every schema `schema` references, directly or through others, each once, the deepest first
        (the order a parser that needs its dependencies defined first takes them)."""
        out: list[tuple[Reference, RegisteredSchema]] = []
        seen: set[tuple[str, str | None, int | None]] = set()

        def walk(s: RegisteredSchema, depth: int) -> None:
            if depth > 64:
                raise SchemaSourceError(f"schema references nest deeper than 64 (a cycle?) in {self.name}",
                                        schema_id=schema.id)
            for ref in s.references:
                k = (ref.name, ref.subject, ref.version)
                if k in seen:
                    continue
                seen.add(k)
                target = self.reference(ref)
                walk(target, depth + 1)
                out.append((ref, target))
        walk(schema, 0)
        return out

    # -- for subclasses
    def _fetch(self, schema_id: int) -> RegisteredSchema | None:
        raise NotImplementedError

    def _fetch_reference(self, ref: Reference) -> RegisteredSchema | None:
        return None

    def _latest(self, subject: str) -> RegisteredSchema | None:
        return None

    def _why_unknown(self, schema_id: int) -> str:
        return ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _references(raw: Any) -> tuple[Reference, ...]:
    refs = []
    for r in raw or ():
        if isinstance(r, dict) and isinstance(r.get("name"), str):
            v = r.get("version")
            refs.append(Reference(r["name"], r.get("subject"), int(v) if isinstance(v, int) else None))
    return tuple(refs)


def _schema_type(raw: Any) -> str:
    t = (raw or AVRO).upper() if isinstance(raw, str) or raw is None else raw
    if t not in SCHEMA_TYPES:
        raise ValueError(f"schemaType {raw!r} is none of {', '.join(SCHEMA_TYPES)}")
    return str(t)


# ------------------------------------------------------------------------------------ the _schemas topic
def context_of(subject: str) -> str:
    """The schema context of a (qualified) subject: `:.ctx:orders-value` is in `.ctx`, a plain
    subject in the default context `.` (Confluent's contexts: schema ids are per context)."""
    if subject.startswith(":.") and ":" in subject[2:]:
        ctx = subject[1:subject.index(":", 2)]
        return ctx if ctx != ".." else "."
    return "."


class TopicSchemas(SchemaSource):
    """The `_schemas` topic's records, replayed in offset order as a registry replays them at start.
    Ids are looked up in one schema context (`context`, the default one: `.`); a registry with
    Confluent's contexts keeps a separate id space in each."""

    def __init__(self, name: str = "the _schemas topic", *, context: str = ".") -> None:
        super().__init__()
        self.name = name
        self.context = context
        #: (subject, version) -> schema, the live state; hard deletes remove entries
        self.versions: dict[tuple[str, int], RegisteredSchema] = {}
        #: schema id -> offset of the tombstone that took its last subject version away
        self.hard_deleted: dict[int, int] = {}
        #: records that could not be read (offset and why); the others still count
        self.problems: list[str] = []
        self.records = 0
        #: SCHEMA records read (tombstones too): none in a topic of records means it is not `_schemas`
        self.schema_records = 0
        self._by_id: dict[int, RegisteredSchema] = {}

    @classmethod
    def open(cls, path: "PathLike", *, context: str = ".") -> "TopicSchemas":
        """The `_schemas` topic from its partition directory (e.g. `/var/kafka-logs/_schemas-0`),
        read with `kbatch.Log.open` (read-only: nothing on disk changes)."""
        from ..log.unified_log import Log

        log = Log.open(path)
        try:
            src = cls(f"the _schemas topic at {os.fspath(path)}", context=context)
            src.apply(_log_records(log))
            src.problems.extend(f"{os.fspath(path)}: {p}" for p in log.problems)
        finally:
            log.close()
        if src.schema_records == 0:  # a wrong directory: every lookup would say "unknown id", one record at a time
            why = f"; records that do not parse: {src.problems[0]}" if src.problems else ""
            raise SchemaSourceError(f"{os.fspath(path)}: 0 schema ids in {src.records:,} records: is this the "
                                    f"_schemas topic? (expected the records a Schema Registry writes, keys "
                                    f"{{\"keytype\": \"SCHEMA\", ...}}{why})")
        return src

    @classmethod
    def from_records(cls, records: Iterable[tuple[int, bytes | None, bytes | None]],
                     name: str = "the _schemas topic", *, context: str = ".") -> "TopicSchemas":
        """From (offset, key, value) in offset order: a consumer's records, a test's."""
        src = cls(name, context=context)
        src.apply(records)
        return src

    def apply(self, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> None:
        for offset, key, value in records:
            self.records += 1
            if key is None:
                self.problems.append(f"offset {offset}: a record without a key")
                continue
            try:  # nested past MAX_SCHEMA_JSON_DEPTH: a bad record (JsonDepthError), not a RecursionError
                k = json_loads(bytes(key), MAX_SCHEMA_JSON_DEPTH)
                v = None if value is None else json_loads(bytes(value), MAX_SCHEMA_JSON_DEPTH)
            except (ValueError, UnicodeDecodeError) as e:
                self.problems.append(f"offset {offset}: {e}" if isinstance(e, JsonDepthError) else
                                     f"offset {offset}: not JSON ({e})")
                continue
            if not isinstance(k, dict):
                self.problems.append(f"offset {offset}: the key is not a JSON object")
                continue
            kind = k.get("keytype")
            try:
                if kind == "SCHEMA":
                    self.schema_records += 1
                    self._schema(offset, k, v)
                elif kind == "DELETE_SUBJECT" and isinstance(v, dict):
                    self._delete_subject(v.get("subject", k.get("subject")), v.get("version"))
            except (KeyError, TypeError, ValueError) as e:
                self.problems.append(f"offset {offset}: a {kind} record that does not parse ({e!r})")
        self._by_id = {}
        for (subject, _), s in sorted(self.versions.items(), key=lambda kv: (kv[1].deleted, kv[0])):
            if context_of(subject) == self.context:
                self._by_id.setdefault(s.id, s)  # a live subject version first, else a soft-deleted one
        for sid in list(self.hard_deleted):
            if sid in self._by_id:
                del self.hard_deleted[sid]
        self._cache.clear()
        self._missing.clear()

    def _schema(self, offset: int, k: dict[str, Any], v: Any) -> None:
        subject, version = str(k["subject"]), int(k["version"])
        if v is None:  # tombstone: a hard delete
            gone = self.versions.pop((subject, version), None)
            if gone is not None and context_of(subject) == self.context:
                self.hard_deleted[gone.id] = offset
            return
        if not isinstance(v, dict):
            raise TypeError("the value is not a JSON object")
        s = RegisteredSchema(id=int(v["id"]), schema_type=_schema_type(v.get("schemaType")), schema=str(v["schema"]),
                             references=_references(v.get("references")), subject=str(v.get("subject", subject)),
                             version=int(v.get("version", version)), deleted=bool(v.get("deleted", False)))
        self.versions[(subject, version)] = s

    def _delete_subject(self, subject: Any, version: Any) -> None:
        for (s, ver), sch in list(self.versions.items()):
            if s == subject and (not isinstance(version, int) or ver <= version):
                self.versions[(s, ver)] = replace(sch, deleted=True)

    def subjects(self, include_deleted: bool = False) -> dict[str, list[int]]:
        """subject -> its versions, in order."""
        out: dict[str, list[int]] = {}
        for (s, ver), sch in sorted(self.versions.items()):
            if include_deleted or not sch.deleted:
                out.setdefault(s, []).append(ver)
        return out

    def _fetch(self, schema_id: int) -> RegisteredSchema | None:
        return self._by_id.get(schema_id)

    def _fetch_reference(self, ref: Reference) -> RegisteredSchema | None:
        if ref.subject is None:
            return None
        if ref.version is None or ref.version == -1:
            return self._latest(ref.subject)
        return self.versions.get((ref.subject, ref.version))

    def _latest(self, subject: str) -> RegisteredSchema | None:
        live = [(ver, s) for (sub, ver), s in self.versions.items() if sub == subject and not s.deleted]
        return max(live, key=lambda vs: vs[0])[1] if live else None

    def _why_unknown(self, schema_id: int) -> str:
        at = self.hard_deleted.get(schema_id)
        if at is not None:
            return f" (hard-deleted: the tombstone at offset {at} removed its last subject version)"
        return f" ({len(self._by_id)} schema ids in {self.records} records)"


def _registry_error(body: str) -> bool:
    """A registry's JSON error body: {"error_code": ..., "message": ...}."""
    try:
        found = json_loads(body, MAX_SCHEMA_JSON_DEPTH)
    except ValueError:
        return False
    return isinstance(found, dict) and "error_code" in found


def _log_records(log: Any) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    for batch in log.batches():
        if batch.is_control:
            continue
        for r in batch:
            yield (r.offset, None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value))


# ------------------------------------------------------------------------------------ a registry's REST API
class RegistrySchemas(SchemaSource):
    """A Schema Registry at `url` (Confluent's API; Karapace, Redpanda and Apicurio's compatibility
    API answer the same). Basic auth from the URL's user info (`https://user:secret@host`)."""

    def __init__(self, url: str, *, timeout: float = 30.0, headers: dict[str, str] | None = None) -> None:
        super().__init__()
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise SchemaSourceError(f"{url!r}: a registry URL starts with http:// or https://")
        self.headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        self.headers.update(headers or {})
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            secret = urllib.parse.unquote(parts.password or "")
            self.headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
            netloc = parts.hostname or ""
            if parts.port is not None:
                netloc += f":{parts.port}"
            parts = parts._replace(netloc=netloc)
        self.url = urllib.parse.urlunsplit(parts).rstrip("/")
        self.name = f"the registry at {self.url}"
        self.timeout = timeout
        self._refs: dict[tuple[str, str], RegisteredSchema | None] = {}
        #: HTTP requests made (the cache's effect is visible to tests)
        self.requests = 0

    def _get(self, path: str) -> Any:
        """The JSON answer to GET path; None for a 404 (the registry does not hold it). Anything
        else that is not the registry's JSON makes the source unavailable (see SchemaSourceUnavailable)."""
        if self.failure is not None:
            raise self._again()
        req = urllib.request.Request(self.url + path, headers=self.headers)
        self.requests += 1
        url = self.url + path
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read(1 << 24)
                kind = resp.headers.get("Content-Type", "no Content-Type")
        except urllib.error.HTTPError as e:
            body = e.read(300).decode("utf-8", "replace")
            if e.code == 404 and _registry_error(body):  # the registry's own "not found" (40401, 40402, 40403)
                return None
            what = "a 404 that is not the registry's JSON error" if e.code == 404 else f"HTTP {e.code}"
            raise self._fail(f"GET {url} answered {what}: {body.strip()[:200]!r} (expected a Schema Registry's "
                             f"JSON: is {self.url} its URL?)") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise self._fail(f"GET {url} failed: {reason} (is a Schema Registry running at {self.url}?)") from None
        try:
            return json_loads(raw, MAX_SCHEMA_JSON_DEPTH)  # a hostile answer: bounded, 'not JSON'
        except (ValueError, UnicodeDecodeError):
            text = raw[:120].decode("utf-8", "replace").strip()
            raise self._fail(f"GET {url} answered {kind}, not the registry's JSON: {text!r} (is {self.url} a Schema "
                             f"Registry's URL?)") from None

    def _fail(self, message: str) -> SchemaSourceUnavailable:
        self.failure = SchemaSourceUnavailable(f"{self.name}: {message}")
        return self.failure

    def _parse(self, body: Any, schema_id: int, what: str) -> RegisteredSchema:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise self._fail(f"GET {self.url}{what} answered {json.dumps(body)[:200]}, not a schema (expected "
                             f"a JSON object with a \"schema\" string: is {self.url} a Schema Registry's URL?)")
        sid = body.get("id", schema_id)
        return RegisteredSchema(id=sid if isinstance(sid, int) else schema_id, schema_type=_schema_type(body.get("schemaType")),
                                schema=body["schema"], references=_references(body.get("references")),
                                subject=body.get("subject"), version=body.get("version"))

    def _fetch(self, schema_id: int) -> RegisteredSchema | None:
        body = self._get(f"/schemas/ids/{int(schema_id)}")
        if body is None:
            return None
        return replace(self._parse(body, schema_id, f"/schemas/ids/{schema_id}"), id=schema_id)

    def _subject_version(self, subject: str, version: str) -> RegisteredSchema | None:
        k = (subject, version)
        if k not in self._refs:
            path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
            body = self._get(path)
            self._refs[k] = None if body is None else self._parse(body, -1, path)
        return self._refs[k]

    def _fetch_reference(self, ref: Reference) -> RegisteredSchema | None:
        if ref.subject is None:
            return None
        return self._subject_version(ref.subject, "latest" if ref.version in (None, -1) else str(ref.version))

    def _latest(self, subject: str) -> RegisteredSchema | None:
        return self._subject_version(subject, "latest")


# ------------------------------------------------------------------------------------ a folder of files
class DirectorySchemas(SchemaSource):
    """Schema files named by id in `path` (see the module's doc for the names)."""

    def __init__(self, path: "PathLike") -> None:
        super().__init__()
        self.path = os.fspath(path)
        if not os.path.isdir(self.path):
            raise SchemaSourceError(f"{self.path}: not a directory of schema files")
        self.name = f"the schema folder {self.path}"

    def ids(self) -> list[int]:
        out = set()
        for n in os.listdir(self.path):
            stem, ext = os.path.splitext(n)
            if ext in SUFFIXES and stem.isdigit():
                out.add(int(stem))
        return sorted(out)

    def _load(self, file: str, schema_id: int, references: tuple[Reference, ...] = ()) -> RegisteredSchema:
        ext = os.path.splitext(file)[1]
        kind = SUFFIXES[ext]
        try:
            with open(file, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise SchemaSourceError(f"{file}: {e}", schema_id=schema_id) from None
        if ext in (".desc", ".pb"):
            return RegisteredSchema(schema_id, kind, "", references, descriptor_set=raw)
        return RegisteredSchema(schema_id, kind, raw.decode("utf-8"), references)

    def _fetch(self, schema_id: int) -> RegisteredSchema | None:
        found = [os.path.join(self.path, f"{schema_id}{ext}") for ext in SUFFIXES]
        found = [f for f in found if os.path.isfile(f)]
        if not found:
            return None
        if len(found) > 1 and not all(f.endswith((".proto", ".desc", ".pb")) for f in found):
            raise SchemaSourceError(f"schema id {schema_id} has {len(found)} files in {self.path}: "
                                    f"{', '.join(os.path.basename(f) for f in found)}", schema_id=schema_id)
        s = self._load(found[0], schema_id)
        if s.schema_type == PROTOBUF and s.descriptor_set is None:
            s = replace(s, references=tuple(Reference(name) for name in _proto_imports(s.schema)
                                            if os.path.isfile(os.path.join(self.path, name))))
        return s

    def _fetch_reference(self, ref: Reference) -> RegisteredSchema | None:
        candidates = [ref.name]
        if ref.subject is not None and ref.version is not None:
            candidates += [os.path.join(ref.subject, f"{ref.version}{ext}") for ext in SUFFIXES]
        for rel in candidates:
            file = os.path.normpath(os.path.join(self.path, rel))
            if not file.startswith(os.path.abspath(self.path) + os.sep) and not file.startswith(self.path + os.sep):
                continue
            if os.path.isfile(file) and os.path.splitext(file)[1] in SUFFIXES:
                s = self._load(file, -1)
                if s.schema_type == PROTOBUF and s.descriptor_set is None:
                    s = replace(s, references=tuple(Reference(n) for n in _proto_imports(s.schema)
                                                    if os.path.isfile(os.path.join(self.path, n))))
                return s
        return None


def _proto_imports(text: str) -> list[str]:
    import re

    return re.findall(r'(?<![\w.])import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', text)


# ------------------------------------------------------------------------------------ picking one
def open_schemas(spec: "str | PathLike | SchemaSource") -> SchemaSource:
    """A schema source from what a user types: an http(s) URL (a registry), a partition directory
    of the `_schemas` topic (it holds `.log` segments), or a folder of schema files."""
    if isinstance(spec, SchemaSource):
        return spec
    text = os.fspath(spec)
    if text.startswith(("http://", "https://")):
        return RegistrySchemas(text)
    if not os.path.isdir(text):
        raise SchemaSourceError(f"{text}: not a registry URL (http://...), a _schemas partition directory or a "
                                f"folder of schema files")
    names = os.listdir(text)
    if any(n.endswith(".log") and n[:-4].isdigit() for n in names):
        return TopicSchemas.open(text)
    inner = sorted(n for n in names if n.startswith("_schemas-") and n[len("_schemas-"):].isdigit()
                   and os.path.isdir(os.path.join(text, n)))
    if inner:  # a broker's log directory: the topic is one of its partition directories
        raise SchemaSourceError(f"{text}: a log directory, not a _schemas partition directory or a folder of schema "
                                f"files: did you mean {os.path.join(text, inner[0])}?")
    folder = DirectorySchemas(text)
    if not folder.ids():
        raise SchemaSourceError(f"{text}: no schema files in it (expected <id>.avsc, <id>.json, <id>.proto, "
                                f"<id>.desc or <id>.pb, a _schemas partition directory, or a registry URL)")
    return folder


__all__ = ["SchemaSource", "RegisteredSchema", "Reference", "TopicSchemas", "RegistrySchemas", "DirectorySchemas",
           "SchemaSourceUnavailable", "open_schemas", "AVRO", "JSON", "PROTOBUF"]
