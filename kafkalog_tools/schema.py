"""Fast paths derived from `construct` schemas.

A fixed-size `construct.Struct` of plain integer fields maps one-to-one onto a `struct.Struct`.
Hot loops (scanning batch headers, index entries) use the derived `struct.Struct`; the schema
stays the single declaration of the layout, and tests check both read the same bytes alike.
"""
from __future__ import annotations

import struct

from construct import FormatField, Renamed, Struct


def struct_fields(schema: Struct) -> list[tuple[str, FormatField]]:
    fields = []
    for sub in schema.subcons:
        if not isinstance(sub, Renamed) or not isinstance(sub.subcon, FormatField):
            raise TypeError(f"{sub!r} is not a named fixed-size integer field")
        fields.append((sub.name, sub.subcon))
    return fields


def derive_struct(schema: Struct) -> struct.Struct:
    """The `struct.Struct` with the same layout as `schema` (big- or little-endian, not mixed)."""
    fields = struct_fields(schema)
    orders = {f.fmtstr[0] for _, f in fields}
    if len(orders) != 1:
        raise TypeError(f"mixed byte orders {orders} cannot form one struct format")
    return struct.Struct(orders.pop() + "".join(f.fmtstr[1:] for _, f in fields))


def field_names(schema: Struct) -> tuple[str, ...]:
    return tuple(name for name, _ in struct_fields(schema))
