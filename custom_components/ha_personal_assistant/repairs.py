"""Repair issues: weakened permissions, damaged files, pipelines that bypass us."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from homeassistant.components.repairs import RepairsFlow, RepairsFlowResult
from homeassistant.core import callback
from homeassistant.helpers import issue_registry as ir

from .const import DOMAIN, LOGGER
from .i18n import async_texts
from .local_intents import ISSUE_PREFIX as LOCAL_INTENTS_ISSUE_PREFIX
from .naming import assistant_name
from .policy.rules import Policy

if TYPE_CHECKING:
    from collections.abc import Mapping

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

UNSAFE_PERMISSIONS: Final = "unsafe_permissions"


def unsafe_permissions_issue_id(entry_id: str) -> str:
    """Return the id of an entry's unsafe-permissions issue."""
    return f"{UNSAFE_PERMISSIONS}_{entry_id}"


async def async_update_policy_issue(
    hass: HomeAssistant, entry_id: str, options: Mapping[str, Any]
) -> None:
    """Raise the repair issue for unsafe options, or clear it when they are safe.

    The issue's text is translated by the frontend; what it lists ("lock.unlock
    runs without confirmation") is written here, in Home Assistant's language.
    """
    issue_id = unsafe_permissions_issue_id(entry_id)
    problems = Policy.from_options(options).weakened()
    if not problems:
        ir.async_delete_issue(hass, DOMAIN, issue_id)
        return
    texts = await async_texts(hass)
    settings = "; ".join(
        texts(problem.key, entry=problem.entry) for problem in problems
    )
    ir.async_create_issue(
        hass,
        DOMAIN,
        issue_id,
        is_fixable=False,
        severity=ir.IssueSeverity.WARNING,
        translation_key=UNSAFE_PERMISSIONS,
        translation_placeholders={
            "settings": settings,
            "name": assistant_name(hass, entry_id),
        },
    )


async def async_check_policy(hass: HomeAssistant, entry: ConfigEntry) -> None:
    """Raise or clear the unsafe-permissions issue for an entry's options."""
    await async_update_policy_issue(hass, entry.entry_id, entry.options)


@callback
def async_delete_policy_issue(hass: HomeAssistant, entry_id: str) -> None:
    """Remove an entry's issue; call it when the entry is removed."""
    ir.async_delete_issue(hass, DOMAIN, unsafe_permissions_issue_id(entry_id))


# Raised by versions before 0.2 when sqlite-vec could not load; numpy
# searching instead needs nothing from the user, so it is no repair now.
VECTOR_EXTENSION_UNAVAILABLE: Final = "vector_extension_unavailable"


@callback
def async_log_vector_engine(hass: HomeAssistant, reason: str | None) -> None:
    """Log (once per start) why numpy searches, not sqlite-vec; drop the old issue."""
    ir.async_delete_issue(hass, DOMAIN, VECTOR_EXTENSION_UNAVAILABLE)
    if reason:
        LOGGER.info(
            "Document search uses numpy, not sqlite-vec (%s); it works the same",
            reason,
        )


# A damaged file was moved aside and a fresh one made: the user decides what
# becomes of the damaged copy (delete it, or keep it to inspect or restore).
DAMAGED_FILE_ISSUES: Final = ("database_recreated", "checkpoints_recreated")


@callback
def async_raise_damaged_file_issue(hass: HomeAssistant, key: str, aside: Path) -> None:
    """Tell the user a damaged file was replaced, and ask about the copy."""
    ir.async_create_issue(
        hass,
        DOMAIN,
        key,
        is_fixable=True,
        is_persistent=True,
        severity=ir.IssueSeverity.WARNING,
        translation_key=key,
        translation_placeholders={"path": str(aside)},
        data={"path": str(aside)},
    )


def _remove_copy(path: Path) -> None:
    """Delete the damaged copy; blocking, run it in an executor."""
    path.unlink(missing_ok=True)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


class DamagedFileRepairFlow(RepairsFlow):
    """Delete the damaged copy of a file, or keep it."""

    def __init__(self, path: str) -> None:
        """Remember which copy the issue is about."""
        self._path = path

    async def async_step_init(
        self,
        user_input: dict[str, str] | None = None,  # noqa: ARG002 - a menu step
    ) -> RepairsFlowResult:
        """Offer the two choices."""
        return self.async_show_menu(
            step_id="init",
            menu_options=["delete", "keep"],
            description_placeholders={"path": self._path},
        )

    async def async_step_delete(
        self,
        user_input: dict[str, str] | None = None,  # noqa: ARG002 - a menu step
    ) -> RepairsFlowResult:
        """Delete the copy (off the event loop); the issue is solved."""
        loaded = self.hass.config_entries.async_loaded_entries(DOMAIN)
        if loaded and not (executor := loaded[0].runtime_data.storage.executor).closed:
            await executor.run(_remove_copy, Path(self._path))
        else:
            await self.hass.async_add_executor_job(_remove_copy, Path(self._path))
        return self.async_create_entry(data={})

    async def async_step_keep(
        self,
        user_input: dict[str, str] | None = None,  # noqa: ARG002 - a menu step
    ) -> RepairsFlowResult:
        """Keep the copy where it is; the issue is solved."""
        return self.async_create_entry(data={})


class LocalIntentsRepairFlow(RepairsFlow):
    """Turn "Prefer handling commands locally" off for one pipeline."""

    def __init__(self, pipeline_id: str) -> None:
        """Remember which pipeline the issue is about."""
        self._pipeline_id = pipeline_id

    async def async_step_init(
        self,
        user_input: dict[str, str] | None = None,  # noqa: ARG002 - the issue's data
    ) -> RepairsFlowResult:
        """Start with the confirmation (HA passes the issue here, not an answer)."""
        return await self.async_step_confirm()

    async def async_step_confirm(
        self, user_input: dict[str, str] | None = None
    ) -> RepairsFlowResult:
        """Say what changes; on submit, turn the setting off."""
        # Imported here: the issue exists only once assist_pipeline is loaded.
        from homeassistant.components.assist_pipeline import (  # noqa: PLC0415
            PipelineNotFound,
            async_update_pipeline,
        )
        from homeassistant.components.assist_pipeline.pipeline import (  # noqa: PLC0415
            async_get_pipeline,
        )

        try:
            pipeline = async_get_pipeline(self.hass, self._pipeline_id)
        except PipelineNotFound:
            return self.async_abort(reason="pipeline_removed")
        if user_input is None:
            return self.async_show_form(
                step_id="confirm", description_placeholders={"pipeline": pipeline.name}
            )
        await async_update_pipeline(self.hass, pipeline, prefer_local_intents=False)
        return self.async_create_entry(data={})


async def async_create_fix_flow(
    hass: HomeAssistant,  # noqa: ARG001 - HA's signature
    issue_id: str,
    data: dict[str, Any] | None,
) -> RepairsFlow:
    """Return the fix flow of a fixable issue."""
    if issue_id in DAMAGED_FILE_ISSUES and data and isinstance(data.get("path"), str):
        return DamagedFileRepairFlow(data["path"])
    if (
        issue_id.startswith(LOCAL_INTENTS_ISSUE_PREFIX)
        and data
        and isinstance(data.get("pipeline_id"), str)
    ):
        return LocalIntentsRepairFlow(data["pipeline_id"])
    msg = f"No fix flow for {issue_id}"
    raise ValueError(msg)
