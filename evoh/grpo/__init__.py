"""Stage two's parts, below the stage that runs them (:mod:`evoh.stages.grpo`):

- ``objective``  the loss and log-prob maths, pure torch: advantages, clipped ratio, k3 KL, padded batches
- ``state``      the training state one process holds (accelerator, model, optimizer, schedule, settings)
- ``model``      the trainable PEFT model, its reference, the optimizer
- ``policies``   what generates the rollouts and validation's greedy episodes (transformers or vLLM)
- ``update``     one update: rollouts → rewards → advantages → samples → optimizer steps → bank
- ``optimise``   the optimizer steps over an update's samples
- ``anchor``     refine's SFT examples: the anchor loss (grpo.sft_weight)
- ``validation`` greedy validation episodes and the drift from the reference
- ``checkpoint`` checkpoints, resume (with RNG states) and the final adapter
- ``metrics``    metrics.jsonl and rollouts.jsonl lines
- ``settings``   the settings checked before anything loads, and how rollouts sample
"""
