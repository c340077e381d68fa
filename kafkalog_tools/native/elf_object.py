"""ELF64 relocatable objects for x86-64, as far as the bulk kernels need: the sections a program
loads, laid out in one image, with their relocations applied.

numba compiles the kernels once into such an object (`kernels.build`, position-independent,
small code model). Mapping it with LLVM's MCJIT means importing llvmlite first, ~40 ms of every
run. Yet an object with no symbol from outside needs no linker: lay its sections out and write
(target + addend - place) into each PC-relative place; only the few 64-bit absolute places (a
constant array's data pointer, in `.data.rel.ro`) wait for the address the image is mapped at.
Anything else (another machine, another relocation type, data written at run time, a symbol from
outside) is refused with `UnsupportedObject`, and the caller lets LLVM map the object instead.

Layouts from the System V ABI's ELF chapter and its x86-64 supplement (relocation types 2 and 4).
"""
from __future__ import annotations

import struct
from collections import namedtuple
from dataclasses import dataclass

from construct import Int8ul, Int16ul, Int32ul, Int64sl, Int64ul, Struct

from ..schema import derive_struct, field_names

ELF_HEADER = Struct(
    "magic" / Int32ul,
    "elf_class" / Int8ul,
    "data_encoding" / Int8ul,
    "ident_version" / Int8ul,
    "os_abi" / Int8ul,
    "abi_version_and_padding" / Int64ul,
    "type" / Int16ul,
    "machine" / Int16ul,
    "version" / Int32ul,
    "entry" / Int64ul,
    "program_headers_at" / Int64ul,
    "section_headers_at" / Int64ul,
    "flags" / Int32ul,
    "header_size" / Int16ul,
    "program_header_size" / Int16ul,
    "program_headers" / Int16ul,
    "section_header_size" / Int16ul,
    "sections" / Int16ul,
    "section_names_index" / Int16ul,
)
SECTION_HEADER = Struct(
    "name" / Int32ul,
    "type" / Int32ul,
    "flags" / Int64ul,
    "address" / Int64ul,
    "offset" / Int64ul,
    "size" / Int64ul,
    "link" / Int32ul,
    "info" / Int32ul,
    "alignment" / Int64ul,
    "entry_size" / Int64ul,
)
SYMBOL = Struct(
    "name" / Int32ul,
    "info" / Int8ul,
    "other" / Int8ul,
    "section" / Int16ul,
    "value" / Int64ul,
    "size" / Int64ul,
)
RELOCATION = Struct(  # Elf64_Rela
    "offset" / Int64ul,
    "info" / Int64ul,
    "addend" / Int64sl,
)

ELF_MAGIC = 0x464C457F  # "\x7fELF", little-endian
CLASS_64, LITTLE_ENDIAN, RELOCATABLE, X86_64 = 2, 1, 1, 62
SHT_SYMTAB, SHT_RELA, SHT_NOBITS, SHT_REL, SHT_X86_64_UNWIND = 2, 4, 8, 9, 0x70000001
SHF_WRITE, SHF_ALLOC = 0x1, 0x2
SHN_LORESERVE = 0xFF00
"""Section indexes from here up are special (absolute, common...): nothing the image holds."""
STT_FUNC = 2
MAX_IMAGE = 64 << 20
"""Far more than the kernels' ~50 KB: a larger layout means a damaged header, not code."""
R_X86_64_PC32, R_X86_64_PLT32 = 2, 4
"""S + A - P, 32 bits signed: a call (no PLT needed, the callee is in the image) or a RIP-relative load."""
R_X86_64_64 = 1
"""S + A, 64 bits: an address, known once the image is mapped (`Image.absolute`)."""
RELRO_PREFIX = ".data.rel.ro"
"""Data written only by relocations, read-only after them (as a dynamic linker's RELRO)."""

_HEADER, _SECTION, _SYMBOL, _RELOCATION = (derive_struct(s) for s in (ELF_HEADER, SECTION_HEADER, SYMBOL, RELOCATION))
ElfHeader = namedtuple("ElfHeader", field_names(ELF_HEADER))
SectionHeader = namedtuple("SectionHeader", field_names(SECTION_HEADER))
Symbol = namedtuple("Symbol", field_names(SYMBOL))


class UnsupportedObject(ValueError):
    """An object this loader does not take; LLVM can still map it."""


@dataclass(frozen=True)
class Image:
    code: bytes
    """The loaded sections, laid out at their alignments, PC-relative places relocated."""
    entries: dict[str, int]
    """Each exported function's offset in `code`, by name."""
    absolute: list[tuple[int, int]]
    """(place, offset in `code`): the place holds, as 8 little-endian bytes, the address the image
    is mapped at plus that offset. Written before the pages are made read-only."""


def image(data: bytes, exported_prefix: str) -> Image:
    """`data`'s loadable sections as one image, where its functions whose names start with
    `exported_prefix` begin, and the places that take the image's address."""
    try:
        return _image(data, exported_prefix)
    except UnsupportedObject:
        raise
    except (struct.error, IndexError, ValueError) as exc:  # a table past the end, an index past a table
        raise UnsupportedObject(f"malformed ELF object: {exc}") from None


def _image(data: bytes, exported_prefix: str) -> Image:
    header = ElfHeader(*_HEADER.unpack_from(data, 0))
    if (header.magic, header.elf_class, header.data_encoding, header.type, header.machine) != (
            ELF_MAGIC, CLASS_64, LITTLE_ENDIAN, RELOCATABLE, X86_64):
        raise UnsupportedObject("not a little-endian ELF64 relocatable object for x86-64")
    if header.section_header_size != _SECTION.size:
        raise UnsupportedObject(f"section headers of {header.section_header_size} bytes, not {_SECTION.size}")
    sections = [SectionHeader(*_SECTION.unpack_from(data, header.section_headers_at + i * _SECTION.size))
                for i in range(header.sections)]
    names = sections[header.section_names_index]

    def name_of(table, at: int) -> str:
        start = table.offset + at
        return data[start:data.index(b"\0", start)].decode()

    placed: dict[int, int] = {}  # section index -> where it starts in the image
    size = 0
    for index, section in enumerate(sections):
        unwind_table = section.type == SHT_X86_64_UNWIND or name_of(names, section.name) == ".eh_frame"
        if not section.flags & SHF_ALLOC or unwind_table or not section.size:
            continue  # unwind tables only serve debuggers and C++ exceptions, neither of which reaches the kernels
        if section.flags & SHF_WRITE and not name_of(names, section.name).startswith(RELRO_PREFIX):
            raise UnsupportedObject(f"writable section {name_of(names, section.name)}")
        if section.type != SHT_NOBITS and section.offset + section.size > len(data):
            raise UnsupportedObject(f"section {name_of(names, section.name)} runs past the end of the object")
        alignment = max(section.alignment, 1)
        size = -(-size // alignment) * alignment
        placed[index] = size
        size += section.size
        if size > MAX_IMAGE:
            raise UnsupportedObject(f"an image of more than {MAX_IMAGE} bytes")
    code = bytearray(size)
    for index, at in placed.items():
        section = sections[index]
        if section.type != SHT_NOBITS:  # .bss-like: zeros, as laid out
            code[at:at + section.size] = data[section.offset:section.offset + section.size]

    [symbol_table] = [s for s in sections if s.type == SHT_SYMTAB]
    symbols = [Symbol(*_SYMBOL.unpack_from(data, symbol_table.offset + i * _SYMBOL.size))
               for i in range(symbol_table.size // _SYMBOL.size)]

    def target(symbol) -> int:
        if symbol.section not in placed:
            raise UnsupportedObject(f"a relocation to a symbol outside the image (section {symbol.section})")
        return placed[symbol.section] + symbol.value

    absolute: list[tuple[int, int]] = []
    for section in sections:
        if section.type not in (SHT_RELA, SHT_REL) or section.info not in placed:
            continue  # relocations of what is not loaded
        if section.type == SHT_REL:
            raise UnsupportedObject("relocations without addends")
        patched = placed[section.info]
        for i in range(section.size // _RELOCATION.size):
            offset, info, addend = _RELOCATION.unpack_from(data, section.offset + i * _RELOCATION.size)
            kind, symbol = info & 0xFFFFFFFF, info >> 32
            width = 8 if kind == R_X86_64_64 else 4
            if not 0 <= offset <= sections[section.info].size - width:
                raise UnsupportedObject(f"a relocation at {offset}, outside its section")
            if kind == R_X86_64_64:
                absolute.append((patched + offset, target(symbols[symbol]) + addend))
                continue
            if kind not in (R_X86_64_PC32, R_X86_64_PLT32):
                raise UnsupportedObject(f"relocation type {kind}, neither PC-relative nor a 64-bit address")
            value = target(symbols[symbol]) + addend - (patched + offset)
            if not -(1 << 31) <= value < 1 << 31:
                raise UnsupportedObject(f"a relative relocation of {value} bytes")
            struct.pack_into("<i", code, patched + offset, value)

    strings = sections[symbol_table.link]
    entries = {}
    for symbol in symbols:
        if symbol.info & 0xF == STT_FUNC and symbol.section < SHN_LORESERVE and symbol.section in placed:
            name = name_of(strings, symbol.name)
            if name.startswith(exported_prefix):
                entries[name] = target(symbol)
    return Image(bytes(code), entries, absolute)
