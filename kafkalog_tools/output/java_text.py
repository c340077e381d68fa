"""Bytes to text exactly as Java's `new String(bytes, UTF_8)` does it (JDK 17, String.decodeUTF8).

Kafka's tools print keys and values through that constructor. Valid UTF-8 decodes the same in
Python and Java, but malformed input does not: Python replaces each "maximal subpart" with
U+FFFD, while Java groups some sequences differently (e.g. `ED AF` - a surrogate's first two
bytes - is one U+FFFD in Java and two in Python; `ED A0 80` is one in Java and three in Python).
To print what kafka-dump-log prints, malformed input is decoded here by Java's rules.
"""
from __future__ import annotations

REPLACEMENT = "\ufffd"


def _continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _malformed3_2(b1: int, b2: int) -> bool:
    return (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _continuation(b2)


def _malformed4_2(b1: int, b2: int) -> bool:
    return (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and b2 & 0xF0 != 0x80) or not _continuation(b2)


def _malformed3_length(b1: int, b2: int) -> int:
    return 1 if _malformed3_2(b1, b2) else 2


def _malformed4_length(b1: int, b2: int, b3: int) -> int:
    if b1 > 0xF4 or _malformed4_2(b1, b2):
        return 1
    return 2 if not _continuation(b3) else 3


def decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _decode_replacing(data)


def _decode_replacing(data: bytes) -> str:
    out: list[str] = []
    n = len(data)
    i = 0
    while i < n:
        b1 = data[i]
        i += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:
            if i < n:
                b2 = data[i]
                if _continuation(b2):
                    out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                    i += 1
                else:
                    out.append(REPLACEMENT)
                continue
            out.append(REPLACEMENT)
            break
        elif 0xE0 <= b1 <= 0xEF:
            if i + 1 < n:
                b2, b3 = data[i], data[i + 1]
                if _malformed3_2(b1, b2) or not _continuation(b3):
                    out.append(REPLACEMENT)
                    i += _malformed3_length(b1, b2) - 1
                else:
                    code = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(REPLACEMENT if 0xD800 <= code <= 0xDFFF else chr(code))
                    i += 2
                continue
            if i < n and _malformed3_2(b1, data[i]):
                out.append(REPLACEMENT)
                continue
            out.append(REPLACEMENT)
            break
        elif 0xF0 <= b1 <= 0xF7:
            if i + 2 < n:
                b2, b3, b4 = data[i], data[i + 1], data[i + 2]
                code = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (_continuation(b2) and _continuation(b3) and _continuation(b4)) or not 0x10000 <= code <= 0x10FFFF:
                    out.append(REPLACEMENT)
                    i += _malformed4_length(b1, b2, b3) - 1
                else:
                    out.append(chr(code))
                    i += 3
                continue
            if b1 > 0xF4 or (i < n and _malformed4_2(b1, data[i])):
                out.append(REPLACEMENT)
                continue
            i += 1
            out.append(REPLACEMENT)
            if i < n and not _continuation(data[i]):
                continue
            break
        else:
            out.append(REPLACEMENT)
    return "".join(out)
