"""Root cause on an independent fault model: trained on the training simulator's faults, scored on others.

``bench.rca`` holds out simulator *configurations*, but its faults always come from the training simulator
(``predictor.sim.faults``), so the tree is scored on the signatures it learned. Here the test faults come
from ``bench.rca_faults`` / ``bench.rca_inject``: other magnitudes and onsets (ramps, bursts), partial GPUs,
XID codes never trained on, partial quota cuts, NotReady nodes whose exporters keep answering, overlapping
faults, NVLink cascades (link errors → hang → restart storm), windows a fault covers only partly and the
peers of a hung gang, on clusters of other seeds and sizes, with healthy look-alikes.

Per availability profile (``models.rca_profiles``) the model has one tree fitted with exactly that profile's
features (``models.rca_profiled.fit_profiled``): by default the bundled model ``predictor diagnose`` serves
(``--model bundled``; fitted on all the training scenarios), or one fitted anew on this run's training rows
(``--model fit``). Each is scored with: macro-F1, strict top-1 (``insufficient_data``
wrong), node scope (the first finding names the right node) and the healthy false-alarm rate, each with a
bootstrap 95 % interval over windows (``bench.rca_scoring``). Beside it, the one-threshold-per-cause rules
(``bench.rca_rules``) fitted on the same training rows. Goals for ``dcgm-default``: strict top-1 >= 0.9,
node scope >= 0.8, healthy false alarms <= 2 %. Beside them, each profile's evidence ceiling (``ceiling``): the
strict top-1 and scope-with-cause a model reaches if it is right wherever the profile can see the cause and wrong
elsewhere. For reference, the same trees are also scored on a held-out scenario of the training simulator's own
faults. The report is cached by its settings, the scoring code and the bundled model file.

    python -m bench.rca_independent [--size reduced|default] [--model bundled|fit] [--seeds 9001,9002]
                                    [--profiles dcgm-default,everything]
                                    [--cache DIR] [--refresh] [--boot 300] [--no-reference]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from bench.forecast_cache import REPO, code_digest
from bench.rca import _cache_default
from bench.rca_indata import FORMAT, independent_rows, independent_scenarios
from bench.rca_rules import CANDIDATES, fit_rules, signal_families
from bench.rca_scoring import Scores, scope_table, score
from models.rca import HEALTHY, INSUFFICIENT, RootCauseTree
from models.rca_eval import answers
from models.rca_evidence import EVIDENCE
from models.rca_features import FEATURE_NAMES, mark_not_applicable
from models.rca_profiled import ProfiledRca, evaluate_profile, fit_profiled
from models.rca_profiles import DEFAULT_PROFILE, PROFILES, Profile
from pipelines.rca_configs import CONFIG_FAMILIES, MISSING_SHARE, missing_groups
from pipelines.rca_data import HELDOUT_SCENARIOS, MIN_TRAIN_STRENGTH, build_dataset
from predictor.diagnose.models import DEFAULT_MODEL_PATH, load_default
from predictor.errors import InputError
from predictor.timeparse import parse_duration

SIZES: dict[str, dict[str, Any]] = {
    # reduced: one scenario of each training family but the 64-512-node one; three independent clusters
    "reduced": {"train": "first", "seeds": 3, "nodes": (6, 10, 16), "days": 0.5},
    "default": {"train": "all", "seeds": 8, "nodes": (4, 6, 8, 12, 16, 24, 10, 32), "days": 0.5},
}
GOALS = {"top1_strict": 0.9, "node_scope": 0.8, "false_alarms": 0.02}


def masked(rows: pd.DataFrame, profile: Profile) -> pd.DataFrame:
    """``rows`` as a site with ``profile`` sees them: the features it cannot measure are NaN."""
    cols = [c for c in profile.absent_features if c in rows.columns]
    return mark_not_applicable(rows.assign(**{c: np.nan for c in cols}))


def tree_answers(model: RootCauseTree, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    X = rows[list(model.feature_names_in_)]
    return answers(model, X), model.predict_proba(X).max(axis=1)


def _training_scenarios(which: str) -> list[Any]:
    if which == "first":
        return [group[0] for name, group in CONFIG_FAMILIES.items() if name != "large"]
    return [s for group in CONFIG_FAMILIES.values() for s in group]


def _per_cause(rows: pd.DataFrame, shown: np.ndarray, rule_shown: np.ndarray, scope: pd.DataFrame) -> pd.DataFrame:
    y = rows["label"].to_numpy()
    out = []
    for cause in sorted(set(y) - {HEALTHY}):
        hit = y == cause
        pred = pd.Series(shown[hit])
        wrong = pred[pred != cause].value_counts()
        sc = scope[scope["cause"] == cause] if len(scope) else scope
        out.append(
            {
                "cause": cause,
                "rows": int(hit.sum()),
                "tree": float((shown[hit] == cause).mean()),
                "rules": float((rule_shown[hit] == cause).mean()),
                "insufficient": float((shown[hit] == INSUFFICIENT).mean()),
                "scope": float(sc["right"].mean()) if len(sc) else np.nan,
                "mostly_answered": ", ".join(f"{c} {n / hit.sum():.0%}" for c, n in wrong.head(2).items()) or "-",
            }
        )
    return pd.DataFrame(out)


def _blind(per_cause: pd.DataFrame, profile: Profile) -> list[str]:
    """Causes the profile's tree mostly misses, what it takes them for, and which missing family carries them."""
    lines = []
    for r in per_cause[per_cause["tree"] < 0.5].itertuples(index=False):
        absent = [f for f in signal_families(str(r.cause)) if f in profile.absent]
        why = (
            f"its own signal ({CANDIDATES[str(r.cause)][0][0]}) needs {', '.join(absent)}, absent here"
            if absent
            else "its signal is measured here: the independent faults look unlike the training ones"
        )
        lines.append(f"  {r.cause}: {r.tree:.0%} right, answered {r.mostly_answered}; {why}")
    return lines or ["  every cause >= 50 % right"]


# Evidence that is an event: a row shows it only where it happened (no XID reported is no evidence at all).
EVENT_FEATURES = frozenset({"xid_nvlink", "xid_max", "ecc_dbe_increase"})


def evidence_shown(rows: pd.DataFrame, profile: Profile) -> np.ndarray:
    """Per row: can a site with ``profile`` see the row's cause there at all? False for the peers of a hung
    gang (their own node shows nothing), where every symptom the cause's own evidence lists
    (``models.rca_evidence``) is unmeasured, or where the measured ones are events (an XID, an ECC error) the
    row does not show. A measured level (a temperature, a retransmit ratio) counts as seen whatever its
    value: a ceiling, not a detector. Healthy rows are True."""
    missing = sorted({"label", "role"} - set(rows.columns))
    unknown = sorted(set(rows["label"].astype(str)) - set(EVIDENCE) - {HEALTHY}) if not missing else []
    if missing or unknown:
        raise ValueError(f"evidence_shown: rows lack {missing or 'nothing'}; causes without evidence: {unknown}")
    out = (rows["role"] != "peer").to_numpy().copy()
    labels = rows["label"].to_numpy()
    for cause, symptoms in EVIDENCE.items():
        here = labels == cause
        measured = [f for f, _ in symptoms if f not in profile.absent_features]
        if not here.any() or any(f not in EVENT_FEATURES for f in measured):
            continue
        seen = np.zeros(int(here.sum()), dtype=bool)
        for f in measured:
            seen |= rows.loc[here, f].fillna(0).to_numpy() > 0
        out[here] &= seen
    return out


def ceiling(rows: pd.DataFrame, profile: Profile) -> tuple[float, float]:
    """Strict top-1 and node scope with the right cause (``scope_cause``) when every fault row whose cause
    ``profile`` cannot see (``evidence_shown``) is wrong and every other right; NaN where there is nothing to
    score. A node-scope window (one per fault and window, queue faults aside, as ``bench.rca_scoring``) counts
    when one of its culprit rows shows the cause. Plain node scope is not bounded by it: a model may name the
    right node with a wrong cause."""
    shown = evidence_shown(rows, profile)
    fault = (rows["label"] != HEALTHY).to_numpy()
    top1 = float(shown[fault].mean()) if fault.any() else float("nan")
    scoped = rows.assign(shown=shown)[fault & (rows["label"] != "scheduling_starvation").to_numpy()]
    scoped = scoped[scoped["role"].fillna("") != ""]
    if scoped.empty:
        return top1, float("nan")
    per_window = scoped.assign(ok=scoped["shown"] & (scoped["role"] == "culprit"))
    return top1, float(per_window.groupby(["scenario", "at", "fault_id"])["ok"].any().mean())


def _model(which: str, train: pd.DataFrame, names: list[str]) -> ProfiledRca:
    """``bundled``: the model ``predictor diagnose`` serves (fitted by ``pipelines.rca_default`` on the same
    training scenarios as ``--size default``); ``fit``: the same fit on this run's training rows."""
    if which == "bundled":
        model = load_default()
        lacking = [n for n in names if n not in model.models]
        if lacking:
            sys.exit(f"error: --model bundled: the bundled model has no tree for {', '.join(lacking)}")
        return model
    return fit_profiled(
        train,
        profiles={n: PROFILES[n] for n in names},
        min_strength=MIN_TRAIN_STRENGTH,
        missing_groups=missing_groups(),
        missing_share=MISSING_SHARE,
    )


def run(args: argparse.Namespace) -> None:
    size = SIZES[args.size]
    window = parse_duration(args.window, name="--window")
    seeds = [int(s) for s in args.seeds.split(",") if s] or [9001 + i for i in range(size["seeds"])]
    names = [p for p in args.profiles.split(",") if p] or list(PROFILES)
    t0 = time.perf_counter()
    print(f"## Data (size {args.size}, window {args.window})", flush=True)
    train_scen = _training_scenarios(size["train"])
    train = build_dataset(train_scen, window, cache_dir=args.cache)
    print(f"training: {len(train):,d} rows from {len(train_scen)} training-simulator scenarios", flush=True)
    scen = independent_scenarios(seeds, size["nodes"], size["days"])
    test = independent_rows(scen, window, args.cache / "independent", progress=lambda s: print(s, flush=True))
    fault = test[test["label"] != HEALTHY]
    print(
        f"independent: {len(test):,d} rows ({len(fault):,d} fault rows: {(fault['role'] == 'peer').sum()} peers, "
        f"{(fault['cover'] < 0.5).sum()} covered < 50 %, {(fault['phase'] != '').sum()} in cascades) "
        f"({time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    model = _model(args.model, train, names)
    print(f"{args.model} model: {len(names)} profile trees ({time.perf_counter() - t0:.0f} s)", flush=True)
    lines, per_profile, blind = [], {}, {}
    for name in names:
        profile = PROFILES[name]
        seen = masked(test, profile)
        shown, prob = tree_answers(model.models[name], seen)
        rules = fit_rules(masked(train, profile), absent=profile.absent_features, min_strength=MIN_TRAIN_STRENGTH)
        r_shown, r_score = rules.answer(seen)
        tree_s: Scores = score(seen, shown, prob, n_boot=args.boot)
        rule_s: Scores = score(seen, r_shown, r_score, n_boot=args.boot)
        answered = evaluate_profile(model, test, name)
        for who, s in (("tree", tree_s), ("rules", rule_s)):
            lines.append(
                {
                    "profile": name,
                    "model": who,
                    **{m: s.cell(m) for m in ("top1_strict", "node_scope", "false_alarms", "macro_f1", "scope_cause")},
                    "f1_answered": f"{answered.macro_f1:.3f}" if who == "tree" else "",
                }
            )
        scope = scope_table(seen, shown, prob)
        per_profile[name] = (_per_cause(seen, shown, r_shown, scope), scope, tree_s, rules, shown, r_shown)
        blind[name] = _blind(per_profile[name][0], profile)
        print(f"  {name}: scored ({time.perf_counter() - t0:.0f} s)", flush=True)
    _report(pd.DataFrame(lines), per_profile, blind, test, names)
    if args.reference:
        _reference(model, names, window, args)


def _reference(model: ProfiledRca, names: list[str], window: pd.Timedelta, args: argparse.Namespace) -> None:
    """The same trees on a held-out scenario of the training simulator's own faults: the gap to the table above
    is what the independent fault model costs. Node scope needs fault identities, which that data lacks."""
    ref = build_dataset(HELDOUT_SCENARIOS[:1], window, cache_dir=args.cache)
    ref = ref.assign(role=np.where(ref["label"] == HEALTHY, "", "culprit"), fault_id=-1, scenario=ref["scenario"])
    print(f"\n## Reference: the same trees on the training simulator's faults ({HELDOUT_SCENARIOS[0].name}, held out)")
    for name in names:
        seen = masked(ref, PROFILES[name])
        shown, prob = tree_answers(model.models[name], seen)
        s = score(seen, shown, prob, n_boot=args.boot)
        cells = ", ".join(f"{m} {s.cell(m)}" for m in ("top1_strict", "false_alarms", "macro_f1"))
        print(f"  {name}: {cells} ({s.n_fault_rows} fault rows)")


def _report(
    table: pd.DataFrame, per_profile: dict[str, Any], blind: dict[str, list[str]], test: pd.DataFrame, names: list[str]
) -> None:
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.max_colwidth", 80)
    head = DEFAULT_PROFILE if DEFAULT_PROFILE in names else names[0]
    print(
        f"\n## {head}: score [bootstrap 95 % interval over windows]; goals: top-1 strict >= 0.9, "
        "node scope >= 0.8, false alarms <= 0.02"
    )
    print(table[table["profile"] == head].drop(columns="profile").to_string(index=False))
    tree_s = per_profile[head][2]
    pc = per_profile[head][0]
    seen_ok = pc[[not set(signal_families(str(c))) & PROFILES[head].absent for c in pc["cause"]]]
    print(
        f"tree top-1 strict over the causes whose own signal {head} measures "
        f"({len(seen_ok)} of {len(pc)}): {(seen_ok['tree'] * seen_ok['rows']).sum() / seen_ok['rows'].sum():.3f}; "
        f"rules {(seen_ok['rules'] * seen_ok['rows']).sum() / seen_ok['rows'].sum():.3f}"
    )
    print(
        f"rows: {tree_s.n_fault_rows} fault, {tree_s.n_healthy_rows} healthy; "
        f"{tree_s.n_scope} fault windows scored for node scope; tree: "
        + "; ".join(
            f"{m} {'met' if (tree_s.point[m] <= g if m == 'false_alarms' else tree_s.point[m] >= g) else 'missed'}"
            for m, g in GOALS.items()
        )
    )
    print(
        "evidence ceiling (the rows whose cause's own evidence a profile cannot see counted wrong, every other "
        "right): "
        + "; ".join(
            f"{n} top-1 strict {t:.3f}, scope+cause {c:.3f}" for n in names for t, c in [ceiling(test, PROFILES[n])]
        )
    )
    print("\n## Per availability profile (same columns)")
    print(table.to_string(index=False))
    print(f"\n## {head}: per cause (share of fault rows right, tree and rules; node scope of its fault windows)")
    print(per_profile[head][0].round(3).to_string(index=False))
    scope = per_profile[head][1]
    if len(scope):
        print(f"\n## {head}: node scope by cause: what the first finding named (a culprit, a waiting peer, nothing)")
        roles = pd.crosstab(scope["cause"], scope["named_role"], normalize="index").round(2)
        print(roles.to_string())
    print(f"\n## {head}: strict top-1 by how the fault shows (share right, rows)")
    shown = per_profile[head][4]
    fault_rows = test["label"] != HEALTHY
    right = pd.Series(shown == test["label"].to_numpy())[fault_rows.to_numpy()]
    f = test[fault_rows].assign(right=right.to_numpy())
    f = f.assign(cover=np.where(f["cover"] >= 0.5, ">= 50 %", "< 50 %"), cascade=f["phase"].replace("", "-"))
    for key in ("role", "cover", "shape", "cascade", "n_gpus"):
        print(f"  {key:8s} " + ", ".join(f"{k}: {v.mean():.2f} ({len(v)})" for k, v in f.groupby(key)["right"]))
    healthy = (test["label"] == HEALTHY).to_numpy()
    alarms = pd.Series(per_profile[head][5][healthy]).value_counts() / healthy.sum()
    rules = {r.cause: r for r in per_profile[head][3].rules}
    print(
        f"\n## {head}: the rules' false alarms by the rule that fired (share of healthy rows; threshold from training)"
    )
    for cause, share in alarms.drop(HEALTHY, errors="ignore").head(6).items():
        r = rules[str(cause)]
        print(f"  {cause}: {share:.3f} ({r.feature} {r.op} {r.threshold:.3g})")
    print("\n## Causes each profile's tree cannot tell apart (< 50 % of their rows right), and why")
    for name in names:
        print(f"{name}:")
        print("\n".join(blind[name]))


def _code_state() -> str:
    """What a cached report depends on besides its flags: the scoring code and the bundled model file."""
    return (
        code_digest(REPO, ("bench", "models", "pipelines", "predictor/diagnose"))
        + hashlib.sha256(DEFAULT_MODEL_PATH.read_bytes() if DEFAULT_MODEL_PATH.is_file() else b"").hexdigest()[:12]
    )


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, not the usage block: ``error: argument --model: invalid choice: 'x' (...)``."""
        self.exit(2, f"error: {message}\n")


def main(argv: list[str] | None = None) -> None:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="reduced")
    parser.add_argument("--seeds", default="", help="comma-separated seeds of the independent clusters")
    parser.add_argument(
        "--profiles", default="", help=f"comma-separated profiles (default: all of {', '.join(PROFILES)})"
    )
    parser.add_argument("--cache", type=Path, default=_cache_default())
    parser.add_argument(
        "--model",
        choices=("bundled", "fit"),
        default="bundled",
        help="bundled: score the model predictor diagnose serves; fit: fit it anew on this run's training rows",
    )
    parser.add_argument("--window", default="15m")
    parser.add_argument("--boot", type=int, default=300, help="bootstrap resamples")
    parser.add_argument(
        "--no-reference", dest="reference", action="store_false", help="skip the training-simulator reference"
    )
    parser.add_argument("--refresh", action="store_true", help="recompute even if this report is cached")
    args = parser.parse_args(argv)
    # Bad input: one line, no traceback (checked before anything is built or cached).
    try:
        parse_duration(args.window, name="--window")
        if any(int(x) < 0 for x in args.seeds.split(",") if x):
            raise ValueError("a negative seed")
    except InputError as exc:
        sys.exit(f"error: {exc}")
    except ValueError:
        sys.exit(f"error: --seeds {args.seeds!r}: expected comma-separated integers >= 0")
    unknown = [p for p in args.profiles.split(",") if p and p not in PROFILES]
    if unknown:
        sys.exit(f"error: --profiles: unknown {', '.join(unknown)} (known: {', '.join(PROFILES)})")
    if args.boot < 1:  # checked now: the bootstrap would fail only after the whole run
        sys.exit(f"error: --boot {args.boot}: at least one bootstrap resample")
    key = hashlib.sha256(
        repr((vars(args) | {"cache": "", "refresh": False}, sorted(FEATURE_NAMES), FORMAT, _code_state())).encode()
    ).hexdigest()[:16]
    path = args.cache / "independent-reports" / f"{key}.txt"
    if path.is_file() and not args.refresh:
        print(f"(cached report {path})")
        print(path.read_text(), end="")
        return
    buffer = io.StringIO()

    class Tee(io.TextIOBase):
        def write(self, s: str) -> int:
            sys.__stdout__.write(s)  # type: ignore[union-attr]
            sys.__stdout__.flush()  # type: ignore[union-attr]
            return buffer.write(s)

    with redirect_stdout(Tee()):
        run(args)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buffer.getvalue())


if __name__ == "__main__":
    main()
