"""The Prometheus exporter: collectors computed at scrape time and health detection."""
