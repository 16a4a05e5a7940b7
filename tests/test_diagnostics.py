"""The diagnostics download helps debugging and gives nothing personal away."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
)
from pytest_homeassistant_custom_component.components.diagnostics import (  # type: ignore[import-untyped]
    get_diagnostics_for_config_entry,
)
from syrupy.filters import props

from custom_components.ha_personal_assistant import diagnostics as platform
from custom_components.ha_personal_assistant.const import (
    CONF_ALLOWED_USER_IDS,
    CONF_MODEL,
    CONF_OLLAMA_URL,
    CONF_REQUEST_TIMEOUT,
    CONF_USER_MAPPING,
    DOMAIN,
)

from .common import MODEL, async_setup_assistant, async_setup_house
from .telegram_harness import ALICE_ID, BOB_ID, BOT_TOKEN

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.typing import (  # type: ignore[import-untyped]
        ClientSessionGenerator,
    )
    from syrupy.assertion import SnapshotAssertion

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

PASSWORD = "hunter2-very-secret"  # noqa: S105 - the secret that must not leak
FACT = "Keeps the spare key under the blue flowerpot"
MESSAGE = "Remember that I keep the spare key under the blue flowerpot"
REPLY = "Noted, the spare key location is safe with me."


async def test_diagnostics_hold_no_secret_and_no_personal_text(
    hass: HomeAssistant,
    hass_client: ClientSessionGenerator,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    hass_admin_user: Any,
    snapshot: SnapshotAssertion,
) -> None:
    """A remembered fact, a message, a password in the URL: none is in the file."""
    await async_setup_house(hass)
    assert await async_setup_component(hass, "diagnostics", {})
    host = fake_ollama.url.split("://", 1)[1]
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=MODEL,
        unique_id=fake_ollama.url,
        data={
            CONF_OLLAMA_URL: f"http://assistant:{PASSWORD}@{host}",
            CONF_MODEL: MODEL,
        },
        options={
            CONF_REQUEST_TIMEOUT: 10,
            CONF_ALLOWED_USER_IDS: [ALICE_ID, BOB_ID],
            CONF_USER_MAPPING: {str(ALICE_ID): hass_admin_user.id},
        },
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()

    fake_ollama.tool_call("remember", {"fact": FACT}).reply(REPLY)
    await telegram.send_text(MESSAGE)
    await telegram.wait_for_sent(1)
    await hass.async_block_till_done()

    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, entry)
    dump = json.dumps(diagnostics)
    for secret in (
        PASSWORD,
        BOT_TOKEN,
        "flowerpot",
        "spare key",
        hass_admin_user.id,
        str(ALICE_ID),
        str(BOB_ID),
    ):
        assert secret not in dump, secret

    # What helps: versions, the server without credentials, counts, latencies.
    assert diagnostics["entry"]["data"][CONF_OLLAMA_URL] == f"http://{host}"
    assert diagnostics["entry"]["options"][CONF_USER_MAPPING] == "**REDACTED**"
    assert diagnostics["versions"]["langgraph"]
    assert diagnostics["counts"]["profile_entries"] == 1
    assert diagnostics["model"]["status"] == "ok"
    [turn] = diagnostics["recent_turns"]
    assert turn["source"] == "telegram"
    assert turn["ok"] is True
    assert turn["seconds"] > 0
    assert "remember" in diagnostics["tools"]
    # The whole layout, without what changes from run to run (or with the
    # tables and tools other features add).
    assert diagnostics == snapshot(
        exclude=props(
            "counts",
            "tools",
            "context_tokens",
            "versions",
            "ollama_url",
            "ts",
            "seconds",
            "model_seconds",
            "checked_at",
            "unique_id",
        )
    )


async def test_diagnostics_list_recent_failures(
    hass: HomeAssistant,
    hass_client: ClientSessionGenerator,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A failed turn shows up with its (fixed) explanation, not the message."""
    await async_setup_house(hass)
    assert await async_setup_component(hass, "diagnostics", {})
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=MODEL,
        unique_id=fake_ollama.url,
        data={CONF_OLLAMA_URL: fake_ollama.url, CONF_MODEL: MODEL},
        options={CONF_REQUEST_TIMEOUT: 10},
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    fake_ollama.error(500, "out of memory")
    await telegram.send_text(MESSAGE)
    [sent] = await telegram.wait_for_sent(1)

    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, entry)
    [turn] = diagnostics["recent_turns"]
    assert turn["ok"] is False
    assert [e["error"] for e in diagnostics["recent_errors"]] == [sent["text"]]
    assert "spare key" not in json.dumps(diagnostics)


async def test_diagnostics_while_the_database_is_locked(
    hass: HomeAssistant,
    hass_client: ClientSessionGenerator,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """No counts from a locked file, and the rest of the download as usual."""
    await async_setup_house(hass)
    assert await async_setup_component(hass, "diagnostics", {})
    entry = await async_setup_assistant(hass, fake_ollama)
    # The startup reads (pending tasks, interrupted replies, the sensors) run
    # in the background; one that finished after the lock would show the file
    # working again (a clean-clone CI run got the counts that way).
    await hass.async_block_till_done(wait_background_tasks=True)
    entry.runtime_data.assistant.database.gate.failed("database is locked")
    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, entry)
    assert diagnostics["counts"] == "unavailable: StorageUnavailableError"
    assert diagnostics["model"]["status"] == "ok"
    assert diagnostics["versions"]["langgraph"]


def test_a_package_that_is_not_installed_has_no_version() -> None:
    """A missing package is listed without a version instead of failing."""
    assert platform._package_version("ha-personal-assistant-none") is None
    installed = platform._package_version("langgraph")
    assert installed == platform.PACKAGE_VERSIONS["langgraph"] is not None
