"""The OS sandbox and the process runner: run this argv confined, with these roots and limits."""
