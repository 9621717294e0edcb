"""Mini-teams and the task board: a fresh worker and reviewers per task (seed 003).

Owns the coordinator, its engine-side steps, and the board tools leads use.
"""
