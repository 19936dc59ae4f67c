"""Notifications: a Slack-compatible webhook told when the loop resized queues or held them for a reason
worth a look, with a link to the plan.

Why a webhook and not only metrics: a resize is a decision a team wants to hear about when it happens, in
the channel where they talk about capacity. The body is ``{"text": ...}``, which Slack, Mattermost,
Rocket.Chat and most chat bridges accept. A notification is never worth a failed cycle: the request has
a bounded timeout and a failure is logged, nothing more. The URL is a secret (it authorises posting) and
is read from the settings' SecretStr or its file on every send, so a rotated Secret is honoured.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence

from predictor.actuators.volcano import Outcome
from predictor.config import NotifySettings
from predictor.errors import ConfigError
from predictor.loop.outcome import CycleReport
from predictor.planner import QueuePlan

log = logging.getLogger(__name__)

__all__ = ["Notifier", "cycle_text", "notify_cycle"]

MAX_LINES = 20  # a message a person reads; the plan link has the rest


class Notifier:
    """Posts ``{"text": ...}`` to the configured webhook; ``send`` returns whether it was delivered."""

    def __init__(self, settings: NotifySettings, cluster: str | None = None) -> None:
        self.settings, self.cluster = settings, cluster

    @property
    def enabled(self) -> bool:
        return self.settings.webhook_url is not None or self.settings.webhook_url_file is not None

    def link(self, cycle: str) -> str:
        """The plan's URL for ``cycle`` (``""`` without a template)."""
        template = self.settings.plan_url
        return template.replace("{cycle}", cycle).replace("{cluster}", self.cluster or "") if template else ""

    def send(self, text: str) -> bool:
        try:
            url = self.settings.resolved_url()
        except ConfigError as exc:
            log.warning("notification not sent: %s", exc)
            return False
        if not url:
            return False
        body = json.dumps({"text": text}).encode("utf-8")
        request = urllib.request.Request(  # noqa: S310 - the operator's own webhook URL, http(s) checked below
            url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        if request.type not in ("http", "https"):
            log.warning("notification not sent: webhook URL scheme %s is not http(s)", request.type)
            return False
        try:
            with urllib.request.urlopen(request, timeout=self.settings.timeout_s) as response:  # noqa: S310
                response.read(1024)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            # The URL is a secret (its path authorises posting): name the host only.
            log.warning("notification to %s failed: %s", _host(url), str(exc).replace(url, _host(url)))
            return False
        return True


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}"


def cycle_text(
    cycle: str,
    *,
    plan: QueuePlan | None,
    outcomes: Sequence[Outcome],
    hold: tuple[str, str] | None,
    hold_codes: Iterable[str],
    link: str = "",
    cluster: str | None = None,
) -> str | None:
    """The message of one cycle, or ``None`` when nothing was applied and nothing held for a listed code."""
    where = f" on {cluster}" if cluster else ""
    lines: list[str] = []
    applied = {o.change.target for o in outcomes if o.outcome == "applied"}
    if plan is not None:
        for c in plan.changes:
            if c.queue in applied:
                what = "weight" if c.field == "weight" else f"{c.field}[{c.resource}]"
                before = "unset" if c.before is None else f"{c.before:g}"
                lines.append(f"• {c.queue}: {what} {before} → {c.after:g} ({c.code}: {c.reason})")
    codes = set(hold_codes)
    if hold is not None and hold[0] in codes:
        lines.append(f"• every queue held ({hold[0]}): {hold[1]}")
    elif plan is not None:
        for h in plan.held:
            if h.code in codes:
                lines.append(f"• {h.queue} held ({h.code}): {h.reason}")
    if not lines:
        return None
    head = f"gpu-capacity-predictor cycle {cycle}{where}: {len(applied)} queue(s) resized"
    more = [f"… and {len(lines) - MAX_LINES} more"] if len(lines) > MAX_LINES else []
    tail = [f"plan: {link}"] if link else []
    return "\n".join([head, *lines[:MAX_LINES], *more, *tail])


def notify_cycle(notifier: Notifier, hold_codes: Iterable[str], cycle: str, report: CycleReport) -> None:
    """Tell the webhook about a cycle's applied changes and holds worth a look (never raises)."""
    if not notifier.enabled:
        return
    text = cycle_text(
        cycle,
        plan=report.plan,
        outcomes=report.outcomes,
        hold=report.hold,
        hold_codes=hold_codes,
        link=notifier.link(cycle),
        cluster=notifier.cluster,
    )
    if text:
        notifier.send(text)
