"""``bench.forecast``'s record cache: a directory is stamped with the digest of the forecasting code that
wrote it, and records of other code (or of unknown code) are refused, never mixed into a table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import forecast_cache as cache

REPO = Path(__file__).resolve().parents[2]


def test_a_new_cache_is_stamped_and_reused_by_the_same_code(tmp_path: Path) -> None:
    digest = cache.claim_cache(tmp_path / "c")
    assert (tmp_path / "c" / cache.STAMP).read_text().strip() == digest == cache.code_digest()
    (tmp_path / "c" / "philly-naive-w29.pkl").write_bytes(b"records")
    assert cache.claim_cache(tmp_path / "c") == digest  # the same code may read what it wrote


def test_records_of_other_code_are_refused_with_the_directory_named(tmp_path: Path) -> None:
    cache.claim_cache(tmp_path / "c", digest="aaaaaaaaaaaa")
    with pytest.raises(SystemExit, match=r"c holds records of other code \(digest aaaaaaaaaaaa"):
        cache.claim_cache(tmp_path / "c", digest="bbbbbbbbbbbb")


def test_unstamped_records_are_refused(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "sim-lstm-w8.pkl").write_bytes(b"records")
    with pytest.raises(SystemExit, match="without a code stamp"):
        cache.claim_cache(tmp_path / "old")


def test_the_digest_follows_the_forecasting_code(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    for name in cache.SOURCES:
        src = REPO / name
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, copy / name)
    before = cache.code_digest(copy)
    assert before == cache.code_digest(REPO)
    lstm = copy / "models" / "forecast" / "lstm.py"
    lstm.write_text(lstm.read_text() + "\n# a change\n")
    assert cache.code_digest(copy) != before
