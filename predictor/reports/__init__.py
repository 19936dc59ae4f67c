"""Quota recommendation reports: one report model rendered as HTML, Markdown, CSV and JSON."""
