"""evoh: train small language models to act as long-horizon agents through a Belief/Progress/Experience harness."""

__version__ = "0.1.0"
