"""Jobs end to end: the Office that wires the engine, the driver that shows and delivers.

Owns a job's lifecycle from start to its change request, and its budget.
"""
