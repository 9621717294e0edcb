"""A repository's environment, prepared once by its `setup:` and used by every task."""
