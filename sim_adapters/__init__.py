"""Simulator backends for pear-agent; each subpackage imports its simulator lazily."""
