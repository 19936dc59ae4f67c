"""Rebuild the bundled default root-cause model and the feature table, both under ``predictor/diagnose/``.

Deterministic: fixed simulator scenarios and seeds, a seeded tree. Run after changing features or the
simulator, and commit both files:

    .venv/bin/python -m pipelines.rca_default [--cache DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from models.rca_eval import fit_rca
from models.rca_features import feature_table_markdown
from pipelines.rca_data import MIN_TRAIN_STRENGTH, TRAIN_SCENARIOS, build_dataset
from predictor import diagnose
from predictor.atomicio import write_text
from predictor.diagnose.models import DEFAULT_MODEL_PATH, save_model_file

FEATURES_MD = Path(diagnose.__file__).with_name("FEATURES.md")
_HEADER = """# Root-cause symptom features

Generated from `models/rca_features.py` (`SPECS`) by `python -m pipelines.rca_default`; do not edit.
One row per candidate (node or Volcano queue) and window `(at - w, at]`; "preceding window" is
`(at - 2w, at - w]`. A missing series gives NaN, which the tree routes like a value. Node labels are read
from `Hostname`, `hostname`, `node`, `kubernetes_node` or `instance` (first present).

"""


def features_markdown() -> str:
    return _HEADER + feature_table_markdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=None, help="Cache directory for labelled windows.")
    args = parser.parse_args()
    write_text(FEATURES_MD, features_markdown())
    rows = build_dataset(TRAIN_SCENARIOS, cache_dir=args.cache)
    model = fit_rca(rows, min_strength=MIN_TRAIN_STRENGTH)
    save_model_file(model, DEFAULT_MODEL_PATH)
    print(f"wrote {DEFAULT_MODEL_PATH} ({len(rows)} rows, depth {model.tree_.get_depth()}) and {FEATURES_MD}")


if __name__ == "__main__":
    main()
