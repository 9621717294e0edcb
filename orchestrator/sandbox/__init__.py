"""Confinement for every process an agent starts: bubblewrap, Landlock, the egress proxy.

Owns the probe, the launcher and the limits. Runs nothing that is not an agent's command.
"""
