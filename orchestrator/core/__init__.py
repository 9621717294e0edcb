"""What every layer shares and none owns: errors, secrecy, messages, the tool kit, the clock,
and protected-path patterns. Imports nothing of the engine."""
