"""Findings: one model for what `verify`, `validate` and `audit` say about a log.

A Finding names a check (a dotted id such as "producer.sequence-gap"), a severity, where it is
(topic, partition, offset range, segment file, byte position) and what it is (one line of text,
and details a program can read). The JSON form (`as_json`) is the `findings` entries of
`kbatch audit --json` (docs/cli.md, schema version FINDINGS_SCHEMA_VERSION); verify and validate
print their own, older shapes from the same records.
"""
from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from typing import Any

#: the version of `kbatch audit --json`'s document; bumped only when a field changes meaning or goes
FINDINGS_SCHEMA_VERSION = 1


class Severity(enum.IntEnum):
    """How bad a finding is; `--fail-on LEVEL` makes the exit code 1 at or above LEVEL."""

    INFO = 0
    WARNING = 1
    ERROR = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"severity must be one of info, warning, error, not {text!r}") from None


@dataclass
class Finding:
    """One thing a check found. `first_offset`/`last_offset` bound the offsets it concerns (equal for
    one offset, None when no offset applies, e.g. an unreadable file); `segment` is the file it was
    found in (a .log, or an index file), `position` the byte position in it (None: the whole file)."""

    check: str
    severity: Severity
    message: str
    topic: str | None = None
    partition: int | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    segment: str | None = None
    position: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The finding as `kbatch audit --json` writes it (keys in the documented order)."""
        return {"check": self.check, "severity": self.severity.label, "topic": self.topic,
                "partition": self.partition, "first_offset": self.first_offset, "last_offset": self.last_offset,
                "segment": os.fspath(self.segment) if self.segment is not None else None,
                "position": self.position, "message": self.message, "details": self.details}

    def where(self) -> str:
        """`<segment> at byte <position> (offsets a..b)`, as much of it as is known."""
        parts = []
        if self.segment is not None:
            parts.append(os.fspath(self.segment))
        if self.position is not None:
            parts.append(f"at byte {self.position}")
        if self.first_offset is not None:
            if self.last_offset is None or self.last_offset == self.first_offset:
                parts.append(f"(offset {self.first_offset})")
            else:
                parts.append(f"(offsets {self.first_offset}..{self.last_offset})")
        if not parts and self.topic is not None:
            parts.append(f"{self.topic}-{self.partition}")
        return " ".join(parts)

    def text(self) -> str:
        """One line: `severity check where: message`."""
        where = self.where()
        return f"{self.severity.label:<7} {self.check:<34} {where + ': ' if where else ''}{self.message}"


def at_or_above(findings: list[Finding], level: Severity) -> list[Finding]:
    return [f for f in findings if f.severity >= level]


def counts(findings: list[Finding]) -> dict[str, int]:
    """{"info": n, "warning": n, "error": n}."""
    out = {s.label: 0 for s in Severity}
    for f in findings:
        out[f.severity.label] += 1
    return out


__all__ = ["Finding", "Severity", "FINDINGS_SCHEMA_VERSION", "at_or_above", "counts"]
