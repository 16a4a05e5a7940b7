"""Deterministic safety layers that hold whatever the model says."""
