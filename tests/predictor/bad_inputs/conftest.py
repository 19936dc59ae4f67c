"""The good inputs every bad-input case starts from (each case spoils one of them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.predictor.bad_inputs.inputs import Files, make_files


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return make_files(tmp_path)
