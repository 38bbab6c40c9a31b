"""The Prometheus exporter: collectors computed at scrape time from the runtime's raw samples,
GPU health detection that marks GPUs unhealthy in the runtime, and custom collectors."""
