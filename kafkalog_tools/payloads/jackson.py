"""JSON text as Kafka's tools print it: Jackson's `JsonNode.toString` over the generated
JsonConverter output (compact; `"`, `\\` and C0 controls escaped, `\\b \\t \\n \\f \\r` short, the
rest as upper-case `\\u00XX`; non-ASCII as is), bytes as padded standard base64, doubles as Java's
`Double.toString`. Shared by every payload decoder's text form.
"""
from __future__ import annotations

import base64
import math
from decimal import Decimal


def b64(data: bytes) -> str:
    """Bytes as Jackson writes a BinaryNode: standard base64 with padding."""
    return base64.b64encode(data).decode("ascii")


# ---------------------------------------------------------------------------------------------
# JSON text as Jackson's JsonNode.toString writes it
# ---------------------------------------------------------------------------------------------

# Jackson escapes '"', '\' and the C0 controls: \b \t \n \f \r short, the rest as \u00XX
# (upper-case hex). Everything else, non-ASCII included, is written as is.
_JACKSON_ESCAPES = {code: f"\\u{code:04X}" for code in range(0x20)} | {
    ord('"'): '\\"', ord("\\"): "\\\\", 0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f",
    0x0D: "\\r",
}


def jackson_json(obj: object) -> str:
    """Compact JSON text, as Jackson writes a JsonNode tree."""
    if obj is None:
        return "null"
    if obj is True or obj is False:
        return "true" if obj else "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        text = java_double_text(obj)
        return text if math.isfinite(obj) else f'"{text}"'  # WRITE_NAN_AS_STRINGS
    if isinstance(obj, str):
        return '"' + obj.translate(_JACKSON_ESCAPES) + '"'
    if isinstance(obj, list):
        return "[" + ",".join(jackson_json(item) for item in obj) + "]"
    if isinstance(obj, dict):
        return "{" + ",".join(f"{jackson_json(name)}:{jackson_json(item)}"
                              for name, item in obj.items()) + "}"
    raise TypeError(f"no JSON form for {type(obj).__name__}")


def java_double_text(value: float) -> str:
    """Java's Double.toString: plain notation for 1e-3 <= |x| < 1e7, else "d.dddE±n".

    The digits are those Java 19+ chooses: the shortest that read back as the same double, where
    a two-digit decimal closer to the double beats a one-digit one (4.9E-324, not 5.0E-324).
    Older JDKs occasionally print a longer tail.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    magnitude = abs(value)
    shortest = Decimal(repr(magnitude))
    if len(shortest.normalize().as_tuple().digits) == 1:
        exact = Decimal(magnitude)
        two_digits = Decimal(f"{exact:.1e}")
        if float(two_digits) == magnitude and abs(two_digits - exact) < abs(shortest - exact):
            shortest = two_digits
    _, digit_tuple, exponent = shortest.normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exponent  # digits before the decimal point
    if 1e-3 <= magnitude < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole, fraction = digits[:point].ljust(point, "0"), digits[point:]
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"
