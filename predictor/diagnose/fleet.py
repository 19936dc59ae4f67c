"""One diagnosis for a fleet: every cluster diagnosed on its own window, the findings put together.

Each cluster's window is read from its own source, so a fault in one cluster is never explained by
another's series; the findings are then ranked together so the most probable cause in the fleet comes
first, each naming the cluster it is in.
"""

from __future__ import annotations

from typing import Any

__all__ = ["fleet_findings"]


def fleet_findings(results: dict[str | None, dict[str, Any]]) -> dict[str, Any]:
    """One result for the fleet: every cluster's findings, each naming its cluster, most probable first;
    ``clusters`` holds each one's families and the profile they selected.

    A single unnamed cluster's result is returned as it is (today's output)."""
    if list(results) == [None]:
        return results[None]
    first = next(iter(results.values()))
    findings = [{"cluster": name, **finding} for name, result in results.items() for finding in result["findings"]]
    found = sorted({family for result in results.values() for family in result["families"]["found"]})
    missing = sorted({family for result in results.values() for family in result["families"]["missing"]} - set(found))
    return {
        "at": first["at"],
        "window": first["window"],
        "families": {"found": found, "missing": missing},
        "findings": sorted(findings, key=lambda f: -float(f["probability"])),
        "clusters": {
            name: {"families": result["families"], "profile": result.get("profile")} for name, result in results.items()
        },
    }
