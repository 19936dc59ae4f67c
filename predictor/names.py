"""The names Kubernetes and Prometheus accept, defined once: every check and every schema pattern uses these.

Kubernetes object names are DNS-1123 labels (at most 63 characters: namespaces, cluster names) or
subdomains (at most 253: Queues, nodes, most objects); Prometheus label and metric names are C-like
identifiers, metric names also allowing ``:`` (recording rules). A name that passes here is what the API
server or Prometheus would accept, so it is also safe as a file name (no ``/``, never ``..`` alone) and
as a PromQL identifier. The grammars are plain strings as well as predicates: pydantic ``Field(pattern=…)``
and tokenisers embed them.
"""

from __future__ import annotations

import re

__all__ = [
    "DNS1123_LABEL",
    "DNS1123_LABEL_MAX",
    "DNS1123_SUBDOMAIN",
    "DNS1123_SUBDOMAIN_MAX",
    "LABEL_NAME",
    "METRIC_NAME",
    "anchored",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_name",
    "is_metric_name",
]

# Unanchored grammars, for embedding in larger expressions.
DNS1123_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = rf"{DNS1123_LABEL}(?:\.{DNS1123_LABEL})*"
LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
METRIC_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253


def anchored(grammar: str) -> str:
    """``grammar`` matching a whole string (the form a JSON-schema ``pattern`` needs)."""
    return f"^{grammar}$"


_DNS_LABEL = re.compile(DNS1123_LABEL)
_DNS_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN)
_LABEL = re.compile(LABEL_NAME)
_METRIC = re.compile(METRIC_NAME)


def is_dns1123_label(name: object) -> bool:
    """A Kubernetes DNS-1123 label: lower-case letters, digits and inner ``-``, at most 63 characters."""
    return isinstance(name, str) and len(name) <= DNS1123_LABEL_MAX and _DNS_LABEL.fullmatch(name) is not None


def is_dns1123_subdomain(name: object) -> bool:
    """A Kubernetes DNS-1123 subdomain: dot-separated labels, at most 253 characters in all."""
    return isinstance(name, str) and len(name) <= DNS1123_SUBDOMAIN_MAX and _DNS_SUBDOMAIN.fullmatch(name) is not None


def is_label_name(name: object) -> bool:
    """A Prometheus label name: a letter or ``_``, then letters, digits or ``_``."""
    return isinstance(name, str) and _LABEL.fullmatch(name) is not None


def is_metric_name(name: object) -> bool:
    """A Prometheus metric name: like a label name, with ``:`` allowed anywhere (recording rules)."""
    return isinstance(name, str) and _METRIC.fullmatch(name) is not None
