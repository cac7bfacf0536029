"""Which topics a reader takes from a log directory: the one rule for internal topics and topic
selection, used by `kbatch export`, `cat`, `stats`, `kbatch.read_topic`, `export_table` and the
Python Spark reader (the JVM reader's LogDirectory.java follows the same rule).

A broker's log directory holds the cluster's own topics beside the users' ones: `__consumer_offsets`,
`__transaction_state`, `__cluster_metadata`, `__remote_log_metadata`, `__share_group_state` (every
name Kafka gives its internal topics starts with two underscores) and the Schema Registry's
`_schemas`. As Kafka's consumers do with `exclude.internal.topics=true` (their default), a reader
given a directory and no topic list leaves them out, and so does a pattern; a topic named exactly is
always read ("it is always possible to explicitly subscribe to an internal topic"), and
`include_internal` takes them back everywhere.
"""
from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar


class _Named(Protocol):
    @property
    def topic(self) -> Any: ...

    @property
    def path(self) -> str: ...


P = TypeVar("P", bound=_Named)

#: the Schema Registry's topic (its default `kafkastore.topic`): internal to a cluster's users too
SCHEMAS_TOPIC = "_schemas"
#: glob characters: a topic name cannot hold them (Kafka's legal characters are [a-zA-Z0-9._-])
_GLOB = re.compile(r"[*?\[]")


def is_internal_topic(name: str) -> bool:
    """Kafka's internal topics (`__consumer_offsets`, `__transaction_state`, `__cluster_metadata`,
    any `__`-prefixed name) and the Schema Registry's `_schemas`."""
    return name.startswith("__") or name == SCHEMAS_TOPIC


def left_out(topic: str, *, named: bool, include_internal: bool) -> bool:
    """The rule every directory reader applies after its own topic filters: an internal topic is
    left out unless it was named exactly (`named`) or internal topics were asked for."""
    return is_internal_topic(topic) and not named and not include_internal


def is_pattern(spec: str) -> bool:
    """A topic argument with a glob character (`*`, `?`, `[`) is a pattern, else an exact name."""
    return bool(_GLOB.search(spec))


@dataclass(frozen=True)
class TopicSelection:
    """Which topics of a directory a command reads: `names` exactly (always, internal ones too),
    or matching one of `globs` (`orders-*`), never one matching an `exclude` glob. With neither
    names nor globs every topic is read. Internal topics only when named, or with
    `include_internal`."""

    names: frozenset[str] = frozenset()
    globs: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    include_internal: bool = False

    @classmethod
    def of(cls, topics: Iterable[str] | None = None, *, exclude: Iterable[str] | None = None,
           include_internal: bool = False) -> "TopicSelection":
        """From a command's `--topic` values (exact names, or globs) and `--exclude-topic` globs."""
        specs = list(topics or ())
        return cls(frozenset(t for t in specs if not is_pattern(t)), tuple(t for t in specs if is_pattern(t)),
                   tuple(exclude or ()), include_internal)

    @property
    def narrowed(self) -> bool:
        """True when topics were named or matched (not every topic of the directory)."""
        return bool(self.names or self.globs)

    def __call__(self, topic: str) -> bool:
        if any(fnmatch.fnmatchcase(topic, g) for g in self.exclude):
            return False
        named = topic in self.names
        if left_out(topic, named=named, include_internal=self.include_internal):
            return False
        return named or not self.narrowed or any(fnmatch.fnmatchcase(topic, g) for g in self.globs)


def select_partitions(parts: Iterable[P], root: str, selection: TopicSelection) -> list[P]:
    """The partitions (anything with `.topic` and `.path`, e.g. kbatch.log.layout.Partition) of a
    listing of `root` that `selection` takes; `root` itself as the one partition is read even when
    its topic is internal (the user named that directory)."""
    named_root = replace(selection, include_internal=True)

    def same(a: str, b: str) -> bool:
        return a.rstrip("/") == b.rstrip("/") if "://" in a or "://" in b else os.path.abspath(a) == os.path.abspath(b)
    return [p for p in parts if (p.topic is None and not selection.narrowed)
            or (p.topic is not None and (named_root if same(p.path, root) else selection)(p.topic))]


#: every topic but the internal ones (a directory read with no topic list)
ALL_BUT_INTERNAL = TopicSelection()

__all__ = ["is_internal_topic", "left_out", "is_pattern", "TopicSelection", "select_partitions", "ALL_BUT_INTERNAL", "SCHEMAS_TOPIC"]
