"""Runner mode: the App's engine on GitHub Actions, one event per workflow run.

Everything the engine keeps between events lives in the repository itself (`state.py`: the
store on a git ref, updated by compare-and-swap).
"""
