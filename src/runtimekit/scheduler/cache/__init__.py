"""Scheduler caches: where sessions get their snapshots and where committed decisions go.
`StaticCache` serves trace replay and tests; the live, informer-fed cache lives beside it."""

from runtimekit.scheduler.cache.static import StaticCache

__all__ = ["StaticCache"]
