"""Whether a path is a Hadoop URI (`hdfs://`, `s3a://`, ...): the CLI asks before it imports
anything of Spark's, so this stays apart from `remote`."""
from __future__ import annotations

import re

URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(path: str) -> bool:
    return bool(URI.match(str(path)))
