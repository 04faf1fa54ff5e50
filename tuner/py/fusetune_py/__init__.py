"""Python helpers of fusetune: capture a model's graph, produce reference tensors, verify and time tuned models."""
