"""The scheduler: a Volcano-style framework (sessions, actions, tiers, plugins, statements) with GPU
plugins, used by the live scheduler and, unchanged, by the trace simulator."""
