"""The errors of schema-aware decoding. Each names the record's offset (when known) and the schema
id, and is a `kbatch.KBatchError` and a `ValueError`."""
from __future__ import annotations

from ..errors import KBatchError


class SchemaError(KBatchError, ValueError):
    """A framed key or value that could not be decoded: attributes `offset` (the record's, or None)
    and `schema_id` (or None when the header could not be read)."""

    def __init__(self, message: str, *, offset: int | None = None, schema_id: int | None = None,
                 what: str = "value") -> None:
        self.offset = offset
        self.schema_id = schema_id
        self.what = what
        self.detail = message
        self.topic: str | None = None
        self.partition: int | None = None
        super().__init__(self._compose())

    def _compose(self) -> str:
        where = [self.what]
        if self.topic is not None:
            where.append(f"in {self.topic} [{-1 if self.partition is None else self.partition}]")
        if self.offset is not None:
            where.append(f"at offset {self.offset}")
        if self.schema_id is not None:
            where.append(f"(schema id {self.schema_id})")
        return f"{' '.join(where)}: {self.detail}"

    def located(self, *, offset: int | None = None, what: str | None = None, topic: str | None = None,
                partition: int | None = None) -> "SchemaError":
        """The same error, with the record's offset (and key/value, topic and partition) filled in
        where it was raised without them."""
        if offset is not None and self.offset is None:
            self.offset = offset
        if what is not None:
            self.what = what
        if topic is not None and self.topic is None:
            self.topic, self.partition = topic, partition
        self.reason = self._compose()
        self.args = (self._render(),)
        return self


class WrongMagicError(SchemaError):
    """The first byte is not Confluent's magic byte 0 (or the value is shorter than the 5-byte
    header): the data is not in the registry's wire format."""


class UnknownSchemaError(SchemaError, LookupError):
    """The schema id in the header is not in the schema source (never registered there, or
    hard-deleted)."""


class PayloadError(SchemaError):
    """The payload after the header does not decode with the schema its id names (or fails
    validation against it)."""


class PayloadLimitError(PayloadError):
    """A payload past one of the bounds every decoder keeps before it trusts the bytes (nesting
    depth, items that take no bytes, JSON nesting; kbatch.values.limits): refused before it is
    decoded, as a decompression bomb is."""


class SchemaSourceError(SchemaError):
    """A schema source that cannot be read: a registry that does not answer, a schema file or
    `_schemas` record that does not parse."""
