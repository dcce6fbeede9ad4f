"""Real sources for the raw zone: the NVML agent, the Prometheus puller, the training-side client,
log importers (TensorBoard, Megatron-LM), prediction logs.

This package's `__init__` imports nothing, so `sources.client` stays usable with the standard
library alone.
"""
