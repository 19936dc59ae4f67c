"""The benchmark's record cache belongs to the code that wrote it.

Why: ``python -m bench.forecast`` caches every backtest under ``--cache`` by trace, model and window count
only. A cache that outlives a change to a forecaster (or to the simulated traces) silently serves the old
records, and the tables then mix code states; a cold rebuild once moved the headline ratios by several
points, and which code or machine wrote the old records could not be told afterwards. So a cache directory
is stamped with a digest of the code that produces its records, and a run on other code refuses it with a
clear message.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["STAMP", "claim_cache", "code_digest"]

REPO = Path(__file__).resolve().parents[1]
STAMP = "CODE_DIGEST"
# What the cached records depend on: every forecaster and its helpers, and how the traces are built.
SOURCES = ("models/forecast", "bench/forecast_traces.py", "bench/forecast_global.py")


def code_digest(repo: Path = REPO, sources: tuple[str, ...] = SOURCES) -> str:
    """A short digest of the sources the cached records depend on (paths and contents, in a fixed order)."""
    files: list[Path] = []
    for name in sources:
        path = repo / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(repo)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def claim_cache(cache: Path, digest: str | None = None) -> str:
    """Create ``cache`` stamped with the current code's digest, or check an existing stamp; raise SystemExit
    naming the directory when it holds records of other code (or records without any stamp)."""
    digest = digest or code_digest()
    cache.mkdir(parents=True, exist_ok=True)
    stamp = cache / STAMP
    if stamp.is_file():
        found = stamp.read_text().strip()
        if found != digest:
            raise SystemExit(
                f"bench: --cache {cache} holds records of other code (digest {found}, this code "
                f"{digest}); pass a new --cache directory or empty this one"
            )
        return digest
    if any(cache.glob("*.pkl")):
        raise SystemExit(
            f"bench: --cache {cache} holds records without a code stamp (written before "
            f"{STAMP} existed, by unknown code); pass a new --cache directory or empty this one"
        )
    tmp = stamp.with_suffix(".tmp")
    tmp.write_text(digest + "\n")
    tmp.replace(stamp)
    return digest
