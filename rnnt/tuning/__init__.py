"""Hyper-parameter search over the real trainer with Optuna (steps/tune.py)."""
