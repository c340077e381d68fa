"""A mutation fuzzer for every kafkalog subcommand: `python -m kafkalog_tools.fuzz --help`.

It mutates real Kafka files (the corpora given with --corpus, and segments it builds itself) at
their structural boundaries, lays them out in hostile log dirs, runs every subcommand on them
in-process in memory-capped workers, and reports any run that escapes with a traceback, exits
with a code other than 0/1/2, runs past the time limit, writes where it should only read, or
follows a link out of the tree. `cases.py` builds cases, `mutate.py` mutates bytes, `runner.py`
runs them; `bombs.py` builds decompression bombs.
"""
