"""Where jobs work on disk: mirrors, per-job repositories, worktrees, and the file tools.

Owns every git command the engine runs (hardened) and what agents read and write.
"""
