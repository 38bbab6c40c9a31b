"""The scheduler's metrics: Volcano's scheduler families under their exact names (volcano.py, state.py),
the kit's own GPU-sharing figures (state.py), kept as Go keeps them (series.py) and written as Go's
client writes them (text.py). docs/user-guide/coming-from-volcano.md lists every family."""
