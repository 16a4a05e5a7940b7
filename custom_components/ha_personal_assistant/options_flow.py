"""Options flow for the Personal Assistant: timeouts, people, permissions, notices."""

from typing import TYPE_CHECKING, Any, Final

from homeassistant.config_entries import (
    ConfigFlowResult,
    OptionsFlowWithReload,
)
from homeassistant.data_entry_flow import SectionConfig, section
from homeassistant.helpers.selector import (
    BooleanSelector,
    EntitySelector,
    EntitySelectorConfig,
    NumberSelector,
    NumberSelectorConfig,
    NumberSelectorMode,
    SelectOptionDict,
    SelectSelector,
    SelectSelectorConfig,
    SelectSelectorMode,
    TextSelector,
    TextSelectorConfig,
    TextSelectorType,
)

from .const import (
    CONF_ADMIN_USER_IDS,
    CONF_ALLOWED_SCRIPTS,
    CONF_ALLOWED_USER_IDS,
    CONF_BACKEND,
    CONF_BLOCKED_SERVICES,
    CONF_CONFIRM_SERVICES,
    CONF_CONFIRMATION_TIMEOUT,
    CONF_FAST_PATH,
    CONF_HA_TOOLS,
    CONF_KEEP_ALIVE,
    CONF_NIGHT_HOURS,
    CONF_NOTICE_USER_IDS,
    CONF_NUM_CTX,
    CONF_NUM_PREDICT,
    CONF_OPEN_MINUTES,
    CONF_REQUEST_TIMEOUT,
    CONF_SESSION_TIMEOUT,
    CONF_STT_ENGINE,
    CONF_USER_MAPPING,
    CONF_VISION_MODEL,
    CONF_VOICE_REPLIES,
    CONF_WARM_CACHE,
    CONF_WEB_SEARCH,
    DEFAULT_CONFIRMATION_TIMEOUT,
    DEFAULT_FAST_PATH,
    DEFAULT_HA_TOOLS,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_NIGHT_HOURS,
    DEFAULT_NUM_CTX,
    DEFAULT_NUM_PREDICT,
    DEFAULT_OPEN_MINUTES,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SESSION_TIMEOUT,
    DEFAULT_VOICE_REPLIES,
    DEFAULT_WARM_CACHE,
    DEFAULT_WEB_SEARCH,
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
from .model_server import (
    Backend,
)
from .repairs import async_update_policy_issue
from .security.people import ALLOWED_CHAT_SUBENTRY
from .security.permissions import (
    DEFAULT_BLOCKED_SERVICES,
    DEFAULT_CONFIRM_SERVICES,
    SCRIPT,
    Policy,
    parse_entries,
)
from .tasks.notices import valid_night

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    # At run time HA aliases voluptuous to probatio, whose types HA's flow
    # helpers expect; the voluptuous stubs would not match them.
    import probatio as vol
    from homeassistant.core import HomeAssistant
else:
    import voluptuous as vol


def _number(minimum: int, maximum: int, unit: str) -> vol.All[int]:
    """Return a whole-number input box that stores an int."""
    return vol.All(
        NumberSelector(
            NumberSelectorConfig(
                min=minimum,
                max=maximum,
                step=1,
                unit_of_measurement=unit,
                mode=NumberSelectorMode.BOX,
            )
        ),
        vol.Coerce(int),
    )


# How long a door may stay open at night before a notice, in minutes.
MIN_OPEN_MINUTES: Final = 1
MAX_OPEN_MINUTES: Final = 720


OPTIONS_SCHEMA = vol.Schema(
    {
        vol.Required(
            CONF_CONFIRMATION_TIMEOUT, default=DEFAULT_CONFIRMATION_TIMEOUT
        ): _number(MIN_CONFIRMATION_TIMEOUT, MAX_CONFIRMATION_TIMEOUT, "s"),
        vol.Required(CONF_SESSION_TIMEOUT, default=DEFAULT_SESSION_TIMEOUT): _number(
            MIN_SESSION_TIMEOUT, MAX_SESSION_TIMEOUT, "min"
        ),
        vol.Required(CONF_NUM_CTX, default=DEFAULT_NUM_CTX): _number(
            MIN_NUM_CTX, MAX_NUM_CTX, "tokens"
        ),
        vol.Required(CONF_NUM_PREDICT, default=DEFAULT_NUM_PREDICT): _number(
            MIN_NUM_PREDICT, MAX_NUM_PREDICT, "tokens"
        ),
        vol.Required(CONF_KEEP_ALIVE, default=DEFAULT_KEEP_ALIVE): _number(
            MIN_KEEP_ALIVE, MAX_KEEP_ALIVE, "s"
        ),
        vol.Required(CONF_REQUEST_TIMEOUT, default=DEFAULT_REQUEST_TIMEOUT): _number(
            MIN_REQUEST_TIMEOUT, MAX_REQUEST_TIMEOUT, "s"
        ),
        vol.Required(CONF_WARM_CACHE, default=DEFAULT_WARM_CACHE): BooleanSelector(),
        vol.Required(CONF_WEB_SEARCH, default=DEFAULT_WEB_SEARCH): BooleanSelector(),
        vol.Required(CONF_HA_TOOLS, default=DEFAULT_HA_TOOLS): BooleanSelector(),
        vol.Required(CONF_FAST_PATH, default=DEFAULT_FAST_PATH): BooleanSelector(),
        vol.Optional(CONF_ALLOWED_USER_IDS): TextSelector(
            TextSelectorConfig(type=TextSelectorType.TEXT, multiple=True)
        ),
        # Voice notes and photos: empty means Assist's engine, and no photos.
        vol.Optional(CONF_STT_ENGINE): EntitySelector(
            EntitySelectorConfig(domain="stt")
        ),
        vol.Required(
            CONF_VOICE_REPLIES, default=DEFAULT_VOICE_REPLIES
        ): BooleanSelector(),
        vol.Optional(CONF_VISION_MODEL): TextSelector(),
        # Household notices (tasks/notices.py).
        vol.Required(CONF_NIGHT_HOURS, default=DEFAULT_NIGHT_HOURS): TextSelector(),
        vol.Required(CONF_OPEN_MINUTES, default=DEFAULT_OPEN_MINUTES): _number(
            MIN_OPEN_MINUTES, MAX_OPEN_MINUTES, "min"
        ),
        vol.Optional(CONF_NOTICE_USER_IDS): TextSelector(
            TextSelectorConfig(type=TextSelectorType.TEXT, multiple=True)
        ),
    }
)
# Optional options a user can empty: a field left empty arrives without its
# key, and must then clear the stored value.
CLEARABLE_OPTIONS: Final = (CONF_STT_ENGINE, CONF_VISION_MODEL)


# HA's Telegram bot integration, whose allowed chats name the people.
TELEGRAM_DOMAIN: Final = "telegram_bot"

# The permission policy, one folded form section per list: a section shows
# its name as a heading over the list and its description under it (a chip
# list shows its own label only on its add button). The fields are stored
# flat, next to the other options.
SECTION_CONFIRM: Final = "confirm"
SECTION_BLOCKED: Final = "blocked"
SECTION_SCRIPTS: Final = "scripts"
SECTION_ADMINS: Final = "admins"
PERMISSION_SECTIONS: Final = {
    SECTION_CONFIRM: CONF_CONFIRM_SERVICES,
    SECTION_BLOCKED: CONF_BLOCKED_SERVICES,
    SECTION_SCRIPTS: CONF_ALLOWED_SCRIPTS,
    SECTION_ADMINS: CONF_ADMIN_USER_IDS,
}


def _entry_selector(entries: Iterable[str]) -> SelectSelector:
    """Return a list of "domain" or "domain.service" entries, free text allowed."""
    return SelectSelector(
        SelectSelectorConfig(
            options=sorted(entries),
            multiple=True,
            custom_value=True,
            mode=SelectSelectorMode.DROPDOWN,
        )
    )


def _folded(field: str, selector: Any) -> section:
    """Return a folded form section holding one optional field."""
    return section(
        vol.Schema({vol.Optional(field): selector}), SectionConfig(collapsed=True)
    )


def _options_schema(policy: Policy, *, ollama: bool = True) -> vol.Schema:
    """Return the options form: general options and the folded permission lists.

    ``keep_alive`` is Ollama's: a server speaking OpenAI's API keeps its model
    loaded itself, so its entries do not show it.
    """
    general = OPTIONS_SCHEMA
    if not ollama:
        general = vol.Schema(
            {
                key: value
                for key, value in OPTIONS_SCHEMA.schema.items()
                if key != CONF_KEEP_ALIVE
            }
        )
    # Optional, so a submission without a section keeps that part of the policy.
    return general.extend(
        {
            vol.Optional(SECTION_CONFIRM): _folded(
                CONF_CONFIRM_SERVICES,
                _entry_selector(DEFAULT_CONFIRM_SERVICES | policy.confirm),
            ),
            vol.Optional(SECTION_BLOCKED): _folded(
                CONF_BLOCKED_SERVICES,
                _entry_selector(DEFAULT_BLOCKED_SERVICES | policy.blocked),
            ),
            vol.Optional(SECTION_SCRIPTS): _folded(
                CONF_ALLOWED_SCRIPTS,
                EntitySelector(EntitySelectorConfig(domain=SCRIPT, multiple=True)),
            ),
            vol.Optional(SECTION_ADMINS): _folded(
                CONF_ADMIN_USER_IDS,
                TextSelector(
                    TextSelectorConfig(type=TextSelectorType.TEXT, multiple=True)
                ),
            ),
        }
    )


def _suggested_permissions(options: Mapping[str, Any]) -> dict[str, Any]:
    """Return the permission sections prefilled: stored values, else the defaults."""
    policy = Policy.from_options(options)
    return {
        SECTION_CONFIRM: {CONF_CONFIRM_SERVICES: sorted(policy.confirm)},
        SECTION_BLOCKED: {CONF_BLOCKED_SERVICES: sorted(policy.blocked)},
        SECTION_SCRIPTS: {CONF_ALLOWED_SCRIPTS: sorted(policy.allowed_scripts)},
        SECTION_ADMINS: {
            CONF_ADMIN_USER_IDS: [
                str(user_id) for user_id in options.get(CONF_ADMIN_USER_IDS, [])
            ]
        },
    }


def _parse_permission(field: str, values: list[str]) -> Any:
    """Return the stored value of a submitted permission list.

    Raise ValueError with the form error key when an entry is malformed.
    """
    if field == CONF_ALLOWED_SCRIPTS:
        return sorted(set(values))
    if field == CONF_ADMIN_USER_IDS:
        try:
            return _parse_user_ids(values)
        except ValueError as err:
            error = "invalid_user_id"
            raise ValueError(error) from err
    try:
        return parse_entries(values)
    except ValueError as err:
        error = "invalid_service"
        raise ValueError(error) from err


def _telegram_names(hass: HomeAssistant) -> dict[int, str]:
    """Return people's names by Telegram user id, as the Telegram bot knows them.

    A private chat's id is its user's id, and telegram_bot titles each allowed
    chat with the name Telegram gave it when the chat was added.
    """
    names: dict[int, str] = {}
    for bot_entry in hass.config_entries.async_entries(TELEGRAM_DOMAIN):
        for subentry in bot_entry.subentries.values():
            chat_id = subentry.data.get("chat_id")
            title = subentry.title.strip()
            if (
                subentry.subentry_type == ALLOWED_CHAT_SUBENTRY
                and isinstance(chat_id, int)
                and chat_id > 0
                and title
                and title != str(chat_id)
            ):
                names.setdefault(chat_id, title)
    return names


def person_label(telegram_id: int, names: Mapping[int, str]) -> str:
    """Return how a Telegram user is shown: the name and the id, else the id."""
    if name := names.get(telegram_id):
        return f"{name} ({telegram_id})"
    return str(telegram_id)


def default_options() -> dict[str, Any]:
    """Return the options a new entry starts with."""
    return {
        CONF_CONFIRMATION_TIMEOUT: DEFAULT_CONFIRMATION_TIMEOUT,
        CONF_SESSION_TIMEOUT: DEFAULT_SESSION_TIMEOUT,
        CONF_NUM_CTX: DEFAULT_NUM_CTX,
        CONF_NUM_PREDICT: DEFAULT_NUM_PREDICT,
        CONF_KEEP_ALIVE: DEFAULT_KEEP_ALIVE,
        CONF_REQUEST_TIMEOUT: DEFAULT_REQUEST_TIMEOUT,
        CONF_WARM_CACHE: DEFAULT_WARM_CACHE,
        CONF_WEB_SEARCH: DEFAULT_WEB_SEARCH,
        CONF_HA_TOOLS: DEFAULT_HA_TOOLS,
        CONF_FAST_PATH: DEFAULT_FAST_PATH,
        CONF_ALLOWED_USER_IDS: [],
        CONF_USER_MAPPING: {},
        CONF_STT_ENGINE: "",
        CONF_VOICE_REPLIES: DEFAULT_VOICE_REPLIES,
        CONF_VISION_MODEL: "",
        CONF_NIGHT_HOURS: DEFAULT_NIGHT_HOURS,
        CONF_OPEN_MINUTES: DEFAULT_OPEN_MINUTES,
        CONF_NOTICE_USER_IDS: [],
    }


def _parse_user_ids(values: list[str]) -> list[int]:
    """Return Telegram user ids as ints, in order, without blanks or repeats.

    Raise ValueError if one is not a positive whole number.
    """
    user_ids: list[int] = []
    for value in values:
        text = value.strip()
        if not text:
            continue
        # isdigit alone would accept characters like "²" that int() rejects.
        if not (text.isascii() and text.isdigit()) or int(text) == 0:
            raise ValueError(text)
        if (user_id := int(text)) not in user_ids:
            user_ids.append(user_id)
    return user_ids


class PersonalAssistantOptionsFlow(OptionsFlowWithReload):
    """Change timeouts, the context window, web search, who may chat and act."""

    def __init__(self) -> None:
        """Start with no options chosen."""
        self._options: dict[str, Any] = {}

    async def async_step_init(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Edit the general options, the allowed Telegram users and permissions."""
        errors: dict[str, str] = {}
        current = {**default_options(), **self.config_entry.options}
        if user_input is not None:
            general = {
                k: v for k, v in user_input.items() if k not in PERMISSION_SECTIONS
            }
            for key in CLEARABLE_OPTIONS:
                general[key] = str(general.get(key) or "").strip()
            permissions: dict[str, Any] = {}
            try:
                allowed = _parse_user_ids(user_input.get(CONF_ALLOWED_USER_IDS, []))
            except ValueError:
                errors[CONF_ALLOWED_USER_IDS] = "invalid_user_id"
            try:
                # An emptied field arrives without its key: nobody listed.
                notice_ids = _parse_user_ids(user_input.get(CONF_NOTICE_USER_IDS, []))
            except ValueError:
                errors[CONF_NOTICE_USER_IDS] = "invalid_user_id"
            night = str(general.get(CONF_NIGHT_HOURS, DEFAULT_NIGHT_HOURS))
            if not valid_night(night):
                errors[CONF_NIGHT_HOURS] = "invalid_night_hours"
            general[CONF_NIGHT_HOURS] = night.replace(" ", "")
            for name, field in PERMISSION_SECTIONS.items():
                if (section_input := user_input.get(name)) is None:
                    continue
                try:
                    # An emptied field arrives without its key: an empty list.
                    permissions[field] = _parse_permission(
                        field, section_input.get(field, [])
                    )
                except ValueError as err:
                    # The frontend shows a section's error above the section.
                    errors[name] = str(err)
            if not errors:
                # Start from the current options so keys edited elsewhere survive.
                self._options = {
                    **current,
                    **general,
                    CONF_ALLOWED_USER_IDS: allowed,
                    CONF_NOTICE_USER_IDS: notice_ids,
                    **permissions,
                }
                if allowed:
                    return await self.async_step_user_mapping()
                self._options[CONF_USER_MAPPING] = {}
                return await self._async_save()
            suggested: Mapping[str, Any] = user_input
        else:
            suggested = {
                **current,
                CONF_ALLOWED_USER_IDS: [
                    str(user_id) for user_id in current[CONF_ALLOWED_USER_IDS]
                ],
                CONF_NOTICE_USER_IDS: [
                    str(user_id) for user_id in current[CONF_NOTICE_USER_IDS]
                ],
                **_suggested_permissions(current),
            }
        return self.async_show_form(
            step_id="init",
            data_schema=self.add_suggested_values_to_schema(
                _options_schema(
                    Policy.from_options(current),
                    ollama=self.config_entry.data.get(CONF_BACKEND)
                    != Backend.OPENAI_COMPATIBLE,
                ),
                suggested,
            ),
            errors=errors,
        )

    async def _async_save(self) -> ConfigFlowResult:
        """Store the options, warning in Repairs if the permissions are unsafe."""
        # Raised here as well as at setup, so the warning appears even while the
        # entry cannot start (Ollama down).
        await async_update_policy_issue(
            self.hass, self.config_entry.entry_id, self._options
        )
        return self.async_create_entry(data=self._options)

    async def async_step_user_mapping(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Link each allowed Telegram user to a Home Assistant user.

        Each field is labelled with the person's name where the Telegram bot
        knows it, and always with the id, which is what is stored. The label is
        the field's key: a form field shows its key when no translation names
        it, and these fields are one per person.
        """
        names = _telegram_names(self.hass)
        people = {
            person_label(telegram_id, names): str(telegram_id)
            for telegram_id in self._options[CONF_ALLOWED_USER_IDS]
        }
        if user_input is not None:
            self._options[CONF_USER_MAPPING] = {
                people[label]: user_id
                for label, user_id in user_input.items()
                if user_id and label in people
            }
            return await self._async_save()
        users = [
            SelectOptionDict(value=user.id, label=user.name or user.id)
            for user in await self.hass.auth.async_get_users()
            if user.is_active and not user.system_generated
        ]
        user_selector = SelectSelector(
            SelectSelectorConfig(options=users, mode=SelectSelectorMode.DROPDOWN)
        )
        schema = vol.Schema({vol.Optional(label): user_selector for label in people})
        known_users = {user["value"] for user in users}
        current: Mapping[str, str] = self.config_entry.options.get(
            CONF_USER_MAPPING, {}
        )
        return self.async_show_form(
            step_id="user_mapping",
            data_schema=self.add_suggested_values_to_schema(
                schema,
                {
                    label: current[telegram_id]
                    for label, telegram_id in people.items()
                    if current.get(telegram_id) in known_users
                },
            ),
        )
