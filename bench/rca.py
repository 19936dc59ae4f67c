"""Root-cause trees held out by configuration family, per metric-family profile: macro-F1, top-1, false alarms.

Each profile (``models.rca_profiles``: ``dcgm-default`` is what dcgm-exporter and node_exporter export as
shipped) gets its own tree fitted with exactly its families (``models.rca_profiled``) and is scored on the
held-out windows as a site with that profile sees them (its absent families NaN). Causes a profile cannot
tell (held-out reach below ``MIN_REACH`` on the training families) are scored apart, as ``undiagnosable``:
``top1_strict`` counts them wrong, macro-F1 and top-1 leave them out.

For each family of simulator configurations (``pipelines.rca_configs.CONFIG_FAMILIES``: small clusters,
many queues, tight quotas, hot-but-healthy GPUs with noisy neighbours, 64-512 nodes, missing metric
families, ...) the tree is fitted on every *other* family and scored on this one, so no configuration it
is scored on was seen in training. Each held-out family is also scored with each droppable metric family
removed (its features NaN): the same numbers on windows with a family missing. The bundled
default model (trained on all families) is scored for reference. Labelled windows are cached per scenario.
Targets: macro-F1 and top-1 >= 0.9, healthy false alarms <= 2 %, with and without a family.

A row whose fault rests mostly on unmeasured evidence is answered ``insufficient_data``, as ``predictor
diagnose`` does (a missing family can make a cause undiagnosable: late in a long congestion nothing but TCP
counters differs from the window before). Such rows are scored apart: macro-F1 and top-1 are over answered
rows, ``insufficient`` is the share answered so, ``top1_strict`` counts them wrong, and the causes that
went unanswered are listed with their share. A cause that the tree trained without the missing family
cannot diagnose at all (fewer than half of its training rows reach a sure leaf of it, decided on the
training families only) is left out of macro-F1 and top-1 and listed under ``undiagnosable_rows``.

    python -m bench.rca [--cache DIR] [--window 15m] [--families small,large] [--profiles dcgm-default,everything]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from models.rca import RootCauseTree
from models.rca_eval import RcaReport, answers, evaluate
from models.rca_features import mark_not_applicable
from models.rca_profiled import blank, evaluate_profile, fit_profiled
from models.rca_profiles import DEFAULT_PROFILE, PROFILES
from models.rca_specs import features_of_family
from pipelines.rca_configs import CONFIG_FAMILIES, DROPPABLE, MISSING_SHARE, missing_groups
from pipelines.rca_data import MIN_TRAIN_STRENGTH, build_dataset
from predictor.diagnose.models import DEFAULT_MODEL_PATH, load_default
from predictor.timeparse import parse_duration


def _cache_default() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "gpu-capacity-predictor" / "rca-windows"


def _line(name: str, r: RcaReport, profile: str) -> dict[str, object]:
    return {
        "profile": profile,
        "held out": name,
        "rows": r.n_rows,
        "macro_f1": r.macro_f1,
        "top1": r.top1,
        "top3": r.top3,
        "false_alarms": r.false_alarm_rows,
        "insufficient": r.insufficient,
        "top1_strict": r.top1_strict,
    }


def _losses(r: RcaReport) -> str:
    """The largest confusions, ``true → predicted: rows``."""
    c = r.confusion
    counts = c.to_numpy(dtype=np.int64)
    pairs = [
        (str(c.index[i]), str(c.columns[j]), int(counts[i, j]))
        for i in range(c.shape[0])
        for j in range(c.shape[1])
        if c.index[i] != c.columns[j] and counts[i, j] > 0
    ]
    return ", ".join(f"{t} → {p}: {n}" for t, p, n in sorted(pairs, key=lambda x: -x[2])[:4]) or "none"


def _unanswered(r: RcaReport) -> str:
    by = r.insufficient_by_class[r.insufficient_by_class >= 0.05].sort_values(ascending=False)
    return ", ".join(f"{c} {v:.0%}" for c, v in by.items()) or "-"


def _apart(r: RcaReport) -> str:
    return ", ".join(f"{c} {n}" for c, n in r.undiagnosable.items()) or "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=_cache_default())
    parser.add_argument("--window", default="15m")
    parser.add_argument("--families", default="", help="comma-separated families to hold out (default: all)")
    parser.add_argument("--profiles", default=DEFAULT_PROFILE, help=f"comma-separated, of: {', '.join(PROFILES)}")
    args = parser.parse_args()
    profiles = [p for p in args.profiles.split(",") if p]
    unknown = [p for p in profiles if p not in PROFILES]
    if unknown or not profiles:
        parser.error(f"--profiles {args.profiles}: known profiles are {', '.join(PROFILES)}")
    window = parse_duration(args.window, name="--window")
    pd.set_option("display.width", 220)
    pd.set_option("display.max_columns", 30)
    t0 = time.perf_counter()
    data = {name: build_dataset(group, window, cache_dir=args.cache) for name, group in CONFIG_FAMILIES.items()}
    t1 = time.perf_counter()
    print("## Configuration families")
    for name, group in CONFIG_FAMILIES.items():
        print(f"{name:17s} {len(data[name]):6,d} rows  {', '.join(s.name for s in group)}")
    print(
        f"data {t1 - t0:.1f} s; windows {args.window}; training masks one family group on "
        f"{MISSING_SHARE:.0%} extra rows; faults weaker than {MIN_TRAIN_STRENGTH} left out of training"
    )

    held = [f for f in args.families.split(",") if f] or list(CONFIG_FAMILIES)
    lines, missing_lines, preds = [], [], []
    losses: dict[str, str] = {}
    for name in held:
        train = pd.concat([d for n, d in data.items() if n != name], ignore_index=True)
        # Fewer pruning candidates and folds than the default model's (8 fits per family, not 1): same tree
        # family, a fifth of the time.
        model = fit_profiled(
            train,
            profiles={p: PROFILES[p] for p in profiles},
            min_strength=MIN_TRAIN_STRENGTH,
            missing_groups=missing_groups(),
            missing_share=MISSING_SHARE,
            model=RootCauseTree(cv=3, n_alphas=6),
        )
        test = data[name]
        for profile in profiles:
            tree, blind = model.models[profile], model.cannot_tell(profile)
            report = evaluate_profile(model, test, profile)
            lines.append({**_line(name, report, profile), "cannot_tell": ", ".join(blind) or "-"})
            losses[f"{profile} {name}"] = _losses(report)
            seen = blank(test, PROFILES[profile])
            preds.append(seen.assign(pred=answers(tree, seen[list(tree.feature_names_in_)]), profile=profile))
            for dropped in DROPPABLE:
                if set(dropped) <= PROFILES[profile].absent:
                    continue  # the profile never has it: nothing more goes missing
                cols = sorted({f for fam in dropped for f in features_of_family(fam)})
                masked = mark_not_applicable(seen.assign(**{c: float("nan") for c in cols}))
                scored = evaluate(tree, masked)
                short = "+".join(g.replace("volcano_queue_", "vq_").replace("DCGM_FI_DEV_", "") for g in dropped)
                missing_lines.append(
                    {
                        **_line(name, scored, profile),
                        "missing": short,
                        "insufficient_by_cause": _unanswered(scored),
                        "undiagnosable_rows": _apart(scored),
                    }
                )
        print(f"  {name}: fitted and scored ({time.perf_counter() - t1:.0f} s so far)", flush=True)
    t2 = time.perf_counter()
    table = pd.DataFrame(lines).sort_values(["profile", "macro_f1"])
    print(f"\n## Held out by configuration family, per profile, worst first (fit + score {t2 - t1:.1f} s)")
    print(table.round(3).to_string(index=False))
    print("\n## Per profile, mean over held-out families")
    means = ["top1_strict", "top1", "macro_f1", "false_alarms", "insufficient"]
    print(table.groupby("profile")[means].mean().round(3).to_string())
    print("\nWhere each held-out family loses (largest confusions, true → predicted: rows)")
    for profile, name in zip(table["profile"], table["held out"], strict=True):
        print(f"  {profile:22s} {name:17s} {losses[f'{profile} {name}']}")
    missing = pd.DataFrame(missing_lines).sort_values("macro_f1")
    print("\n## Same, with one metric family missing from the held-out windows (every pair, worst first)")
    print(missing.round(3).to_string(index=False))
    print(
        f"\nover all {len(missing)} (family, missing) pairs: macro-F1 min {missing['macro_f1'].min():.3f} "
        f"median {missing['macro_f1'].median():.3f}; top-1 min {missing['top1'].min():.3f}; "
        f"false alarms max {missing['false_alarms'].max():.3f}; insufficient_data max "
        f"{missing['insufficient'].max():.3f}; top-1 strict min {missing['top1_strict'].min():.3f}"
    )
    pooled = pd.concat(preds, ignore_index=True)
    for profile in profiles:
        mine = pooled[pooled["profile"] == profile]
        print(f"\n## Confusion matrix, {profile}, all held-out families pooled (rows: true, columns: predicted)")
        print(pd.crosstab(mine["label"], mine["pred"]).rename(columns=lambda c: c[:8]).to_string())
    if DEFAULT_MODEL_PATH.is_file():
        every = pd.concat(data.values(), ignore_index=True)
        shipped = load_default()
        for profile in [p for p in profiles if p in shipped.models]:
            b = evaluate_profile(shipped, every, profile)
            print(
                f"\n## Bundled default model, {profile} (all families, seen in its training, not held out): "
                f"macro-F1 {b.macro_f1:.3f}, top-1 {b.top1:.3f}, top-1 strict {b.top1_strict:.3f}, "
                f"false alarms {b.false_alarm_rows:.3f}"
            )


if __name__ == "__main__":
    main()
