"""The background embedder: gives every stored chunk a vector of the model."""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

from ..const import EMBED_TIMEOUT, LOGGER
from ..model_server import ModelServerError
from ..store import documents as records

if TYPE_CHECKING:
    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

    from ..model_server import ModelBackend
    from ..store.database import Database
    from ..store.vectors import VectorStore


class Embedder:
    """Embeds chunks that lack a vector, in one background task at a time."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        hass: HomeAssistant,
        entry: ConfigEntry[Any],
        database: Database,
        vectors: VectorStore,
        *,
        backend: ModelBackend,
        model: str,
        loaded: asyncio.Event,
    ) -> None:
        """Keep the wiring; ``loaded`` is set once the vectors are in memory."""
        self.hass = hass
        self.entry = entry
        self.database = database
        self.vectors = vectors
        self.backend = backend
        self.model = model
        self._loaded = loaded
        self.worker: asyncio.Task[None] | None = None
        self._stopped = False
        self._again = False
        # Logged once when embedding fails and once when it works again.
        self.embed_error: str | None = None

    @property
    def busy(self) -> bool:
        """Tell whether the embedder runs now."""
        return self.worker is not None and not self.worker.done()

    def stop(self) -> None:
        """Start no more work (the caller cancels :attr:`worker`)."""
        self._stopped = True

    def kick(self) -> None:
        """Make sure the background embedder runs (again) soon."""
        if self._stopped:
            return
        if self.worker is not None and not self.worker.done():
            self._again = True
            return
        self.worker = self.entry.async_create_background_task(
            self.hass, self._async_embed_pending(), "ha_personal_assistant embeddings"
        )

    async def async_wait_embedded(self, document_id: int, timeout: float) -> int:  # noqa: ASYNC109 - a bound, not a cancel scope
        """Wait up to ``timeout`` s until a document's chunks are searchable.

        Returns how many are. Ends early when embedding fails (Ollama or the
        model is unavailable): the chunks stay queued for the next attempt.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            ready, total = await self.database.async_run(
                functools.partial(
                    records.embedded_of, model=self.model, document_id=document_id
                )
            )
            if ready >= total or self._stopped:
                return ready
            left = deadline - loop.time()
            worker = self.worker
            if left <= 0 or worker is None:
                return ready
            if worker.done():
                if self.embed_error is not None:
                    return ready
                # Finished just before this document's chunks were added.
                self.kick()
                continue
            # Not cancelled with this call: the embedder goes on in the background.
            await asyncio.wait([worker], timeout=left)

    async def _async_embed_pending(self) -> None:
        """Embed chunks that lack a vector of the current model, 16 at a time."""
        await self._loaded.wait()
        embedded = 0
        last_id = 0
        while True:
            self._again = False
            batch = await self.database.async_run(
                functools.partial(records.pending, model=self.model, after=last_id)
            )
            if not batch:
                if self._again:
                    # Something was added meanwhile: look from the start again.
                    last_id = 0
                    continue
                break
            try:
                vectors = await self.backend.async_embed(
                    self.model,
                    [f"{title}\n{text}" for _, title, text in batch],
                    EMBED_TIMEOUT,
                )
            except ModelServerError as err:
                self.failed(str(err))
                return
            self.worked()
            items = [
                (row[0], vector) for row, vector in zip(batch, vectors, strict=True)
            ]
            await self.database.async_run(
                functools.partial(
                    records.store_vectors, vectors=self.vectors, items=items
                )
            )
            last_id = batch[-1][0]
            embedded += len(batch)
        if embedded:
            await self.database.async_run(
                functools.partial(records.mark_embedded, model=self.model)
            )
            # The collection changed size: the fastest engine may have changed.
            await self.vectors.async_choose_engine(force=False)
            LOGGER.debug("Embedded %s chunks with %s", embedded, self.model)

    def failed(self, reason: str) -> None:
        """Record that embedding failed; log the first failure only."""
        if self.embed_error is None:
            LOGGER.warning(
                "Documents cannot be embedded with %s at %s: %s",
                self.model,
                self.backend.where,
                reason,
            )
        self.embed_error = reason

    def worked(self) -> None:
        """Record that embedding worked; log a recovery."""
        if self.embed_error is not None:
            LOGGER.info("Documents can be embedded again with %s", self.model)
        self.embed_error = None
