"""The management service: REST API, Prometheus metrics and dashboard (``arctic-sql service``)."""
