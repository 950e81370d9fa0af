"""The harness state H = (Belief, Progress, Experience), the turn format, prompts, the episode loop and the reward.

Knows the environment's ``Step`` and ``Task``; knows nothing of models.
"""
