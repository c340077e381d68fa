"""Inputs for tests that compare two ways of running verify: the corpus paths that exercise every
check, and seeded damaged copies of golden partitions."""
from __future__ import annotations

import random
import shutil
from pathlib import Path

from tests.conftest import GOLDEN, REAL, need


def corpus_paths() -> list[str]:
    need(GOLDEN)
    need(REAL)
    paths = [p for kind in ("logs", "rebuilt") for p in sorted((GOLDEN / kind).iterdir())]
    paths += [GOLDEN / "damaged" / "truncated" / "golden-v2-mixed-0", REAL / "zk-broker-a", REAL / "zk-broker-b"]
    return [str(p) for p in paths]



def damaged_copies(root: Path) -> list[str]:
    """Golden partitions with bytes flipped, zeroed and cut, indexes, snapshots and segments
    removed or duplicated, checkpoints edited; and a broker dir whose recovery point is past its log."""
    rng = random.Random(5)
    sources = sorted((GOLDEN / "logs").iterdir())
    out = []
    for number in range(18):
        source = sources[number % len(sources)]
        work = root / f"case{number}" / source.name
        shutil.copytree(source, work)
        for path in work.iterdir():
            path.chmod(0o644)
        logs = sorted(work.glob("*.log"))
        for _ in range(3):
            kind = rng.choice(["flip", "zero", "cut", "drop-index", "drop-segment", "epoch", "snapshot", "overlap"])
            if kind in ("flip", "zero", "cut"):
                log = rng.choice([p for p in logs if p.stat().st_size])
                data = bytearray(log.read_bytes())
                at = rng.randrange(len(data))
                if kind == "flip":
                    data[at] ^= 0x20
                elif kind == "zero":
                    data[at: at + 2000] = bytes(len(data[at: at + 2000]))
                else:
                    del data[at:]
                log.write_bytes(bytes(data))
            elif kind == "drop-index":
                files = [p for p in work.iterdir() if p.suffix in (".index", ".timeindex", ".txnindex", ".snapshot")]
                rng.choice(files).unlink()
            elif kind == "drop-segment" and len(logs) > 2:
                logs.pop(rng.randrange(1, len(logs) - 1)).unlink()
            elif kind == "epoch" and (work / "leader-epoch-checkpoint").exists():
                lines = (work / "leader-epoch-checkpoint").read_text().splitlines()
                epoch, start = lines[-1].split()
                lines[-1] = f"{epoch} {int(start) + 3}"
                (work / "leader-epoch-checkpoint").write_text("\n".join(lines) + "\n")
            elif kind == "snapshot" and list(work.glob("*.snapshot")):
                snapshot = rng.choice(sorted(work.glob("*.snapshot")))
                data = bytearray(snapshot.read_bytes())
                data[-5] ^= 1
                snapshot.write_bytes(bytes(data))
            elif kind == "overlap" and len(logs) > 1:
                copy = work / f"{int(logs[1].stem) - 1:020d}.log"
                if not copy.exists():
                    shutil.copy(logs[-1], copy)
        out.append(str(work))
    broker = root / "broker" / "zk-broker-b"
    shutil.copytree(REAL / "zk-broker-b", broker)
    checkpoint = broker / "recovery-point-offset-checkpoint"
    checkpoint.chmod(0o644)
    lines = checkpoint.read_text().splitlines()
    topic, partition, offset = lines[3].split()
    lines[3] = f"{topic} {partition} {int(offset) + 1000}"
    checkpoint.write_text("\n".join(lines) + "\n")
    return out + [str(broker)]


def insert_or_remove(rng: random.Random, data: bytearray) -> None:
    """One to three bytes inserted at, or removed from, a random place of `data` (not empty)."""
    at = rng.randrange(len(data))
    if rng.random() < 0.5:
        data[at:at] = rng.randbytes(rng.randrange(1, 4))
    else:
        del data[at:at + rng.randrange(1, 4)]
