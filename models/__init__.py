"""Estimators only: numpy, pandas, torch, scikit-learn and statsmodels; no I/O of any kind.

Everything here is picklable and testable offline; an import-linter contract keeps it that way.
"""
