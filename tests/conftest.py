"""Shared test fixtures: where the shared corpus lives, and skipping cleanly when it is absent."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CORPUS = Path(os.environ.get("KAFKALOG_CORPUS", ROOT.parent / "shared" / "corpus")).resolve()
GOLDEN = CORPUS / "golden"
REAL = CORPUS / "real"


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
