"""GitHub as the App talks to it: the REST adapter, the Forge, and the text it writes.

Owns githubkit and every word the App posts (sanitised, marked, idempotent).
"""
