"""Python helpers of fusetune: capture a model's graph, produce reference tensors, verify and time tuned models."""
from . import recurrent  # registers fusetune::lstm, which captured programs (graph.pt2) may call
