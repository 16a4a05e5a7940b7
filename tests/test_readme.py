"""The README and docs/ pages: the options table matches the form, links resolve."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.data_entry_flow import FlowResultType, section
from homeassistant.helpers.selector import BooleanSelector, NumberSelector
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.ha_personal_assistant.const import (
    CONF_USER_MAPPING,
    DEFAULT_CONFIRMATION_TIMEOUT,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_NUM_CTX,
    DEFAULT_NUM_PREDICT,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SESSION_TIMEOUT,
    DOMAIN,
    MAX_CONFIRMATION_TIMEOUT,
    MAX_KEEP_ALIVE,
    MAX_NUM_CTX,
    MAX_NUM_PREDICT,
    MAX_REQUEST_TIMEOUT,
    MAX_SESSION_TIMEOUT,
    MIN_CONFIRMATION_TIMEOUT,
    MIN_KEEP_ALIVE,
    MIN_NUM_CTX,
    MIN_NUM_PREDICT,
    MIN_REQUEST_TIMEOUT,
    MIN_SESSION_TIMEOUT,
)

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
DEFAULT_LISTS = "docs/security.md#the-default-permission-lists"
OPTIONS_HEADER = "| Option | Default | Range | Meaning |"


def options_table() -> dict[str, dict[str, str]]:
    """Return the README's options table: option key -> its Default and Range."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index(OPTIONS_HEADER)
    rows: dict[str, dict[str, str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        key = re.match(r"`([a-z_]+)`", cells[0])
        assert key, f"An options row does not start with a `key`: {line}"
        rows[key.group(1)] = {"default": cells[1], "range": cells[2]}
    return rows


def numbers(cell: str) -> list[int]:
    """Return the whole numbers written in a cell ("3,600" is 3600)."""
    return [int(found.replace(",", "")) for found in re.findall(r"-?\d[\d,]*", cell)]


def unit(cell: str) -> str:
    """Return the unit a cell ends with ("30 to 3,600 s" -> "s")."""
    return cell.rsplit(maxsplit=1)[-1]


def default_list(option: str) -> set[str]:
    """Return the entries docs/security.md lists as an option's default."""
    text = (DOCS / "security.md").read_text(encoding="utf-8")
    block = text.split("## The default permission lists", 1)[1].split("\n## ", 1)[0]
    pattern = rf"^- `{option}` \([^)]*\): (.+?)\.$"
    match = re.search(pattern, block, re.MULTILINE | re.DOTALL)
    assert match, f"docs/security.md lists no default for {option}"
    return set(re.findall(r"`([^`]+)`", match.group(1)))


async def options_form(hass: HomeAssistant) -> dict[str, Any]:
    """Open the options dialog of a new Ollama entry, as a user would."""
    assert await async_setup_component(hass, "homeassistant", {})
    entry = MockConfigEntry(
        domain=DOMAIN,
        title="Personal Assistant",
        data={"ollama_url": "http://192.168.1.10:11434", "model": "qwen3:8b"},
        options={},
        unique_id="http://192.168.1.10:11434",
    )
    entry.add_to_hass(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert result["type"] is FlowResultType.FORM
    return result


def form_fields(result: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Return every field of the form, sections opened: key -> (default, selector)."""
    fields: dict[str, tuple[Any, Any]] = {}
    for key, value in result["data_schema"].schema.items():
        if isinstance(value, section):
            fields.update(form_fields({"data_schema": value.schema}))
            continue
        shown = (key.description or {}).get("suggested_value")
        fields[str(key.schema)] = (shown, value)
    return fields


def selector_of(value: Any) -> Any:
    """Return the selector of a field (a number box is wrapped in vol.All)."""
    return value.validators[0] if hasattr(value, "validators") else value


async def test_readme_options_table_lists_every_option_of_the_dialog(
    hass: HomeAssistant,
) -> None:
    """Each field of the options dialog, and the user mapping step, has a row."""
    fields = form_fields(await options_form(hass))
    rows = options_table()
    assert sorted(rows) == sorted({*fields, CONF_USER_MAPPING})


async def test_readme_options_defaults_and_ranges_match_the_dialog(
    hass: HomeAssistant,
) -> None:
    """What the README says a new entry shows, and allows, is what the form does."""
    rows = options_table()
    for option, (shown, value) in form_fields(await options_form(hass)).items():
        row = rows[option]
        selector = selector_of(value)
        if isinstance(selector, NumberSelector):
            config = selector.config
            assert numbers(row["default"]) == [shown], option
            assert numbers(row["range"]) == [config["min"], config["max"]], option
            assert unit(row["default"]) == config["unit_of_measurement"], option
            assert unit(row["range"]) == config["unit_of_measurement"], option
        elif isinstance(selector, BooleanSelector):
            assert row["default"] == ("on" if shown else "off"), option
            assert row["range"] == "on or off", option
        elif shown:
            assert DEFAULT_LISTS in row["default"], option
            assert default_list(option) == set(shown), option
        else:
            assert row["default"] == "empty", option
    assert rows[CONF_USER_MAPPING]["default"] == "empty"


def test_readme_numbers_are_the_constants() -> None:
    """The number rows hold const.py's defaults and ranges, whatever the form does."""
    rows = options_table()
    expected = {
        "confirmation_timeout": (
            DEFAULT_CONFIRMATION_TIMEOUT,
            MIN_CONFIRMATION_TIMEOUT,
            MAX_CONFIRMATION_TIMEOUT,
        ),
        "session_timeout": (
            DEFAULT_SESSION_TIMEOUT,
            MIN_SESSION_TIMEOUT,
            MAX_SESSION_TIMEOUT,
        ),
        "num_ctx": (DEFAULT_NUM_CTX, MIN_NUM_CTX, MAX_NUM_CTX),
        "num_predict": (DEFAULT_NUM_PREDICT, MIN_NUM_PREDICT, MAX_NUM_PREDICT),
        "keep_alive": (DEFAULT_KEEP_ALIVE, MIN_KEEP_ALIVE, MAX_KEEP_ALIVE),
        "request_timeout": (
            DEFAULT_REQUEST_TIMEOUT,
            MIN_REQUEST_TIMEOUT,
            MAX_REQUEST_TIMEOUT,
        ),
    }
    for option, (default, low, high) in expected.items():
        assert numbers(rows[option]["default"]) == [default], option
        assert numbers(rows[option]["range"]) == [low, high], option


async def test_user_mapping_is_the_step_after_allowed_users(
    hass: HomeAssistant,
) -> None:
    """The README's user_mapping row is the second step the dialog opens."""
    result = await options_form(hass)
    submission = {
        str(key.schema): (key.description or {}).get("suggested_value")
        for key, value in result["data_schema"].schema.items()
        if not isinstance(value, section)
    }
    submission = {key: shown for key, shown in submission.items() if shown != ""}
    submission["allowed_user_ids"] = ["123456789"]
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], submission
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == CONF_USER_MAPPING


def slug(heading: str) -> str:
    """Return GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Return the anchors of a markdown page's headings (code blocks skipped)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(heading) for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


PAGES = [README, *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_links_between_readme_and_docs_resolve(page: Path) -> None:
    """Every relative link names a file that exists, and an anchor it has."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _hash, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name} links to a missing {target}"
        if anchor and linked.suffix == ".md" and linked.parent in {ROOT, DOCS}:
            assert anchor in anchors(linked), f"{page.name}: no anchor {target}"


def test_readme_links_every_docs_page() -> None:
    """Each page in docs/ is reachable from the README."""
    readme = README.read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        assert f"(docs/{page.name}" in readme, f"README does not link {page.name}"
