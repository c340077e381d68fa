"""The two checksums of Kafka's log formats.

CRC-32C (Castagnoli) guards V2 record batches and producer snapshots; CRC-32 (zlib's) guards
legacy V0/V1 messages. CRC-32C comes from the `crc32c` package, which uses the CPU's CRC
instruction (8-12 GB/s measured here); `crcmod`'s C extension (0.32 GB/s) is the fallback, and
we say so when it is in use, since without a compiler crcmod is pure Python (0.01 GB/s).
"""
from __future__ import annotations

import functools
import zlib


def crc32c(data) -> int:
    return _implementation()[0](data)


def __getattr__(name: str) -> str:
    if name == "CRC32C_IMPLEMENTATION":
        return _implementation()[1]
    raise AttributeError(name)


@functools.cache
def _implementation():
    """(function, description), chosen on first use: importing the `crc32c` package costs ~30-70 ms
    (its version lookup imports importlib.metadata and email), which runs the bulk kernels serve
    entirely never need."""
    try:
        import crc32c as module

        return module.crc32c, "crc32c (hardware)" if module.hardware_based else "crc32c (software)"
    except ImportError:  # pragma: no cover - exercised only where the wheel is unavailable
        import crcmod
        import crcmod.predefined

        function = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
        described = "crcmod (C extension)" if getattr(crcmod, "_usingExtension", False) else "crcmod (pure Python, slow)"
        return (lambda data: function(bytes(data))), described


crc32 = zlib.crc32
