"""`runtimekit <component>` entry points. The only layer that may wire components together."""
