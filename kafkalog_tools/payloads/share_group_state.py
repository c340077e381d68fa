"""`__share_group_state`: the share coordinator's records (KIP-932, Kafka 4.0).

Implements `ShareSnapshotKey`/`ShareSnapshotValue` and `ShareUpdateKey`/`ShareUpdateValue`
(share-coordinator/src/main/resources/common/message, Kafka 4.0 commit b0fb35c), framed as
`org.apache.kafka.coordinator.share.ShareCoordinatorRecordSerde` frames them, which is the group
coordinator's framing: key = int16 record type (0 ShareSnapshot, 1 ShareUpdate) + a classic key
struct; value = int16 value version + a flexible value struct; a null value is a tombstone.

Kafka 4.0 writes ShareUpdate values with version 1 (`ShareCoordinator.
SHARE_UPDATE_RECORD_VALUE_VERSION`) though `ShareUpdateValue.json` declares only version 0
(fixed later by KAFKA-18303); its generated reader ignores the version, so v1 is v0's layout.

The text is what `kafka-dump-log.sh --share-group-state-decoder` prints in Kafka 4.0
(`DumpLogSegments.ShareGroupStateMessageParser`): as the offsets decoder prints, except that the
value's version is written under "type": `payload: {"type":"1","data":{...}}`.
"""
from __future__ import annotations

import functools

from construct import Int8sb, Int16sb, Int16ub, Int32sb, Int64sb, Struct

from ..protocol import CompactArray, String, Uuid
from . import DecodedPayload, PayloadDecoder, register
from .consumer_offsets import (FLEXIBLE, CoordinatorTopic, RecordType, coordinator_value_unreadable,
                               coordinator_value_version_known, decode_coordinator_record)

# ---------------------------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------------------------

SharePartitionKey = Struct(
    "groupId" / String,
    "topicId" / Uuid,
    "partition" / Int32sb,
)
"""ShareSnapshotKey (record type 0) and ShareUpdateKey (record type 1): the same fields."""

StateBatch = FLEXIBLE.struct(
    "firstOffset" / Int64sb,
    "lastOffset" / Int64sb,
    "deliveryState" / Int8sb,
    "deliveryCount" / Int16sb,
)

ShareSnapshotValue = FLEXIBLE.struct(
    "snapshotEpoch" / Int16ub,  # "uint16" in the JSON schema
    "stateEpoch" / Int32sb,
    "leaderEpoch" / Int32sb,
    "startOffset" / Int64sb,
    "stateBatches" / CompactArray(StateBatch),
)

ShareUpdateValue = FLEXIBLE.struct(
    "snapshotEpoch" / Int16ub,
    "leaderEpoch" / Int32sb,
    "startOffset" / Int64sb,
    "stateBatches" / CompactArray(StateBatch),
)

RECORD_TYPES: dict[int, RecordType] = {
    0: RecordType("share_snapshot", "ShareSnapshotKey", SharePartitionKey,
                  "ShareSnapshotValue", {0: ShareSnapshotValue}),
    1: RecordType("share_update", "ShareUpdateKey", SharePartitionKey,
                  "ShareUpdateValue", {0: ShareUpdateValue, 1: ShareUpdateValue}),
}

SHARE_GROUP_STATE = CoordinatorTopic("__share_group_state", RECORD_TYPES, value_version_label="type",
                                     decoder="share group state topic")


# ---------------------------------------------------------------------------------------------
# Decoding a record
# ---------------------------------------------------------------------------------------------


def decode(key: bytes | None, value: bytes | None, offset: int | None = None) -> DecodedPayload:
    """Decode one `__share_group_state` record (see `consumer_offsets.decode_coordinator_record`:
    PayloadError for a key that cannot be read, warnings for anything past it)."""
    return decode_coordinator_record(SHARE_GROUP_STATE, key, value, offset)


register(PayloadDecoder(
    name="share-group-state",
    topics=("__share_group_state",),
    decode=decode,
    value_unreadable=coordinator_value_unreadable,
    value_version_known=functools.partial(coordinator_value_version_known, SHARE_GROUP_STATE),
    description="share coordinator records: share-partition snapshots and updates (in-flight "
                "delivery states)",
))
