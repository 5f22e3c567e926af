"""Generators for property-based tests: hostile config values and command-line arguments."""
