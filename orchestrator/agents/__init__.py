"""Agents at work: who each one is, the turn loop, its context, its tools, the scheduler.

Owns running a conversation to its next rest. What an agent may touch on disk is in
workspace/, what a mini-team is in teams/.
"""
