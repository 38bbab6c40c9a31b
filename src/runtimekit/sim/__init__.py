"""Trace replay: the FGD paper's experiment (docs/simulator.md) run through the real scheduling
framework and plugins, with reports, tables and plots."""
