"""Fixed texts in each person's language: Telegram's language_code, else HA's."""

from __future__ import annotations

import ast
import asyncio
import json
import re
import string
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.components import conversation
from homeassistant.core import Context
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import issue_registry as ir

from custom_components.ha_personal_assistant.const import DOMAIN
from custom_components.ha_personal_assistant.i18n import (
    ENGLISH,
    LANGUAGES,
    Texts,
    load_texts,
    match_language,
    pick_language,
)
from custom_components.ha_personal_assistant.policy.rules import (
    DEFAULT_BLOCKED_SERVICES,
    DEFAULT_CONFIRM_SERVICES,
)

from .common import async_setup_assistant, async_setup_house, fixed_text
from .telegram_harness import ALICE_ID, BOB_ID

if TYPE_CHECKING:
    from collections.abc import Iterator

    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

INTEGRATION = Path(__file__).parent.parent / "custom_components" / DOMAIN
STRINGS = json.loads((INTEGRATION / "strings.json").read_text("utf-8"))
ZH = "zh-Hans"
UNLOCK = {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"}
# hassfest's rules for a translated value (script/hassfest/translations.py).
_HTML = re.compile(r"<[a-z].*?>", re.IGNORECASE)
_SINGLE_QUOTED = re.compile(r"'{\w+}'")
# The keys of what reading an attached file raises (generate.py, media.py).
_MEDIA_ERRORS = (
    "media_too_large_unknown",
    "file_not_text",
    "file_empty",
    "pdf_unreadable",
    "pdf_encrypted",
    "pdf_too_many_pages",
    "pdf_no_text",
)
_KEY = re.compile(r"^(?!.+[_-]{2})(?![_-])[a-z0-9-_]+(?<![_-])$")


def _flat(node: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    for key, value in node.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from _flat(value, path)
        else:
            yield path, value


def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def _translation(language: str) -> dict[str, str]:
    path = INTEGRATION / "translations" / f"{language}.json"
    return dict(_flat(json.loads(path.read_text("utf-8"))))


@pytest.mark.parametrize(
    ("code", "language"),
    [
        ("de", "de"),
        ("de-AT", "de"),
        ("pt-br", "pt"),
        ("pt_BR", "pt"),
        ("zh-hans", "zh-Hans"),
        ("zh", "zh-Hans"),
        ("zh-CN", "zh-Hans"),
        ("zh-TW", "zh-Hans"),
        ("EN-gb", "en"),
        ("uk", "uk"),
        ("ja", None),
        ("", None),
        (None, None),
    ],
)
def test_a_language_tag_takes_the_shipped_language(
    code: str | None, language: str | None
) -> None:
    """Regional variants take their language; every Chinese tag takes zh-Hans."""
    assert match_language(code) == language


def test_the_first_shipped_language_wins_else_english() -> None:
    """Telegram's language when shipped, else HA's, else English."""
    assert pick_language("ja", "fr") == "fr"
    assert pick_language("de", "fr") == "de"
    assert pick_language(None, "xx") == "en"


@pytest.mark.parametrize("folder", ["translations", "texts"])
def test_every_shipped_language_has_a_file_and_no_other(folder: str) -> None:
    """translations/ and texts/ hold exactly the languages chosen from."""
    files = {path.stem for path in (INTEGRATION / folder).glob("*.json")}
    assert files == set(LANGUAGES)
    assert {"en", "de", "fr", "es", "it", "nl", "pl", "pt", "ru", "uk"} < files
    assert "zh-Hans" in files


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_text_is_translated_with_the_same_placeholders(language: str) -> None:
    """Each file has every key of strings.json, and keeps its {placeholders}."""
    english = dict(_flat(STRINGS))
    translated = _translation(language)
    assert set(translated) == set(english)
    for key, text in translated.items():
        assert _placeholders(text) == _placeholders(english[key]), key
        # What hassfest refuses in a translation.
        assert text == text.strip(), key
        assert not _HTML.search(text), key
        assert not _SINGLE_QUOTED.search(text), key
        assert all(_KEY.match(part) for part in key.split(".")), key
        words = re.sub(r"\{\w+\}", "", text)
        if (
            language != "en"
            and key.startswith("exceptions.")
            and sum(c.isalpha() for c in words) >= 12
        ):
            # What people read is written for the language, not copied (a
            # word or two, such as "minutes", may be the same; the product's
            # name is).
            assert text != english[key], key


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_chat_text_is_translated_with_the_same_placeholders(
    language: str,
) -> None:
    """Each texts/ file has every key of the English one, and its {placeholders}."""
    english = _texts(ENGLISH)
    translated = _texts(language)
    assert set(translated) == set(english)
    for key, text in translated.items():
        assert _placeholders(text) == _placeholders(english[key]), key
        assert text == text.strip(), key
        assert not _HTML.search(text), key
        assert _KEY.match(key), key
        words = re.sub(r"\{\w+\}", "", text)
        if language != ENGLISH and sum(c.isalpha() for c in words) >= 12:
            # Written for the language, not copied (see above).
            assert text != english[key], key


def test_the_errors_and_the_chat_texts_are_apart() -> None:
    """Exceptions holds only what the code raises; the chat texts are in texts/.

    A key in both is an error that is also said in a chat (a file Telegram
    or an AI task brought that has no text): the same words in both places.
    """
    raised = set(_raised_keys())
    errors = STRINGS["exceptions"]
    assert set(errors) == raised
    chat = _texts(ENGLISH)
    for key in raised & set(chat):
        assert chat[key] == errors[key]["message"], key
    assert "confirm_request" in chat
    assert "confirm_request" not in errors


def test_a_translation_that_breaks_a_text_falls_back_to_english(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A missing key or different placeholders: the English text is used."""
    (tmp_path / "en.json").write_text(
        json.dumps({"hello": "Hello {name}", "bye": "Bye", "left": "Left out"}),
        "utf-8",
    )
    (tmp_path / "de.json").write_text(
        json.dumps({"hello": "Hallo {nom}", "bye": "Tschüss", "extra": "x"}), "utf-8"
    )
    texts = Texts("de", load_texts(tmp_path, "de"))
    assert texts("hello", name="Ann") == "Hello Ann"
    assert texts("bye") == "Tschüss"
    assert texts("left") == "Left out"
    assert texts("extra") == "extra"
    assert "string hello failed" in caplog.text


def _texts(language: str) -> dict[str, str]:
    path = INTEGRATION / "texts" / f"{language}.json"
    data: dict[str, str] = json.loads(path.read_text("utf-8"))
    return data


def _raised_keys() -> Iterator[str]:
    """Return each translation_key the package raises an error with."""
    errors = {
        "HomeAssistantError",
        "ServiceValidationError",
        "ConfigEntryError",
        "ConfigEntryNotReady",
        "ConfigEntryAuthFailed",
    }
    for path in INTEGRATION.rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in errors
            ):
                continue
            for keyword in node.keywords:
                if keyword.arg != "translation_key":
                    continue
                if isinstance(keyword.value, ast.Constant):
                    yield str(keyword.value.value)
                else:
                    # err.key of a file's MediaError (ai_task.py): the keys
                    # the attachments' reading raises.
                    yield from _MEDIA_ERRORS


def _string_literals() -> Iterator[str]:
    for path in INTEGRATION.rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(
                node,
                (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef),
            )
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
            ):
                yield node.value


def test_no_fixed_text_is_left_in_the_code() -> None:
    """The texts people read come from the translations, not from constants.

    Every piece (between placeholders) of every exceptions and chat text
    longer than a few words must not be a string in the package's code.
    """
    code = "\n".join(_string_literals())
    leftovers = []
    every = {key: value["message"] for key, value in STRINGS["exceptions"].items()}
    for key, text in (every | _texts(ENGLISH)).items():
        if key.startswith("source_"):
            # The integration's names of untrusted text: the model reads them
            # too, so they stay in the code and are translated when shown.
            continue
        for piece in re.split(r"\{\w+\}|\n", text):
            piece = piece.strip(" .,:;()")  # noqa: PLW2901
            if len(piece) >= 20 and piece in code:
                leftovers.append((key, piece))
    assert leftovers == []


# --------------------------------------------------------------------------
# Through real Home Assistant and telegram_bot.


async def _settle(hass: HomeAssistant) -> None:
    await asyncio.sleep(0.1)
    await hass.async_block_till_done()


def _buttons(message: dict[str, Any]) -> list[tuple[str, str]]:
    rows = message["reply_markup"]["inline_keyboard"]
    return [(b["text"], b["callback_data"]) for row in rows for b in row]


async def _ask_to_unlock(
    telegram: TelegramHarness, fake_ollama: FakeOllama, chat_id: int
) -> dict[str, Any]:
    fake_ollama.tool_call("call_service", UNLOCK).reply("…")
    before = len(telegram.sent_messages(chat_id))
    await telegram.send_text("Unlock the front door", chat_id=chat_id)
    await telegram.wait_for_sent(before + 2, chat_id=chat_id)
    return next(
        m for m in reversed(telegram.bot_messages(chat_id)) if m.get("reply_markup")
    )


async def _help(telegram: TelegramHarness, chat_id: int) -> str:
    before = len(telegram.sent_messages(chat_id))
    await telegram.send_command("/help", chat_id=chat_id)
    await telegram.wait_for_sent(before + 1, chat_id=chat_id)
    return str(telegram.sent_messages(chat_id)[-1]["text"])


@pytest.fixture(autouse=True)
def fast_demo_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the demo locks move at once instead of after two seconds."""
    monkeypatch.setattr("homeassistant.components.demo.lock.LOCK_UNLOCK_DELAY", 0)


async def test_a_german_user_confirms_in_german(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A German user reads the request, buttons, outcome and /help in German."""
    telegram.languages[ALICE_ID] = "de"
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)

    request = await _ask_to_unlock(telegram, fake_ollama, ALICE_ID)
    assert request["text"] == (
        "Bitte bestätigen:\nAufschließen: Front Door (lock.front_door)\n\n"
        "Diese Anfrage verfällt in 5 Minuten."
    )
    (confirm, confirm_data), (cancel, _) = _buttons(request)
    assert (confirm, cancel) == ("Bestätigen", "Abbrechen")

    await telegram.press_button(confirm_data, message_id=request["message_id"])
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(hass)
    assert hass.states.get("lock.front_door").state == "unlocked"
    done = "Erledigt: Aufschließen: Front Door (lock.front_door)"
    assert telegram.calls("answerCallbackQuery")[-1]["text"] == done
    assert telegram.calls("editMessageText")[-1]["text"] == done

    before = len(telegram.sent_messages(ALICE_ID))
    await telegram.send_command("/actions", chat_id=ALICE_ID)
    await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    actions = telegram.sent_messages(ALICE_ID)[-1]["text"].splitlines()
    assert actions[0] == "Deine letzten Aktionen:"
    assert actions[1].endswith("lock.unlock lock.front_door: bestätigt, ausgeführt")

    help_text = await _help(telegram, ALICE_ID)
    assert help_text == fixed_text("help", "de")
    assert help_text.startswith("Ich bin dein Hausassistent.")


async def test_a_chinese_user_cancels_in_chinese(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A zh-hans Telegram user reads everything in Simplified Chinese."""
    telegram.languages[BOB_ID] = "zh-hans"
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)

    request = await _ask_to_unlock(telegram, fake_ollama, BOB_ID)
    unlock = fixed_text("verb_lock_unlock", ZH, names="Front Door (lock.front_door)")
    assert unlock.startswith("开锁")
    assert request["text"] == fixed_text(
        "confirm_request",
        ZH,
        summary=unlock,
        expiry=fixed_text("expiry_minutes", ZH, count=5),
    )
    assert request["text"].startswith("请确认")
    assert request["text"].endswith("此请求将在 5 分钟后失效。")
    (confirm, _), (cancel, cancel_data) = _buttons(request)
    assert (confirm, cancel) == ("确认", "取消")

    await telegram.press_button(
        cancel_data, chat_id=BOB_ID, message_id=request["message_id"]
    )
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(hass)
    assert hass.states.get("lock.front_door").state == "locked"
    cancelled = fixed_text("cancelled", ZH, summary=unlock)
    assert cancelled.startswith("已取消")
    assert telegram.calls("editMessageText")[-1]["text"] == cancelled

    help_text = await _help(telegram, BOB_ID)
    assert help_text == fixed_text("help", ZH)
    assert help_text.startswith("我是你的家居助手。")
    # Each person in their own language: Alice still reads English.
    assert await _help(telegram, ALICE_ID) == fixed_text("help")


async def test_an_unshipped_language_falls_back_to_home_assistants(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A Japanese Telegram user in a French home reads French."""
    hass.config.language = "fr"
    telegram.languages[ALICE_ID] = "ja"
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)

    assert await _help(telegram, ALICE_ID) == fixed_text("help", "fr")
    before = len(telegram.sent_messages(ALICE_ID))
    await telegram.send_command("/nonsense", chat_id=ALICE_ID)
    await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    assert telegram.sent_messages(ALICE_ID)[-1]["text"] == fixed_text(
        "unknown_command", "fr", command="/nonsense"
    )


async def test_assist_asks_in_the_conversations_language(
    hass: HomeAssistant, fake_ollama: FakeOllama, hass_admin_user: Any
) -> None:
    """A German Assist conversation gets the prompt and the outcome in German."""
    await async_setup_house(hass)
    entry: MockConfigEntry = await async_setup_assistant(hass, fake_ollama)
    agent_id = er.async_get(hass).async_get_entity_id(
        "conversation", DOMAIN, entry.entry_id
    )
    fake_ollama.tool_call("call_service", UNLOCK).reply("Gern.")

    async def converse(text: str, conversation_id: str | None = None) -> Any:
        return await conversation.async_converse(
            hass,
            text,
            conversation_id,
            Context(user_id=hass_admin_user.id),
            language="de",
            agent_id=agent_id,
        )

    asked = await converse("Schließ die Haustür auf")
    speech = asked.response.speech["plain"]["speech"]
    assert speech.endswith(
        "Bitte bestätigen: Aufschließen: Front Door (lock.front_door). "
        "Sag Ja oder Nein."
    )
    done = await converse("Ja", asked.conversation_id)
    await hass.async_block_till_done()
    assert done.response.speech["plain"]["speech"] == (
        "Erledigt: Aufschließen: Front Door (lock.front_door)"
    )
    assert hass.states.get("lock.front_door").state == "unlocked"


@pytest.mark.parametrize("language", LANGUAGES)
async def test_a_removed_link_is_marked_in_the_readers_language(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    language: str,
) -> None:
    """A link the reply may not carry is replaced in the reader's language."""
    telegram.languages[ALICE_ID] = language
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    fake_ollama.reply("Log in at https://ha-login.example.org/verify now.")

    await telegram.send_text("Where do I log in?", chat_id=ALICE_ID)
    sent = (await telegram.wait_for_sent(1, chat_id=ALICE_ID))[0]

    removed = fixed_text("link_removed", language)
    assert sent["text"] == f"Log in at {removed} now."
    if language != "en":
        assert removed != "[link removed]"
    if language == "de":
        assert sent["text"] == "Log in at [Link entfernt] now."


@pytest.mark.parametrize("language", LANGUAGES)
async def test_the_unsafe_permissions_repair_is_in_home_assistants_language(
    hass: HomeAssistant, fake_ollama: FakeOllama, language: str
) -> None:
    """What the repair lists is written in HA's language, and names the device."""
    hass.config.language = language
    await async_setup_house(hass)
    entry = await async_setup_assistant(
        hass,
        fake_ollama,
        confirm_services=sorted(
            DEFAULT_CONFIRM_SERVICES - {"lock.unlock", "cover.open_cover"}
        ),
        blocked_services=sorted(DEFAULT_BLOCKED_SERVICES - {"script"}),
    )
    issue = ir.async_get(hass).async_get_issue(
        DOMAIN, f"unsafe_permissions_{entry.entry_id}"
    )
    assert issue is not None
    settings = "; ".join(
        [
            fixed_text("weakened_confirm", language, entry="lock.unlock"),
            fixed_text("weakened_entrance", language, entry="cover.open_cover"),
            fixed_text("weakened_unblocked", language, entry="script"),
        ]
    )
    placeholders = {"settings": settings, "name": "Personal Assistant"}
    assert issue.translation_placeholders == placeholders
    # What the frontend shows: the issue's text with these placeholders.
    shown = _translation(language)["issues.unsafe_permissions.description"].format(
        **placeholders
    )
    if language != "en":
        assert "without confirmation" not in shown
        assert "no longer blocked" not in shown
    if language == "de":
        assert shown.startswith(
            "Die Berechtigungseinstellungen von Personal Assistant schwächen die "
            "sicheren Standardwerte: lock.unlock läuft ohne Bestätigung; "
            "cover.open_cover öffnet Garagentore, Tore und Türen ohne "
            "Bestätigung; script ist nicht mehr gesperrt."
        )
    assert await hass.config_entries.async_unload(entry.entry_id)
