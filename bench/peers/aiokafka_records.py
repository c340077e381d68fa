"""Peer of a deep `kafkalog verify`: aiokafka's C reader walks every batch, checks its CRC, and
decodes every record, decompressing compressed batches (and V0/V1 wrappers) to do so. That is the
reading a deep verify does; the checks it makes of what it reads are extra."""
from __future__ import annotations

import sys

from aiokafka.record.memory_records import MemoryRecords

from common import chunks

batches = records = bad = 0
for _, data in chunks(sys.argv[1]):
    memory = MemoryRecords(data)
    while (batch := memory.next_batch()) is not None:
        batches += 1
        bad += not batch.validate_crc()
        for _record in batch:
            records += 1
print(batches, records, bad)
