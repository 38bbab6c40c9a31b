"""GPU sharing plugin and its placement policies."""
