"""Stands in for Hermes Agent's ``tools`` package (only the modules its supervisor tests use)."""
