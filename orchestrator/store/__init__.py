"""The store: one SQLite file (WAL), its numbered migrations, and the deliveries queue.

Owns every byte on disk that is not a repository. Nothing here knows agents or GitHub.
"""
