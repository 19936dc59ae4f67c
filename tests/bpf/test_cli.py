"""``predictor xdp …`` end to end as root: the lifecycle leaves nothing behind, and every bad input is
one line on stderr, exit 1, with nothing attached or pinned."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from predictor.cli import main

pytestmark = pytest.mark.root


def write_profile(path: Path, name: str, weights: dict[str, int], observe: bool = False) -> Path:
    path.write_text(json.dumps({"name": name, "weights": weights, "observe": observe}))  # JSON is YAML
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["xdp", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def bpftool_json(*args: str) -> list[dict]:
    return json.loads(subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True, check=True).stdout)


def test_load_status_switch_unload_leaves_nothing(
    capsys: pytest.CaptureFixture[str], bpffs: Path, dummies: tuple, tmp_path: Path, bpf_objects: dict
) -> None:
    front, targets = dummies
    pin = bpffs / "lb"
    even = write_profile(tmp_path / "even.yaml", "even", {t: 1 for t in targets[:2]})
    skew = write_profile(tmp_path / "skew.yaml", "skew", {targets[0]: 1, targets[1]: 3})
    rc, out, err = run(capsys, "load", "--iface", front, "--targets", ",".join(targets[:2]), "--pin-dir", str(pin),
                       "--mode", "skb", "--profile", str(even))
    assert rc == 0, err
    rc, out, err = run(capsys, "status", "--pin-dir", str(pin), "--json")
    status = json.loads(out)
    assert status["active_profile"] == "even"
    assert status["targets"] == targets[:2]
    assert status["weights"] == {targets[0]: 1, targets[1]: 1}
    assert set(status["stats"]) == set(targets[:2]) and "passed" in status and "unparsed" in status
    prog_id = status["prog_id"]

    rc, out, err = run(capsys, "set-profile", "--pin-dir", str(pin), "--profile", str(skew))
    assert rc == 0 and "switched even → skew" in out
    rc, out, _ = run(capsys, "set-profile", "--pin-dir", str(pin), "--profile", str(skew))
    assert rc == 0 and "already converged" in out  # idempotent
    rc, out, _ = run(capsys, "status", "--pin-dir", str(pin), "--json")
    assert json.loads(out)["weights"] == {targets[0]: 1, targets[1]: 3}

    rc, out, err = run(capsys, "upgrade", "--pin-dir", str(pin), "--object", str(bpf_objects["lb"]))
    assert rc == 0, err
    after = json.loads(run(capsys, "status", "--pin-dir", str(pin), "--json")[1])
    assert after["prog_id"] != prog_id and after["active_profile"] == "skew"  # maps kept across the upgrade

    rc, out, err = run(capsys, "unload", "--pin-dir", str(pin))
    assert rc == 0, err
    assert not pin.exists()
    ids = {prog_id, after["prog_id"]}
    # The kernel frees a program after an RCU grace period, so poll (bounded) rather than look once.
    deadline = time.monotonic() + 10
    while any(p["id"] in ids for p in bpftool_json("prog", "show")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(p["id"] not in ids for p in bpftool_json("prog", "show"))
    assert all(link.get("prog_id") not in ids for link in bpftool_json("link", "show"))
    link = json.loads(subprocess.run(["ip", "-j", "link", "show", "dev", front], capture_output=True, text=True).stdout)
    assert "xdp" not in link[0]


def assert_one_line_error(rc: int, err: str, *needles: str) -> None:
    assert rc == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize("which", ["iface", "target"])
def test_missing_interface(capsys: pytest.CaptureFixture[str], bpffs: Path, dummies: tuple, which: str) -> None:
    front, targets = dummies
    iface, tgts = (("gcpxnope0", targets[0]) if which == "iface" else (front, f"{targets[0]},gcpxnope1"))
    rc, _, err = run(capsys, "load", "--iface", iface, "--targets", tgts, "--pin-dir", str(bpffs / "lb"))
    assert_one_line_error(rc, err, "no such", "gcpxnope")
    assert list(bpffs.iterdir()) == [] or not (bpffs / "lb").exists()


def test_profile_naming_an_unknown_target(
    capsys: pytest.CaptureFixture[str], bpffs: Path, dummies: tuple, tmp_path: Path, bpf_objects: dict
) -> None:
    front, targets = dummies
    bad = write_profile(tmp_path / "bad.yaml", "bad", {"gcpxelse": 1})
    rc, _, err = run(capsys, "load", "--iface", front, "--targets", targets[0], "--pin-dir", str(bpffs / "lb"),
                     "--profile", str(bad))
    assert_one_line_error(rc, err, "gcpxelse")
    assert not (bpffs / "lb").exists()


def test_attach_failure_rolls_back(
    capsys: pytest.CaptureFixture[str], bpffs: Path, dummies: tuple, bpf_objects: dict
) -> None:
    front, targets = dummies
    args = ["--iface", front, "--targets", targets[0], "--mode", "skb"]
    assert run(capsys, "load", *args, "--pin-dir", str(bpffs / "one"))[0] == 0
    try:
        rc, _, err = run(capsys, "load", *args, "--pin-dir", str(bpffs / "two"))  # the interface is taken
        assert_one_line_error(rc, err, "cannot attach XDP", front)
        assert not (bpffs / "two").exists()
    finally:
        assert run(capsys, "unload", "--pin-dir", str(bpffs / "one"))[0] == 0


def test_no_bpffs(capsys: pytest.CaptureFixture[str], tmp_path: Path, dummies: tuple) -> None:
    front, targets = dummies
    rc, _, err = run(capsys, "load", "--iface", front, "--targets", targets[0], "--pin-dir", str(tmp_path / "lb"))
    assert_one_line_error(rc, err, "bpffs")
    assert not (tmp_path / "lb").exists()


def test_not_root(tmp_path: Path, bpffs: Path) -> None:
    # Import while still root (the interpreter and venv may be unreadable to nobody: /root, a 0700 temp
    # clone), and parse once so that lazily imported CLI modules are loaded too; then drop to nobody.
    code = (
        "import contextlib, io, os, sys\nfrom predictor.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    main(['xdp', 'load', '--help'])\n"
        "os.setgid(65534); os.setuid(65534)\n"
        f"sys.exit(main(['xdp', 'load', '--iface', 'lo', '--targets', 'lo', '--pin-dir', '{bpffs}/lb']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert_one_line_error(proc.returncode, proc.stderr, "root")
    assert not (bpffs / "lb").exists()


def test_status_of_nothing_loaded(capsys: pytest.CaptureFixture[str], bpffs: Path) -> None:
    rc, _, err = run(capsys, "status", "--pin-dir", str(bpffs / "none"), "--json")
    assert_one_line_error(rc, err, str(bpffs / "none"))


def test_bad_mode_and_bad_profile_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = run(capsys, "load", "--iface", "lo", "--targets", "lo", "--pin-dir", "/x", "--mode", "hw")
    assert_one_line_error(rc, err, "--mode")
    rc, _, err = run(capsys, "set-profile", "--pin-dir", str(tmp_path), "--profile", str(tmp_path / "none.yaml"))
    assert_one_line_error(rc, err)
