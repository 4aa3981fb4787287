"""The package version, defined in one place (read by pyproject.toml)."""

__version__ = "0.1.0"
