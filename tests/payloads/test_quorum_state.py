"""The KRaft `quorum-state` file, v0 and v1, as FileQuorumStateStore (Kafka 3.8.0) reads it."""
from __future__ import annotations

import re

import pytest

from kafkalog_tools.payloads import PayloadError
from kafkalog_tools.payloads.quorum_state import QuorumState, parse_quorum_state, read_quorum_state

# What Kafka writes: the QuorumStateDataJsonConverter output plus data_version, on one line
V0 = ('{"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,'
      '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}')
V1 = ('{"leaderId":-1,"leaderEpoch":7,"votedId":2,"votedDirectoryId":"AAECAwQFBgcICQoLDA0ODw",'
      '"data_version":1}')


def test_version_0():
    assert parse_quorum_state(V0) == QuorumState(
        data_version=0, leader_id=1, leader_epoch=5, voted_id=-1, cluster_id="",
        applied_offset=0, current_voters=(1, 2, 3),
    )


def test_version_1():
    assert parse_quorum_state(V1) == QuorumState(
        data_version=1, leader_id=-1, leader_epoch=7, voted_id=2,
        voted_directory_id="AAECAwQFBgcICQoLDA0ODw",
    )


def test_only_the_first_line_counts_and_other_versions_fields_are_ignored():
    text = V1[:-1] + ',"clusterId":"x","currentVoters":"ignored"}\nanything'
    assert parse_quorum_state(text) == parse_quorum_state(V1)
    assert parse_quorum_state(V0.replace('[{"voterId":1},{"voterId":2},{"voterId":3}]',
                                         "null")).current_voters is None


def test_read_from_a_file(tmp_path):
    path = tmp_path / "quorum-state"
    path.write_text(V0)
    assert read_quorum_state(path).leader_epoch == 5
    path.write_bytes(b'{"data_version":\xff}')
    with pytest.raises(PayloadError, match=re.escape(f"{path}: quorum-state is not UTF-8")):
        read_quorum_state(path)
    path.write_text("{}")
    with pytest.raises(PayloadError, match=re.escape(f"{path}: quorum-state has no data_version")):
        read_quorum_state(path)


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("\n" + V0, "empty"),
    ("{not json", "is not JSON"),
    ("[1, 2]", "holds list"),
    ('{"leaderId":1}', "has no data_version field"),
    ('{"data_version":2}', "data_version 2 is not 0 or 1"),
    ('{"data_version":"1"}', "data_version must be an integer"),
    (V1.replace('"leaderEpoch":7,', ""), "v1 has no 'leaderEpoch' field"),
    (V0.replace('"clusterId":"",', ""), "v0 has no 'clusterId' field"),
    (V0.replace('"leaderId":1', '"leaderId":"1"'), "leaderId must be an integer"),
    (V0.replace('"leaderId":1', '"leaderId":true'), "leaderId must be an integer"),
    (V0.replace('"leaderId":1', '"leaderId":2147483648'), "does not fit a 32-bit integer"),
    (V0.replace('"clusterId":""', '"clusterId":5'), "clusterId must be a string"),
    (V0.replace('{"voterId":1}', '{"id":1}'), "currentVoters must be a list"),
    (V0.replace('{"voterId":1}', '{"voterId":1.5}'), "currentVoters.voterId must be an integer"),
    (V1.replace("AAECAwQFBgcICQoLDA0ODw", "not-a-uuid"), "votedDirectoryId must be a Kafka Uuid"),
])
def test_malformed_files_raise_payload_error(text, message):
    with pytest.raises(PayloadError, match=message):
        parse_quorum_state(text)
