"""The two checksums of Kafka's log formats.

CRC-32C (Castagnoli) guards V2 record batches and producer snapshots; CRC-32 (zlib's) guards
legacy V0/V1 messages. CRC-32C comes from the `crc32c` package, which uses the CPU's CRC
instruction (8-12 GB/s measured here); `crcmod`'s C extension (0.32 GB/s) is the fallback, and
we say so when it is in use, since without a compiler crcmod is pure Python (0.01 GB/s).
"""
from __future__ import annotations

import zlib

try:
    import crc32c as _crc32c_module

    crc32c = _crc32c_module.crc32c
    CRC32C_IMPLEMENTATION = "crc32c (hardware)" if _crc32c_module.hardware_based else "crc32c (software)"
except ImportError:  # pragma: no cover - exercised only where the wheel is unavailable
    import crcmod.predefined

    _crcmod_fn = crcmod.predefined.mkPredefinedCrcFun("crc-32c")

    def crc32c(data) -> int:
        return _crcmod_fn(bytes(data))

    CRC32C_IMPLEMENTATION = "crcmod (C extension)" if getattr(crcmod, "_usingExtension", False) else "crcmod (pure Python, slow)"

crc32 = zlib.crc32
