"""The compiled scan: loops over a segment's bytes in machine code, for where the per-batch path
(formats/ and its construct schemas) costs too much. It only ever vouches for what it read; the
per-batch path owns every finding and takes over wherever this stops.

    segment bytes ──bulk_scan.Reader──▶ kernels.scan ──▶ int64 columns (columns.COLUMNS)
        verify:        columns ──▶ checks in numpy ──▶ findings (the per-batch path's, where it stopped)
        rebuild-index: columns ──▶ kernels.recovery_index ──▶ index entries
        dump:          columns ──▶ kernels.decode_each ──▶ record columns ──▶ render_each ──▶ lines

From the bottom up, each module importing only those above it in this list:
- columns.py: the column layout the kernels and their callers share (rows, state, texts).
- elf_object.py: lays out a relocatable x86-64 ELF object in memory, without a linker.
- kernels.py: the loops, compiled by numba into one object file (only when building).
- cache.py: builds that object once per source and CPU and keeps it; finds it again without
  importing numpy; the background build.
- loader.py: maps the object (elf_object, else LLVM) and calls its entry points through ctypes.
- bulk_scan.py: whether a segment is worth it (`wanted`), the kernels if they can be had
  (`kernel`), and `Reader`, which walks a segment a byte range at a time.
"""
