"""Big arrays a process is done with, kept for the next user of the same kind: a new one costs the
kernel zeroing its pages as they are first written (numpy puts arrays of 4 MiB and more on huge
pages), every segment. An array is kept only where nothing else holds it or a view of it, so that
its next user cannot overwrite what someone still reads."""
from __future__ import annotations

import sys


class Spares:
    def __init__(self, keep: int):
        self.arrays: list = []
        self.keep = keep
        """How many arrays at most wait to be taken again."""

    def take(self, fits):
        """A spare array `fits(array)` accepts, or None (a spare that does not fit is dropped)."""
        try:
            spare = self.arrays.pop()  # (one call: another thread may take it between a check and a pop)
        except IndexError:
            return None
        return spare if fits(spare) else None

    def give(self, array) -> None:
        """Keep `array`, which the caller names once and is done with, unless something else holds it."""
        # (the caller's name, this parameter and getrefcount's own argument: anything more is a keeper)
        if array is not None and sys.getrefcount(array) == 3 and len(self.arrays) < self.keep:
            self.arrays.append(array)
