"""The warning a settings key that moved still loads under (its own module: every settings module raises it)."""

from __future__ import annotations

__all__ = ["DeprecatedSettingWarning"]


class DeprecatedSettingWarning(FutureWarning):
    """A settings key that still works under its old name; the message names the new one."""
