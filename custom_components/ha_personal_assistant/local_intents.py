"""Repairs for Assist pipelines whose "prefer local" runs commands past our policy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from homeassistant.const import EVENT_COMPONENT_LOADED
from homeassistant.core import Event, callback
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import issue_registry as ir

from .const import DOMAIN

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from homeassistant.components.assist_pipeline import Pipeline
    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

ASSIST_PIPELINE: Final = "assist_pipeline"
# The issue's translation key; its id adds the pipeline's id.
PREFER_LOCAL_INTENTS: Final = "prefer_local_intents"
ISSUE_PREFIX: Final = f"{PREFER_LOCAL_INTENTS}_"


def local_intents_issue_id(pipeline_id: str) -> str:
    """Return the id of a pipeline's prefer-local-intents issue."""
    return f"{ISSUE_PREFIX}{pipeline_id}"


def bypassing_pipelines(
    pipelines: Iterable[Pipeline], agent_ids: set[str]
) -> list[Pipeline]:
    """Return the pipelines where HA's own intents run before our agent.

    With "Prefer handling commands locally" on, the pipeline hands a sentence
    to HA's intent handlers first (``conversation.async_handle_intents``) and
    only what they do not understand reaches the agent: an "unlock the front
    door" is carried out without our policy, Confirm step or action log.
    """
    return [
        pipeline
        for pipeline in pipelines
        if pipeline.prefer_local_intents and pipeline.conversation_engine in agent_ids
    ]


class LocalIntentsWatch:
    """Keeps one repair issue per pipeline that lets HA's intents bypass us.

    assist_pipeline fires no event when pipelines change; its own pipeline
    select entity listens to the pipeline store's change sets, and so does
    this. The store exists once assist_pipeline is set up, which may be after
    this entry (it is only an after-dependency).
    """

    def __init__(self, hass: HomeAssistant, entry: ConfigEntry) -> None:
        """Watch on behalf of ``entry``'s conversation agent."""
        self._hass = hass
        self._entry = entry
        self._unsubscribe: list[Callable[[], None]] = []

    @callback
    def async_start(self) -> Callable[[], None]:
        """Check now (or once assist_pipeline loads) and on every change."""
        if ASSIST_PIPELINE in self._hass.config.components:
            self._async_listen()
        else:
            self._unsubscribe.append(
                self._hass.bus.async_listen(
                    EVENT_COMPONENT_LOADED,
                    self._async_component_loaded,
                    event_filter=_is_assist_pipeline,
                )
            )
        return self.async_stop

    @callback
    def async_stop(self) -> None:
        """Stop watching.

        The issues stay: a reload (an options change) must not bring back
        one the user chose to ignore. Removing the entry drops them
        (:func:`async_delete_local_intents_issues`).
        """
        while self._unsubscribe:
            self._unsubscribe.pop()()

    @callback
    def _async_component_loaded(self, _event: Event[Any]) -> None:
        self._async_listen()

    @callback
    def _async_listen(self) -> None:
        # Loaded by now: importing it costs nothing and sets nothing up.
        from homeassistant.components.assist_pipeline.pipeline import (  # noqa: PLC0415
            KEY_ASSIST_PIPELINE,
        )

        store = self._hass.data[KEY_ASSIST_PIPELINE].pipeline_store
        self._unsubscribe.append(
            store.async_add_change_set_listener(self._async_pipelines_changed)
        )
        self.async_check()

    async def _async_pipelines_changed(self, _changes: Iterable[Any]) -> None:
        self.async_check()

    @callback
    def async_check(self) -> None:
        """Raise an issue for each bypassing pipeline; clear the others."""
        from homeassistant.components.assist_pipeline import (  # noqa: PLC0415
            async_get_pipelines,
        )

        # A pipeline names an entity agent by its entity id (older ones by
        # the config entry id).
        agent_ids = {self._entry.entry_id}
        if entity_id := er.async_get(self._hass).async_get_entity_id(
            "conversation", DOMAIN, self._entry.entry_id
        ):
            agent_ids.add(entity_id)
        self._async_sync_issues(
            bypassing_pipelines(async_get_pipelines(self._hass), agent_ids)
        )

    @callback
    def _async_sync_issues(self, pipelines: list[Pipeline]) -> None:
        wanted = {local_intents_issue_id(p.id): p for p in pipelines}
        async_delete_local_intents_issues(self._hass, keep=set(wanted))
        for issue_id, pipeline in wanted.items():
            ir.async_create_issue(
                self._hass,
                DOMAIN,
                issue_id,
                is_fixable=True,
                severity=ir.IssueSeverity.WARNING,
                translation_key=PREFER_LOCAL_INTENTS,
                translation_placeholders={"pipeline": pipeline.name},
                data={"pipeline_id": pipeline.id},
            )


@callback
def async_delete_local_intents_issues(
    hass: HomeAssistant, keep: set[str] | None = None
) -> None:
    """Delete the prefer-local-intents issues, except those in ``keep``."""
    for domain, issue_id in list(ir.async_get(hass).issues):
        if (
            domain == DOMAIN
            and issue_id.startswith(ISSUE_PREFIX)
            and issue_id not in (keep or set())
        ):
            ir.async_delete_issue(hass, DOMAIN, issue_id)


@callback
def _is_assist_pipeline(event_data: dict[str, Any]) -> bool:
    return bool(event_data.get("component") == ASSIST_PIPELINE)
