"""`--spark`: verify and dump many log dirs on a Spark cluster (or `local[*]`), with the very same
library code as the single-process path - one implementation, two schedulers.

The driver lists partitions and segments (`plan`), executors run `verify.check_segment` per
segment and `verify.check_partition` per partition (`jobs`), and the driver prints what a single
process would have printed. Nothing but `options` (click only) is imported unless `--spark` is
given: pyspark is an extra.
"""

INSTALL_HINT = "pip install 'kafkalog-tools[spark]'"
