"""The training CronJobs: each model family trained safely (one run at a time, bounded retries and deadlines,
the training service account) with a command this build has, or every family from one ``retrain --all``."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import kubernetes_validate

from tests.k8s.manifests import KUBERNETES_VERSION, SETTINGS, Obj, is_builtin, render, render_with_retrain_all


def _kubernetes_expand(text: str) -> str:
    """Kubernetes' own expansion of command/args: ``$$`` is a literal ``$`` (no env references used here)."""
    assert "$(" not in text.replace("$$", ""), "an unescaped $( would be expanded by the kubelet"
    return text.replace("$$", "$")


def _train_command(container: Obj) -> list[str]:
    """The predictor argv a training container runs (a /bin/sh -c wrapper is run with `exec echo`)."""
    if container.get("command") != ["/bin/sh", "-c"]:
        return list(container["args"])
    script = _kubernetes_expand(container["args"][0]).replace("/etc/predictor/settings.yaml", str(SETTINGS))
    assert script.startswith("exec predictor ")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["/bin/sh", "-c", "exec echo " + script[len("exec ") :]],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    argv = shlex.split(done.stdout)
    assert argv[0] == "predictor"
    return [a.replace(str(SETTINGS), "/etc/predictor/settings.yaml") for a in argv[1:]]


def test_cronjobs_train_each_family_safely() -> None:
    from predictor.commands import TRAIN_COMMANDS
    from predictor.commands.rightsize import DEFAULT_WINDOW_DAYS
    from predictor.config import load_settings

    registered = {c.name for c in TRAIN_COMMANDS}
    families = {}
    for cron in (o for o in render("dry-run") if o["kind"] == "CronJob"):
        spec = cron["spec"]
        job = spec["jobTemplate"]["spec"]
        args = _train_command(job["template"]["spec"]["containers"][0])
        assert args[:3] == ["--config", "/etc/predictor/settings.yaml", "train"], args
        families[args[3]] = args[4:]
        assert spec["concurrencyPolicy"] == "Forbid"
        assert spec["startingDeadlineSeconds"] > 0 and job["activeDeadlineSeconds"] > 0
        assert job["backoffLimit"] <= 3 and job["template"]["spec"]["restartPolicy"] == "Never"
        assert job["template"]["spec"]["serviceAccountName"] == "predictor-train"
        # A CronJob may only run a command this build has; the others wait, suspended.
        assert args[3] in registered or spec["suspend"] is True, f"train {args[3]} is not in this build"
    assert set(families) == {"forecast", "demand", "rca"}
    # `train demand` with no flags reads the configured Prometheus over its default trailing window
    assert families["demand"] == [] and load_settings(SETTINGS).prometheus.url
    assert DEFAULT_WINDOW_DAYS == 28


def test_retrain_all_component_replaces_the_per_family_cronjobs() -> None:
    objects = render_with_retrain_all()
    crons = [o for o in objects if o["kind"] == "CronJob"]
    assert [c["metadata"]["name"] for c in crons] == ["predictor-retrain"]
    job = crons[0]["spec"]["jobTemplate"]["spec"]
    assert job["template"]["spec"]["containers"][0]["args"] == [
        "--config",
        "/etc/predictor/settings.yaml",
        "retrain",
        "--all",
    ]
    assert crons[0]["spec"]["concurrencyPolicy"] == "Forbid"
    for obj in objects:
        if is_builtin(obj):
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
