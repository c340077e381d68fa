"""Kafka's compression codecs, by attribute id (CompressionType: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).

Each codec is one module exposing `decompress(data, limit, magic) -> bytes` and, for building
fixtures, `compress(data, magic) -> bytes` in the form Java Kafka writes. Decompression is
bounded by `limit` bytes of output: a decompression bomb ends in a `DecompressionError`, not in an
out-of-memory kill.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import DecompressionError

NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
IDS = {name: codec_id for codec_id, name in NAMES.items()}

DEFAULT_LIMIT = 128 * 1024 * 1024
"""Largest decompressed batch we accept by default. Kafka's own limit is message.max.bytes of
*compressed* data (1 MiB by default), so real batches are far smaller than this."""

_modules: dict[int, ModuleType] = {}


def name_of(codec_id: int) -> str:
    return NAMES.get(codec_id, f"unknown({codec_id})")


def _module(codec_id: int) -> ModuleType:
    module = _modules.get(codec_id)
    if module is None:
        if codec_id not in NAMES or codec_id == 0:
            raise DecompressionError(f"unknown compression type id {codec_id}", expected="0-4", actual=codec_id)
        module = importlib.import_module(f"{__name__}.{NAMES[codec_id]}_codec")
        _modules[codec_id] = module
    return module


def decompress(codec_id: int, data: bytes, *, magic: int = 2, limit: int = DEFAULT_LIMIT) -> bytes:
    if codec_id == 0:
        return bytes(data)
    try:
        return _module(codec_id).decompress(data, limit, magic)
    except DecompressionError:
        raise
    except Exception as exc:  # each library has its own error types; all mean "corrupt payload"
        raise DecompressionError(f"{NAMES[codec_id]} payload does not decompress: {exc}") from None


def compress(codec_id: int, data: bytes, *, magic: int = 2) -> bytes:
    if codec_id == 0:
        return bytes(data)
    return _module(codec_id).compress(data, magic)


def too_large(codec: str, limit: int) -> DecompressionError:
    return DecompressionError(
        f"{codec} payload decompresses to more than the limit of {limit} bytes "
        "(a decompression bomb, or raise --max-decompressed)",
        expected=f"<= {limit} bytes",
        actual="more",
    )
