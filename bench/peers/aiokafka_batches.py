"""Peer of `kafkalog verify`: aiokafka's C reader walks every batch and checks its CRC."""
from __future__ import annotations

import sys

from aiokafka.record.memory_records import MemoryRecords

from common import chunks

batches = bad = 0
for _, data in chunks(sys.argv[1]):
    records = MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        batches += 1
        bad += not batch.validate_crc()
print(batches, bad)
