"""Evaluation: incidents scored against injected ground truth, and the replay that measures detection delay
as a user sees it, in simulated time under the real sensor."""
