"""Shared test fixtures: where the shared corpus lives, and skipping cleanly when it is absent."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CORPUS = Path(os.environ.get("KAFKALOG_CORPUS", ROOT.parent / "shared" / "corpus")).resolve()
GOLDEN = CORPUS / "golden"
REAL = CORPUS / "real"
SEED_VARIABLE = "KAFKALOG_KAFKA_SEED"

# The suite runs the same examples on every run: a test that passes or fails by the draw is a flaky
# build. New examples are explored on purpose: HYPOTHESIS_PROFILE=explore, KAFKALOG_KAFKA_SEED=random,
# and the fuzzers (README, "Fuzzing").
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


def chosen_seed(default: int) -> int:
    """A randomized test's seed: KAFKALOG_KAFKA_SEED (a number, or `random` for a new draw), else
    `default`, the one CI runs."""
    chosen = os.environ.get(SEED_VARIABLE, "")
    if chosen == "random":
        return random.SystemRandom().randrange(1 << 31)
    return int(chosen) if chosen else default


def pytest_configure(config):
    """The compiled kernels built once, up front, as `kafkalog build-kernels` does: runs in `auto`
    mode no longer build them in the foreground, and the bulk path's tests must exercise them."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return  # the bulk tests skip, saying so
    from kafkalog_tools.native import loader

    loader.load()


def need(path: Path) -> Path:
    """Skip the calling test with a clear reason when a corpus path is absent."""
    if not path.exists():
        pytest.skip(f"shared corpus not found at {path} (set KAFKALOG_CORPUS to its location)")
    return path


@pytest.fixture
def golden() -> Path:
    return need(GOLDEN)


@pytest.fixture
def real() -> Path:
    return need(REAL)
