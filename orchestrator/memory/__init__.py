"""What jobs learned, kept in the repository and found again for later tasks (seed 000:
"Scoping creates a blindness, and Learning fixes it").

Owns the task learnings' text (read from a lead's reply, written to and read from the
files under `.teaparty/learnings/`) and their index in the store (SQLite FTS5).
"""
