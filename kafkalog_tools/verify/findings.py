"""What verification reports: findings, their totals, and where a finding goes among those at one
position of a segment."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import KafkaLogError


ERROR, WARNING, INFO = "error", "warning", "info"
MAX_FINDINGS_PER_CODE = 100
"""Per file and code; the rest are counted in one closing finding."""
PROGRESS_STEP = 8 << 20


@dataclass
class Finding:
    severity: str
    """"error" (Kafka would fail, lose or misread data), "warning" (Kafka copes; worth knowing),
    or "info"."""
    code: str
    file: str
    position: int | None
    """Byte position in `file`, when the finding has one."""
    message: str
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"type": "finding", "severity": self.severity, "code": self.code, "file": self.file,
                "position": self.position, "message": self.message, **self.extra}


@dataclass
class Summary:
    paths: int = 0
    partitions: int = 0
    segments: int = 0
    batches: int = 0
    records: int | None = 0
    """Records decoded (None when verifying shallowly)."""
    log_bytes: int = 0
    intact_bytes: int = 0
    damaged_bytes: int = 0
    errors: int = 0
    warnings: int = 0
    infos: int = 0
    suppressed: int = 0
    io_errors: int = 0
    log_dirs: list[dict] = field(default_factory=list)
    """Whether a broker runs on each log dir read, and how it was read (`broker.BrokerState.to_json`)."""

    def count(self, finding: Finding) -> None:
        if finding.severity == ERROR:
            self.errors += 1
        elif finding.severity == WARNING:
            self.warnings += 1
        else:
            self.infos += 1
        if finding.code == "io-error":
            self.io_errors += 1

    def add(self, other: "Summary") -> None:
        """Add another summary's counts (every field but `paths`)."""
        for name, value in vars(other).items():
            if name == "log_dirs":
                self.log_dirs.extend(state for state in value if state not in self.log_dirs)
            elif name != "paths" and value is not None:
                setattr(self, name, (getattr(self, name) or 0) + value)

    def to_json(self) -> dict:
        return {"type": "summary", **vars(self)}


ProgressCallback = Callable[[int], None]


# Where a finding goes among those at the same position of a segment: the order in which one
# pass over a batch makes them (stage 1 and stage 2 findings interleave).
RANK_BASE_OFFSET, RANK_ORDER, RANK_BOUNDS, RANK_EPOCH, RANK_RECORDS, RANK_PRODUCER, RANK_AFTER = range(7)


def position_key(finding: Finding) -> int:
    return -1 if finding.position is None else finding.position


def from_error(exc: KafkaLogError, code: str, file: str) -> Finding:
    extra = {}
    if exc.expected is not None:
        extra["expected"] = plain(exc.expected)
    if exc.actual is not None:
        extra["actual"] = plain(exc.actual)
    return Finding(ERROR, code, exc.path or file, exc.position, exc.message, extra)


def plain(value):
    """An error's expected/actual as a finding shows it (and as it pickles anywhere)."""
    return value if value is None or isinstance(value, (int, str)) else str(value)
