"""Decisions from fitted laws: critical mixture ratio, CPT trajectories, optimal mixtures."""
