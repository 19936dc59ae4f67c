"""What diagnosis queries is derived from the feature specs: a family a new feature reads is never left out."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from models.frames import ID, TIME, VALUE
from models.rca_specs import CONTEXT_FAMILIES, SPECS
from pipelines.rca_configs import DROPPABLE
from predictor.diagnose.engine import NEEDED_METRICS, fetch_window
from predictor.sources.files import FileSource, write_frame

AT = pd.Timestamp("2026-03-09T11:00:00Z")
WINDOW, STEP = pd.Timedelta(minutes=15), pd.Timedelta(minutes=1)


def _spec_families() -> set[str]:
    return {family for spec in SPECS for family in spec.families}


def test_every_family_of_the_specs_is_queried_once() -> None:
    assert _spec_families() | set(CONTEXT_FAMILIES) == set(NEEDED_METRICS)
    assert len(NEEDED_METRICS) == len(set(NEEDED_METRICS))


def test_a_history_with_every_spec_family_comes_back_whole(tmp_path: Path) -> None:
    """``fetch_window`` asks the source for each family: one series per family in a file, all of them read."""
    names = sorted(_spec_families() | set(CONTEXT_FAMILIES))
    path = tmp_path / "history.csv"
    stamps = pd.date_range(AT - WINDOW, AT, freq=STEP)
    write_frame(
        pd.concat(
            pd.DataFrame({ID: f"{name}{{node=a}}", TIME: stamps, VALUE: 1.0, "__name__": name, "node": "a"})
            for name in names
        ),
        path,
    )
    fetched = fetch_window(FileSource(path), AT, WINDOW, STEP)
    assert sorted(set(fetched["__name__"])) == names


def test_families_training_may_drop_are_ones_the_features_read() -> None:
    dropped = {family for group in DROPPABLE for family in group}
    assert dropped <= _spec_families()
