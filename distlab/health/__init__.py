"Doctor, GPU health and the metrics exporter: checks before a run, facts while it trains."
