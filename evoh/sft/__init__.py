"""Stage one's training helpers: checkpoints, watching a run, and the held-out action check."""
