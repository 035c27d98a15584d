"""Skills and overlays: what a module tells the agent, selected, bounded and rendered."""
