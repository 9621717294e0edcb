"""The conversation bus: conversations, inboxes, Send, gates and routing, as transactions.

Owns the engine's messaging (seeds 001 and 004). No model calls, no git, no processes here.
"""
