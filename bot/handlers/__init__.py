"""Deliveries become decisions: payloads parsed into commands, one handler per event.

Decisions are pure; the I/O they need is gathered before and performed after.
"""
