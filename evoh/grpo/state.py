"""What one GRPO process trains with, held together: the accelerator, the model, its optimizer and schedule,
the settings, and what scoring a sample needs (the pad id, and under guided decoding the vocabulary).

Under ``accelerate launch`` or torchrun each process holds its own; ``reduce`` and ``gather`` combine what
they measured (on one process they return their input).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evoh.config import GrpoConfig

if TYPE_CHECKING:
    from evoh.grpo.objective import Sample
    from evoh.policy.guided import Vocabulary
    from evoh.policy.turn_grammar import GrammarMasks


@dataclass
class TrainState:
    """One process's training run: ``model`` is the prepared (under DDP, wrapped) PEFT model."""

    accelerator: Any
    model: Any
    optimizer: Any
    scheduler: Any
    g: GrpoConfig
    pad_id: int
    # the guided policy's token sets, for its samples' log-probs: the local decoder's, or the masks rebuilt for vLLM's
    vocabulary: Vocabulary | GrammarMasks | None = None
    anchor: list[Sample] = field(default_factory=list)  # SFT examples for grpo.sft_weight

    @property
    def unwrapped(self) -> Any:
        return self.accelerator.unwrap_model(self.model)

    @property
    def device(self) -> Any:
        return self.accelerator.device

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    def reduce(self, value: float, op: str = "mean") -> float:
        return reduce(self.accelerator, value, op)

    def gather(self, items: list[Any]) -> list[Any]:
        return gather(self.accelerator, items)


def reduce(accelerator, value: float, op: str = "mean") -> float:
    """``value`` combined over the processes (``op``: mean or sum)."""
    if accelerator.num_processes == 1:
        return float(value)
    import torch

    return float(accelerator.reduce(torch.tensor(float(value), device=accelerator.device), op))


def gather(accelerator, items: list[Any]) -> list[Any]:
    """Every process's ``items``, in process order."""
    if accelerator.num_processes == 1:
        return items
    from accelerate.utils import gather_object

    return list(gather_object(items))
