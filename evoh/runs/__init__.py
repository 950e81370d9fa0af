"""A policy's run over a split, shared by the stages that play games (collect, eval, grpo's rollouts): playing
and resuming it into a stage directory (``episodes``), and what its records add up to (``summary``)."""
