"""Runner mode: the App's engine on GitHub Actions, one event per workflow run."""
