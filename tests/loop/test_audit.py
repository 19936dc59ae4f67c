"""The audit log: append-only, torn-tail tolerant, and enough to rebuild cooldowns and in-flight patches."""

from __future__ import annotations

from pathlib import Path

from predictor.actuators.audit import AuditLog, AuditRecord, read_state, write_state
from predictor.atomicio import write_text


def record(
    outcome: str, queue: str = "team-a", cycle: str = "c1", unix: float = 100.0, mode: str = "apply"
) -> AuditRecord:
    return AuditRecord(
        timestamp="t",
        cycle=cycle,
        queue=queue,
        field="deserved",
        before=16.0,
        after=24.0,
        reason="r",
        mode=mode,
        outcome=outcome,
        resource="nvidia.com/gpu",
        unix=unix,
    )


def test_records_are_appended_and_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    assert log.append([record("intent"), record("applied")]) == 2
    with (tmp_path / "audit.jsonl").open("a") as f:
        f.write('{"cycle": "c2", "queue": "te')  # a crash mid-write
    assert [r["outcome"] for r in log.read()] == ["intent", "applied"]
    log.append([record("cycle-done")])
    assert [r["outcome"] for r in log.read()] == ["intent", "applied", "cycle-done"]
    assert [r["outcome"] for r in AuditLog(tmp_path / "audit.jsonl").read()] == ["intent", "applied", "cycle-done"]


def test_cooldowns_done_cycles_and_pending_intents_come_back_from_the_log(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append(
        [
            record("intent", unix=100),
            record("applied", unix=100),
            record("cycle-done", queue="*"),
            record("intent", queue="team-b", cycle="c2", unix=200),
            record("planned", queue="x", mode="plan"),
        ]
    )
    assert log.last_changed("apply") == {"team-a": 100.0}
    assert log.last_changed("plan") == {"x": 100.0}
    assert log.done_cycles() == {"c1"}
    assert [r["queue"] for r in log.pending_intents()] == ["team-b"]


def test_state_and_text_files_are_replaced_atomically(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    assert read_state(path) == {}
    write_state(path, {"memory": {"a": [[1.0, 2.0]]}})
    assert read_state(path) == {"memory": {"a": [[1.0, 2.0]]}}
    write_text(tmp_path / "d" / "x.txt", "hello")
    assert (tmp_path / "d" / "x.txt").read_text() == "hello"
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["x.txt"]  # no temp file left behind


def test_a_running_loop_answers_as_a_restarted_one_as_the_log_grows(tmp_path: Path) -> None:
    """The answers kept up to date record by record equal those of a fresh read, cycle after cycle, per cluster."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    batches = [
        [record("intent", unix=100), record("applied", unix=100), record("intent", queue="team-b", unix=100)],
        [
            record("cycle-done", queue="*"),
            record("held", queue="team-b"),
            record("planned", queue="x", mode="plan", unix=150),
        ],
        [
            record("intent", queue="team-b", cycle="c2", unix=200),
            record("applied", unix=300, cycle="c2"),
            record("abandoned", queue="team-b", unix=200),
        ],
    ]
    for batch in batches:
        log.append(batch)
        fresh = AuditLog(path)
        for mode in ("apply", "plan"):
            assert log.last_changed(mode) == fresh.last_changed(mode)
        assert log.done_cycles() == fresh.done_cycles()
        assert log.pending_intents() == fresh.pending_intents()
    assert log.last_changed("apply") == {"team-a": 300.0}
    assert log.done_cycles() == {"c1"}
    assert [(r["queue"], r["cycle"]) for r in log.pending_intents()] == [("team-b", "c2")]
    path.unlink()  # rotated away: nothing is remembered
    assert (log.last_changed("apply"), log.done_cycles(), log.pending_intents()) == ({}, set(), [])
