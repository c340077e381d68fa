"""Decoders for the payloads of Kafka's internal topics.

A decoder turns a record's key and value bytes into JSON-ready objects (`key_decoded`,
`value_decoded` in JSON Lines) and into the text `kafka-dump-log.sh` prints for them with its
matching decoder option. Each decoder lives in its own module and registers itself here; the
topic a partition directory belongs to chooses the decoder unless the user names one.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Callable

from ..errors import CorruptDataError


class PayloadError(CorruptDataError, ValueError):
    """A key or value that its decoder cannot read (the message says what and where). A
    CorruptDataError like every error the library raises on bad data; a ValueError as before.
    `kafka_message`, where set, is what Kafka's decoder says instead (kafka-dump-log prints it after
    "Error at offset N, skipping."); `kafka_throws`, what kafka-dump-log throws with instead of
    printing a line (it stops there; `dump` reports it as an error and goes on)."""

    def __init__(self, message: str, *, kafka_message: str | None = None, kafka_throws: str | None = None,
                 **where):
        super().__init__(message, **where)
        self.kafka_message = kafka_message
        self.kafka_throws = kafka_throws


@dataclass(frozen=True, slots=True)
class DecodedPayload:
    key: object | None
    """JSON-ready key, or None when the record has no key."""
    value: object | None
    """JSON-ready value; None for a null value (a tombstone)."""
    key_text: str | None
    """The key as kafka-dump-log prints it (`key: ...`), or None to print nothing."""
    value_text: str | None
    """The value as kafka-dump-log prints it (`payload: ...`), or None to print nothing."""
    warning: str | None = None
    """Set when part of the payload is of an unknown type or version and was kept raw."""
    kafka_throws: str | None = None
    """Set when kafka-dump-log throws on this record (after its texts, if any): why."""


DecodeFn = Callable[..., DecodedPayload]
"""decode(key, value, offset=None): `offset` only completes the messages Kafka prints for records
it skips ("Unknown record type 9 at offset 5, skipping.")."""


ValueUnreadableFn = Callable[[bool, str, int], "DecodedPayload | None"]
"""value_unreadable(has_key, message, offset): what kafka-dump-log's parser prints for a record whose
value its reader throws on with `message` (a V0/V1 value that runs past its message); None where
the parser does not catch it (the tool throws)."""


VersionKnownFn = Callable[[bytes | None, bytes | None], bool]
"""value_version_known(key, value): see `PayloadDecoder.value_version_known`."""


@dataclass(frozen=True, slots=True)
class PayloadDecoder:
    name: str
    topics: tuple[str, ...]
    decode: DecodeFn
    description: str
    value_unreadable: ValueUnreadableFn | None = None
    value_version_known: VersionKnownFn | None = None
    """From a record's version fields alone: False only where `decode` may mark its value with
    `read_as_version` (a version newer than any known), so that a search for those decodes only
    these (decoding every record of a big `__consumer_offsets` took minutes). It reads no more than
    whether the key and value are null and their first 2 and 3 bytes (`versions.bulk_signatures`):
    given those prefixes of a record it answers as for the whole record, and the search asks it
    once per distinct pair."""


def value_error_payload(text: str, message: str) -> DecodedPayload:
    """`payload: <text>`, as the parsers that read only the value print what they caught."""
    return DecodedPayload(None, None, None, text, warning=f"the value cannot be read: {message}")


_MODULES = ("consumer_offsets", "share_group_state", "transaction_state", "cluster_metadata",
            "remote_log_metadata")
_REGISTRY: dict[str, PayloadDecoder] = {}


def register(decoder: PayloadDecoder) -> PayloadDecoder:
    _REGISTRY[decoder.name] = decoder
    return decoder


@functools.cache
def _load() -> None:
    """Import every decoder module once. Not "when the registry is empty": a module imported on
    its own (by a test, say) registers only itself."""
    for module in _MODULES:
        importlib.import_module(f"{__name__}.{module}")


def decoders() -> dict[str, PayloadDecoder]:
    _load()
    return dict(_REGISTRY)


def decoder_for_topic(topic: str) -> PayloadDecoder | None:
    for decoder in decoders().values():
        if topic in decoder.topics:
            return decoder
    return None
