"""elf_object lays out the kernels' relocatable object without a linker; loader maps the image.

The objects here are real ones, compiled by LLVM (llvmlite) from a small module: position-
independent (what `kernels.build` makes on x86-64), with 64-bit addresses (applied once
mapped), with 32-bit ones (refused, so that LLVM maps it instead). The kernels' own object, mapped
both ways, must answer alike.
"""
from __future__ import annotations

import ctypes

import pytest

from kafkalog_tools.native import bulk_scan, cache, elf_object, loader
from kafkalog_tools.formats.record_batch import build_batch, build_record
from kafkalog_tools.formats.segment import SegmentFile

binding = pytest.importorskip("llvmlite.binding", reason="objects are compiled by LLVM (an install requirement)")
pytestmark = pytest.mark.skipif(not cache._X86_64, reason="the image loader is for x86-64 objects")

SMALL_MODULE = """
@primes = private unnamed_addr constant [4 x i64] [i64 3, i64 5, i64 7, i64 11]

define i64 @pick(i64 %i) noinline {
  %at = getelementptr [4 x i64], ptr @primes, i64 0, i64 %i
  %value = load i64, ptr %at
  ret i64 %value
}

define i64 @kafkalog_sum(i64 %a, i64 %b) {
  %x = call i64 @pick(i64 %a)
  %y = call i64 @pick(i64 %b)
  %sum = add i64 %x, %y
  ret i64 %sum
}
"""
"""A call between functions (a PLT32 relocation) and a constant table read RIP-relative (PC32)."""


def _compiled(**model) -> bytes:
    binding.initialize_native_target()
    binding.initialize_native_asmprinter()
    machine = binding.Target.from_triple(binding.get_process_triple()).create_target_machine(opt=2, **model)
    module = binding.parse_assembly(SMALL_MODULE)
    module.verify()
    return machine.emit_object(module)


@pytest.mark.parametrize("model", [{"reloc": "pic", "codemodel": "small"}, {"reloc": "static", "codemodel": "large"}],
                         ids=["position-independent", "absolute addresses"])
def test_an_object_runs_where_it_is_mapped(model):
    """PC-relative places are patched in the image; 64-bit addresses (all of the large code model's)
    once it is mapped."""
    image = elf_object.image(_compiled(**model), "kafkalog_")
    assert list(image.entries) == ["kafkalog_sum"]  # `pick` is not exported
    assert bool(image.absolute) == (model["reloc"] == "static")
    pages = loader._ExecutablePages(image)
    add = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(pages.address + image.entries["kafkalog_sum"])
    assert [add(a, b) for a, b in [(0, 0), (1, 3), (2, 1)]] == [6, 16, 12]
    del add
    pages.close()
    assert pages.address is None


def test_32_bit_absolute_relocations_are_refused():
    """The small code model without PIC wants the image in the low 2 GiB: not for this loader."""
    with pytest.raises(elf_object.UnsupportedObject, match="relocation type 11,"):  # R_X86_64_32S
        elf_object.image(_compiled(reloc="static", codemodel="small"), "kafkalog_")


@pytest.mark.parametrize("cut", [0, 10, 63, 64, 200, -40])
def test_cut_objects_are_refused(cut):
    data = _compiled(reloc="pic", codemodel="small")
    with pytest.raises(elf_object.UnsupportedObject):
        elf_object.image(data[:cut] if cut >= 0 else data[:len(data) + cut], "kafkalog_")


def test_other_files_are_refused():
    with pytest.raises(elf_object.UnsupportedObject, match="not a little-endian ELF64"):
        elf_object.image(b"\x7fELF" + bytes(60), "kafkalog_")


def test_the_kernels_mapped_here_answer_as_mapped_by_llvm(tmp_path):
    """The cached object, laid out by elf_object, and the same bytes mapped by MCJIT (the path other
    machines take) read a segment into the very same columns."""
    mapped = bulk_scan.kernel()
    code = cache._cached(cache.cache_key())
    if mapped is None or code is None:
        pytest.skip("no compiled kernels here (numba or a writable cache missing)")
    assert isinstance(mapped._owner, loader._ExecutablePages)
    jitted = loader.NativeKernel(*loader.jitted(code))
    batches = [build_batch(7 * i, [build_record(j, j, b"k%d" % j, b"v" * (i % 50)) for j in range(i % 4 + 1)],
                           base_timestamp=1000 + i) for i in range(300)]
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(b"".join(batches) + b"\0" * 30)
    with SegmentFile(log) as segment:
        answers = []
        for kernel in (mapped, jitted):
            columns = kernel.columns()
            n, after = kernel.scan(kernel.view(segment.buffer), 0, segment.end, segment.end, True, columns)
            answers.append((n, after, columns[:, :n].tolist()))
    assert answers[0] == answers[1]
    assert answers[0][0] == 300 and answers[0][1] == segment.end - 30


def test_damaged_objects_are_laid_out_or_refused_never_anything_else():
    """The cache's digest keeps damaged files from ever reaching the loader; should one get there
    anyway, it is refused (and LLVM asked) rather than failing some other way."""
    import random

    data = _compiled(reloc="pic", codemodel="small")
    rng, refused = random.Random(6), 0
    for _ in range(400):
        damaged = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            elf_object.image(bytes(damaged), "kafkalog_")
        except elf_object.UnsupportedObject:
            refused += 1
    assert refused > 20
