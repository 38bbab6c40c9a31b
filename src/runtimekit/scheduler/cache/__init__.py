"""Scheduler caches: where sessions get their snapshots and where committed decisions go.
`StaticCache` serves trace replay and tests; the live scheduler's informer-fed cluster cache
(`cluster.py`, copied per session by `snapshot.py`) lives beside it, and `live.py` answers sessions
over it, the scheduling queue and the binder."""

from runtimekit.scheduler.cache.static import StaticCache

__all__ = ["StaticCache"]
