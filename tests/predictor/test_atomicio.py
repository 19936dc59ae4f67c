"""The one atomic writer: whole content or the old file, never a temp file left behind, file and directory synced."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pandas as pd
import pytest

from predictor.atomicio import atomic_open, atomic_path, write_bytes, write_text
from predictor.errors import InputError


class BoomError(Exception):
    pass


class SyncLog:
    """An ``fsync`` that really syncs and remembers what kind of object each descriptor was."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def __call__(self, fd: int) -> None:
        self.kinds.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        os.fsync(fd)


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_write_text_writes_the_whole_content_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "out" / "sub" / "a.csv"  # missing parents are created, as every writer did before
    text = "a,b\r\n1,ü\n" * 10_000
    assert write_text(path, text) == path
    assert path.read_bytes() == text.encode("utf-8")
    assert write_bytes(path, b"\x00\x01") == path
    assert path.read_bytes() == b"\x00\x01"
    assert names(path.parent) == ["a.csv"]


def test_the_file_then_its_directory_are_synced(tmp_path: Path) -> None:
    log = SyncLog()
    write_text(tmp_path / "a.txt", "x", fsync=log)
    assert log.kinds == ["file", "dir"]  # data durable before the rename, the rename durable after it
    log = SyncLog()
    with atomic_path(tmp_path / "b.parquet", fsync=log) as tmp:
        pd.DataFrame({"v": [1.0]}).to_parquet(tmp)
    assert log.kinds == ["file", "dir"]
    assert pd.read_parquet(tmp_path / "b.parquet")["v"].tolist() == [1.0]


@pytest.mark.parametrize("how", ["open", "path"])
def test_a_failure_inside_the_block_leaves_the_old_file_and_no_temp(tmp_path: Path, how: str) -> None:
    path = tmp_path / "state.json"
    path.write_text("old", encoding="utf-8")
    log = SyncLog()
    with pytest.raises(BoomError):
        if how == "open":
            with atomic_open(path, "w", fsync=log) as handle:
                handle.write("new, but only half")
                raise BoomError
        else:
            with atomic_path(path, fsync=log) as tmp:
                tmp.write_text("new, but only half", encoding="utf-8")
                raise BoomError
    assert path.read_text(encoding="utf-8") == "old"
    assert names(tmp_path) == ["state.json"]
    assert log.kinds == []  # nothing was committed


def test_a_failure_on_a_new_file_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(BoomError), atomic_open(tmp_path / "x.om", "wb") as handle:
        handle.write(b"# TYPE")
        raise BoomError
    assert names(tmp_path) == []


def test_a_failing_fsync_aborts_before_the_rename(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text("old", encoding="utf-8")

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError, match="Input/output"):
        write_text(path, "new", fsync=broken)
    assert path.read_text(encoding="utf-8") == "old"
    assert names(tmp_path) == ["plan.json"]


def test_a_directory_target_or_a_file_parent_is_a_clear_input_error(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(InputError, match=r"cannot write .*out: it is a directory"):
        write_text(tmp_path / "out", "x")
    (tmp_path / "file").write_text("keep", encoding="utf-8")
    with pytest.raises(InputError, match=r"cannot write .*file.x\.csv: .*file is not a directory"):
        write_text(tmp_path / "file" / "x.csv", "x")
    assert names(tmp_path) == ["file", "out"]
    assert names(tmp_path / "out") == []


def test_permissions_new_file_follows_umask_existing_file_keeps_its_bits(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        new = write_text(tmp_path / "new.txt", "x")
        assert stat.S_IMODE(new.stat().st_mode) == 0o640  # what a plain open() would give
        kept = tmp_path / "kept.txt"
        kept.write_text("old", encoding="utf-8")
        kept.chmod(0o604)
        write_text(kept, "new")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o604
        forced = write_text(tmp_path / "forced.txt", "x", permissions=0o644)
        assert stat.S_IMODE(forced.stat().st_mode) == 0o644
    finally:
        os.umask(old)


def test_atomic_open_text_mode_is_utf8_and_appending_is_refused(tmp_path: Path) -> None:
    with atomic_open(tmp_path / "t.md", "w") as handle:
        handle.write("π\n")
    assert (tmp_path / "t.md").read_bytes() == "π\n".encode()
    with pytest.raises(ValueError, match="whole files"):
        atomic_open(tmp_path / "t.md", "a")  # type: ignore[call-overload]


def test_no_other_module_rolls_its_own_atomic_write() -> None:
    """One recipe: a second temp-and-rename writer would drift from it (fsync, clean-up, permissions)."""
    root = Path(__file__).resolve().parents[2]
    own = re.compile(r"mkstemp\(|NamedTemporaryFile|os\.replace\(|os\.rename\(|\.tmp\"")
    offenders = [
        f"{path.relative_to(root)}:{number}"
        for package in ("predictor", "pipelines", "models")
        for path in sorted((root / package).rglob("*.py"))
        if path.name != "atomicio.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if own.search(line)
    ]
    assert offenders == []


def test_an_unwritable_location_is_one_clear_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # root ignores the mode bits; /proc refuses everyone
            target = Path("/proc/self/no-such-dir/out.csv")
        else:
            target = locked / "out.csv"
        with pytest.raises(InputError, match=r"^cannot write .*out\.csv: "):
            write_text(target, "x")
    finally:
        locked.chmod(0o700)


def test_write_texts_skips_unchanged_files_and_syncs_each_directory_once(tmp_path: Path) -> None:
    from predictor.atomicio import write_texts

    synced: list[int] = []

    def counting(fd: int) -> None:
        synced.append(fd)
        os.fsync(fd)

    a, b = tmp_path / "q" / "a.yaml", tmp_path / "q" / "b.yaml"
    assert write_texts({a: "one\n", b: "two\n"}, fsync=counting) == [a, b]
    assert (a.read_text(), b.read_text()) == ("one\n", "two\n")
    assert len(synced) == 3  # two files, one directory
    inode = a.stat().st_ino
    synced.clear()
    assert write_texts({a: "one\n", b: "TWO\n"}, fsync=counting) == [b]  # a is unchanged: left alone
    assert a.stat().st_ino == inode and b.read_text() == "TWO\n"
    assert len(synced) == 2
    assert not [p for p in (tmp_path / "q").iterdir() if p.name.endswith(".tmp")]


def test_write_texts_memo_skips_reads_of_unchanged_files_and_sees_edits(tmp_path: Path) -> None:
    """With a memo an unchanged file is neither read nor rewritten; a file edited or replaced since is rewritten."""
    from predictor.atomicio import write_texts

    memo: dict[Path, tuple[tuple[int, int, int, int], bytes]] = {}
    a, b, c = (tmp_path / f"{n}.yaml" for n in "abc")
    assert write_texts({a: "one\n", b: "two\n", c: "three\n"}, memo=memo) == [a, b, c]
    assert set(memo) == {a, b, c}
    b.write_text("hand edit\n")  # in place: same inode, another size and ctime
    c.unlink()
    c.write_text("three\n")  # replaced by equal bytes: read, found equal, left alone
    assert write_texts({a: "one\n", b: "two\n", c: "three\n"}, memo=memo) == [b]
    assert (a.read_text(), b.read_text(), c.read_text()) == ("one\n", "two\n", "three\n")
    assert write_texts({a: "uno\n"}, memo=memo) == [a]  # new bytes are written whatever the memo says
    assert set(memo) == {a}  # the memo holds the last call's files only


def test_child_paths_refuses_a_link_leading_out(tmp_path: Path) -> None:
    from predictor.atomicio import child_paths

    out = tmp_path / "out"
    out.mkdir()
    (out / "evil.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    assert child_paths(out, ["a.yaml", "b.yaml"]) == [out / "a.yaml", out / "b.yaml"]
    for bad in ("evil.yaml", "../x.yaml", "", "a/b"):
        with pytest.raises(InputError):
            child_paths(out, ["a.yaml", bad])


def test_write_texts_renames_nothing_when_one_sync_fails(tmp_path: Path) -> None:
    """The files are synced concurrently: one failure still leaves every target as it was, and no temp file."""
    from predictor.atomicio import write_texts

    paths = [tmp_path / f"{i}.yaml" for i in range(12)]
    for path in paths:
        path.write_text("old\n")
    calls: list[int] = []

    def failing(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 5:
            raise OSError(5, "Input/output error")

    with pytest.raises(OSError, match="Input/output error"):
        write_texts({path: "new\n" for path in paths}, fsync=failing)
    assert [p.read_text() for p in paths] == ["old\n"] * 12
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)


def test_write_texts_writes_nothing_when_one_target_is_a_directory(tmp_path: Path) -> None:
    from predictor.atomicio import write_texts

    (tmp_path / "b.yaml").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        write_texts({tmp_path / "a.yaml": "one\n", tmp_path / "b.yaml": "two\n"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.yaml"]
