"""The cached prefix of every request: the system prompt with the catalogue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..tokens import (
    MESSAGE_OVERHEAD,
    TokenCounter,
    estimate_json_tokens,
    estimate_tokens,
)
from .assembler import build_system_prompt
from .budget import TEMPLATE_OVERHEAD, Budget
from .prompts import SYSTEM_PROMPT

if TYPE_CHECKING:
    from collections.abc import Sequence


class CachedPrefix:
    """The system prompt and tool schemas every request starts with, and its budget.

    The same bytes on every request (the model server reuses its cache for
    them); they change only when the catalogue of entities does. Turns,
    summaries, learning and the warm-up all read the prompt from here.
    """

    def __init__(
        self,
        *,
        num_ctx: int,
        tool_schemas: Sequence[dict[str, Any]],
        counter: TokenCounter | None = None,
    ) -> None:
        """Estimate the fixed part once: the tool schemas never change."""
        self.num_ctx = num_ctx
        # Learns from the server's prompt_eval_count how far estimates are off.
        self.counter = counter or TokenCounter()
        self._tool_tokens = (
            estimate_json_tokens(list(tool_schemas))
            + TEMPLATE_OVERHEAD
            + MESSAGE_OVERHEAD
        )
        self.system_prompt = SYSTEM_PROMPT
        # The catalogue in the prompt names every exposed entity and its area.
        self.catalogued = True
        self._generation = -1
        self.budget = Budget(
            num_ctx=num_ctx, fixed=estimate_tokens(SYSTEM_PROMPT) + self._tool_tokens
        )

    def refresh(self, generation: int, catalogue: Sequence[str]) -> None:
        """Rebuild the system prompt when the catalogue of entities changed.

        ``generation`` changes whenever an entity's exposure, name or area
        does (see EntityIndex.catalogue), and only then.
        """
        if generation == self._generation:
            return
        self._generation = generation
        fixed_limit = Budget(num_ctx=self.num_ctx, fixed=0).limit
        self.system_prompt, self.catalogued = build_system_prompt(
            SYSTEM_PROMPT, catalogue, fixed_limit, self.counter
        )
        self.budget = Budget(
            num_ctx=self.num_ctx,
            fixed=estimate_tokens(self.system_prompt) + self._tool_tokens,
        )
