"""Config flow for the Personal Assistant: model server, models and options."""

import asyncio
from typing import TYPE_CHECKING, Any, Final, override

from homeassistant.config_entries import (
    SOURCE_RECONFIGURE,
    ConfigEntry,
    ConfigFlow,
    ConfigFlowResult,
    OptionsFlowWithReload,
)
from homeassistant.core import callback
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

from .backends import (
    OllamaBackend,
    OpenAIBackend,
    normalize_base_url,
    normalize_ollama_url,
)
from .const import (
    CONF_ADMIN_USER_IDS,
    CONF_ALLOWED_SCRIPTS,
    CONF_ALLOWED_USER_IDS,
    CONF_API_KEY,
    CONF_BACKEND,
    CONF_BASE_URL,
    CONF_BLOCKED_SERVICES,
    CONF_CONFIRM_SERVICES,
    CONF_CONFIRMATION_TIMEOUT,
    CONF_EMBEDDING_MODEL,
    CONF_FAST_PATH,
    CONF_HA_TOOLS,
    CONF_KEEP_ALIVE,
    CONF_MODEL,
    CONF_NIGHT_HOURS,
    CONF_NOTICE_USER_IDS,
    CONF_NUM_CTX,
    CONF_NUM_PREDICT,
    CONF_OLLAMA_URL,
    CONF_OPEN_MINUTES,
    CONF_REQUEST_TIMEOUT,
    CONF_SESSION_TIMEOUT,
    CONF_STT_ENGINE,
    CONF_USER_MAPPING,
    CONF_VISION_MODEL,
    CONF_VOICE_REPLIES,
    CONF_WARM_CACHE,
    CONF_WEB_SEARCH,
    DEFAULT_BASE_URL,
    DEFAULT_CONFIRMATION_TIMEOUT,
    DEFAULT_FAST_PATH,
    DEFAULT_HA_TOOLS,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_NIGHT_HOURS,
    DEFAULT_NUM_CTX,
    DEFAULT_NUM_PREDICT,
    DEFAULT_OLLAMA_URL,
    DEFAULT_OPEN_MINUTES,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SESSION_TIMEOUT,
    DEFAULT_VOICE_REPLIES,
    DEFAULT_WARM_CACHE,
    DEFAULT_WEB_SEARCH,
    DOMAIN,
    EMBED_TIMEOUT,
    LOGGER,
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
    CAPABILITY_COMPLETION,
    CAPABILITY_EMBEDDING,
    CAPABILITY_TOOLS,
    AuthFailed,
    Backend,
    InvalidUrl,
    ModelBackend,
    ModelNotFound,
    ModelServerError,
    ServerModel,
    async_is_private_url,
    url_without_credentials,
)
from .naming import DEVICE_NAME, assistant_name, generated_title
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

STEP_USER_SCHEMA = vol.Schema(
    {
        vol.Required(CONF_OLLAMA_URL, default=DEFAULT_OLLAMA_URL): TextSelector(
            TextSelectorConfig(type=TextSelectorType.URL)
        ),
    }
)

STEP_BACKEND_SCHEMA = vol.Schema(
    {
        vol.Required(CONF_BACKEND, default=Backend.OLLAMA.value): SelectSelector(
            SelectSelectorConfig(
                options=[backend.value for backend in Backend],
                mode=SelectSelectorMode.LIST,
                translation_key=CONF_BACKEND,
            )
        ),
    }
)

STEP_OPENAI_SCHEMA = vol.Schema(
    {
        vol.Required(CONF_BASE_URL): TextSelector(
            TextSelectorConfig(type=TextSelectorType.URL)
        ),
        vol.Optional(CONF_API_KEY): TextSelector(
            TextSelectorConfig(type=TextSelectorType.PASSWORD)
        ),
    }
)

STEP_REAUTH_SCHEMA = vol.Schema(
    {
        vol.Optional(CONF_API_KEY): TextSelector(
            TextSelectorConfig(type=TextSelectorType.PASSWORD)
        ),
    }
)

STEP_RECONFIGURE_SCHEMA = vol.Schema(
    {
        vol.Required(CONF_OLLAMA_URL): TextSelector(
            TextSelectorConfig(type=TextSelectorType.URL)
        ),
    }
)


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


class PersonalAssistantConfigFlow(ConfigFlow, domain=DOMAIN):
    """Set up the assistant: which model server, where, and which models."""

    VERSION = 1

    def __init__(self) -> None:
        """Start with no server chosen."""
        self._url = ""
        self._api_key: str | None = None
        self._backend: ModelBackend | None = None
        self._models: list[ServerModel] = []
        # A model's capabilities, as far as the server reports them; None:
        # asking failed.
        self._infos: dict[str, tuple[str, ...] | None] = {}

    @staticmethod
    @callback
    @override
    def async_get_options_flow(
        config_entry: ConfigEntry,
    ) -> PersonalAssistantOptionsFlow:
        """Return the options flow."""
        return PersonalAssistantOptionsFlow()

    @property
    def _openai(self) -> bool:
        """Tell whether the server speaks OpenAI's API (not Ollama's)."""
        return self._backend is not None and (
            self._backend.backend is Backend.OPENAI_COMPATIBLE
        )

    @override
    async def async_step_user(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Ask which kind of model server the assistant uses."""
        if user_input is not None:
            if user_input.get(CONF_BACKEND) == Backend.OPENAI_COMPATIBLE:
                return await self.async_step_openai_compatible()
            return await self.async_step_ollama()
        return self.async_show_form(step_id="user", data_schema=STEP_BACKEND_SCHEMA)

    async def async_step_ollama(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Ask for the Ollama server's URL."""
        return await self._async_step_url("ollama", STEP_USER_SCHEMA, user_input, None)

    async def async_step_reconfigure(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Ask for the server's URL again, prefilled with the current one."""
        entry = self._get_reconfigure_entry()
        if entry.data.get(CONF_BACKEND) == Backend.OPENAI_COMPATIBLE:
            return await self.async_step_reconfigure_openai(user_input)
        return await self._async_step_url(
            "reconfigure",
            STEP_RECONFIGURE_SCHEMA,
            user_input,
            {CONF_OLLAMA_URL: entry.data[CONF_OLLAMA_URL]},
        )

    async def _async_step_url(
        self,
        step_id: str,
        schema: vol.Schema,
        user_input: dict[str, Any] | None,
        suggested: Mapping[str, Any] | None,
    ) -> ConfigFlowResult:
        """Validate the URL, claim it as unique id and load the server's models."""
        errors: dict[str, str] = {}
        if user_input is not None:
            suggested = user_input
            try:
                url = normalize_ollama_url(user_input[CONF_OLLAMA_URL])
            except InvalidUrl:
                errors[CONF_OLLAMA_URL] = "invalid_url"
            else:
                await self._async_claim_unique_id(url_without_credentials(url))
                self._backend = OllamaBackend(url)
                if not (errors := await self._async_load_models()):
                    self._url = url
                    return await self.async_step_model()
        return self.async_show_form(
            step_id=step_id,
            data_schema=self.add_suggested_values_to_schema(schema, suggested),
            errors=errors,
        )

    async def async_step_openai_compatible(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Ask for the base URL and key of a server speaking OpenAI's API."""
        return await self._async_step_openai_url(
            "openai_compatible", user_input, {CONF_BASE_URL: DEFAULT_BASE_URL}
        )

    async def async_step_reconfigure_openai(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Ask for the base URL and key again, prefilled with the current ones."""
        data = self._get_reconfigure_entry().data
        return await self._async_step_openai_url(
            "reconfigure_openai",
            user_input,
            {key: data[key] for key in (CONF_BASE_URL, CONF_API_KEY) if key in data},
        )

    async def _async_step_openai_url(
        self,
        step_id: str,
        user_input: dict[str, Any] | None,
        suggested: Mapping[str, Any],
    ) -> ConfigFlowResult:
        """Validate the base URL; warn if it leaves the home; load the models."""
        errors: dict[str, str] = {}
        if user_input is not None:
            suggested = user_input
            try:
                url = normalize_base_url(user_input[CONF_BASE_URL])
            except InvalidUrl:
                errors[CONF_BASE_URL] = "invalid_url"
            else:
                await self._async_claim_unique_id(url_without_credentials(url))
                self._url = url
                self._api_key = user_input.get(CONF_API_KEY) or None
                if not await async_is_private_url(url):
                    return await self.async_step_public_server()
                return await self._async_connect_openai(step_id, suggested)
        return self.async_show_form(
            step_id=step_id,
            data_schema=self.add_suggested_values_to_schema(
                STEP_OPENAI_SCHEMA, suggested
            ),
            errors=errors,
        )

    async def async_step_public_server(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Say that messages and the house's states would leave the home."""
        if user_input is not None:
            step_id = (
                "reconfigure_openai"
                if self.source == SOURCE_RECONFIGURE
                else "openai_compatible"
            )
            return await self._async_connect_openai(
                step_id, {CONF_BASE_URL: self._url, CONF_API_KEY: self._api_key or ""}
            )
        return self.async_show_form(
            step_id="public_server",
            data_schema=vol.Schema({}),
            description_placeholders={"url": url_without_credentials(self._url)},
        )

    async def _async_connect_openai(
        self, step_id: str, suggested: Mapping[str, Any]
    ) -> ConfigFlowResult:
        """List the server's models; show the URL form again with any error."""
        self._backend = OpenAIBackend(self.hass, self._url, self._api_key)
        await self._backend.async_prepare()
        if not (errors := await self._async_load_models()):
            return await self.async_step_model()
        return self.async_show_form(
            step_id=step_id,
            data_schema=self.add_suggested_values_to_schema(
                STEP_OPENAI_SCHEMA, suggested
            ),
            errors=errors,
        )

    async def async_step_reauth(
        self,
        entry_data: Mapping[str, Any],  # noqa: ARG002 - HA's signature
    ) -> ConfigFlowResult:
        """Ask for a new API key: the server refused the stored one."""
        return await self.async_step_reauth_confirm()

    async def async_step_reauth_confirm(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Check the new key against the server and reload the entry with it."""
        entry = self._get_reauth_entry()
        url: str = entry.data[CONF_BASE_URL]
        errors: dict[str, str] = {}
        if user_input is not None:
            api_key = user_input.get(CONF_API_KEY) or None
            backend = OpenAIBackend(self.hass, url, api_key)
            await backend.async_prepare()
            try:
                await backend.async_list_models()
            except AuthFailed:
                errors[CONF_API_KEY] = "invalid_auth"
            except ModelServerError as err:
                LOGGER.debug("Cannot list models at %s: %s", backend.where, err)
                errors["base"] = "cannot_connect_openai"
            else:
                data = {**entry.data, CONF_API_KEY: api_key}
                if api_key is None:
                    data.pop(CONF_API_KEY)
                return self.async_update_reload_and_abort(entry, data=data)
        return self.async_show_form(
            step_id="reauth_confirm",
            data_schema=STEP_REAUTH_SCHEMA,
            errors=errors,
            description_placeholders={
                "url": url_without_credentials(url),
                "name": assistant_name(self.hass, entry.entry_id),
            },
        )

    async def _async_claim_unique_id(self, unique_id: str) -> None:
        """Abort if another entry already uses this server."""
        if (
            self.source == SOURCE_RECONFIGURE
            and self._get_reconfigure_entry().unique_id == unique_id
        ):
            return
        await self.async_set_unique_id(unique_id)
        self._abort_if_unique_id_configured()

    async def _async_load_models(self) -> dict[str, str]:
        """Fetch the server's models and their capabilities; return form errors."""
        backend = self._backend
        assert backend is not None  # noqa: S101 - set by the URL step
        try:
            models = await backend.async_list_models()
        except AuthFailed:
            return {CONF_API_KEY: "invalid_auth"}
        except ModelServerError as err:
            LOGGER.debug("Cannot list models at %s: %s", backend.where, err)
            return {"base": self._error_key("cannot_connect")}
        except Exception:  # noqa: BLE001 - any failure must still show a form
            LOGGER.exception("Unexpected error listing models at %s", backend.where)
            return {"base": "unknown"}
        self._infos = {}
        if not self._openai:
            # OpenAI's /models says nothing about capabilities.
            results = await asyncio.gather(
                *(backend.async_capabilities(model.name) for model in models),
                return_exceptions=True,
            )
            for model, result in zip(models, results, strict=True):
                if isinstance(result, BaseException):
                    # The capabilities only sort the lists; the chosen model is
                    # checked again when the form is submitted.
                    LOGGER.debug("Cannot show model %s: %s", model.name, result)
                    self._infos[model.name] = None
                else:
                    self._infos[model.name] = result
        self._models = sorted(models, key=lambda model: model.name)
        if not self._chat_models():
            return {"base": self._error_key("no_models")}
        return {}

    def _chat_models(self) -> list[ServerModel]:
        """Return the installed models that can chat (not embedding-only)."""
        return [
            model
            for model in self._models
            if not (
                CAPABILITY_EMBEDDING in (caps := self._infos.get(model.name) or ())
                and CAPABILITY_COMPLETION not in caps
            )
        ]

    def _has_capability(self, model: ServerModel, capability: str) -> bool:
        """Return True if the server reported the capability for the model."""
        return capability in (self._infos.get(model.name) or ())

    def _model_schema(self) -> vol.Schema:
        """Return the model form: chat models, and all models for embeddings."""
        # Models that can call tools come first, so the first choice works.
        chat_models = sorted(
            self._chat_models(),
            key=lambda model: not self._has_capability(model, CAPABILITY_TOOLS),
        )
        embedding_models = sorted(
            self._models,
            key=lambda model: not self._has_capability(model, CAPABILITY_EMBEDDING),
        )
        return vol.Schema(
            {
                vol.Required(CONF_MODEL): SelectSelector(
                    SelectSelectorConfig(
                        options=[
                            SelectOptionDict(value=model.name, label=model.label)
                            for model in chat_models
                        ],
                        mode=SelectSelectorMode.DROPDOWN,
                    )
                ),
                vol.Optional(CONF_EMBEDDING_MODEL): SelectSelector(
                    SelectSelectorConfig(
                        options=[
                            SelectOptionDict(value=model.name, label=model.label)
                            for model in embedding_models
                        ],
                        mode=SelectSelectorMode.DROPDOWN,
                    )
                ),
            }
        )

    def _suggested_models(self) -> dict[str, str]:
        """Return the models to preselect: the current ones, else the likely ones."""
        names = {model.name for model in self._models}
        if self.source == SOURCE_RECONFIGURE:
            data = self._get_reconfigure_entry().data
            return {
                key: data[key]
                for key in (CONF_MODEL, CONF_EMBEDDING_MODEL)
                if data.get(key) in names
            }
        suggested: dict[str, str] = {}
        for model in self._chat_models():
            if self._has_capability(model, CAPABILITY_TOOLS):
                suggested[CONF_MODEL] = model.name
                break
        for model in self._models:
            if self._has_capability(model, CAPABILITY_EMBEDDING):
                suggested[CONF_EMBEDDING_MODEL] = model.name
                break
        return suggested

    async def async_step_model(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Choose the chat model and, optionally, the embedding model."""
        errors: dict[str, str] = {}
        suggested: Mapping[str, Any] = self._suggested_models()
        if user_input is not None:
            suggested = user_input
            await self._async_check_model(
                user_input[CONF_MODEL], CONF_MODEL, CAPABILITY_TOOLS, errors
            )
            if embedding_model := user_input.get(CONF_EMBEDDING_MODEL):
                await self._async_check_model(
                    embedding_model, CONF_EMBEDDING_MODEL, CAPABILITY_EMBEDDING, errors
                )
            if not errors:
                return self._async_finish(user_input[CONF_MODEL], embedding_model)
        return self.async_show_form(
            step_id="model",
            data_schema=self.add_suggested_values_to_schema(
                self._model_schema(), suggested
            ),
            errors=errors,
            description_placeholders={"url": url_without_credentials(self._url)},
        )

    async def _async_check_model(
        self, model: str, field: str, capability: str, errors: dict[str, str]
    ) -> None:
        """Ask the server about a model; add an error if it lacks the capability."""
        backend = self._backend
        assert backend is not None  # noqa: S101 - set by the URL step
        try:
            if capability == CAPABILITY_TOOLS:
                able = await backend.async_supports_tools(model)
            elif self._openai:
                # Only embedding something tells whether a model embeds.
                able = bool(await backend.async_embed(model, ["test"], EMBED_TIMEOUT))
            else:
                capabilities = await backend.async_capabilities(model)
                able = not capabilities or capability in capabilities
        except ModelNotFound:
            errors[field] = self._error_key("model_not_found")
            return
        except AuthFailed:
            errors["base"] = "invalid_auth"
            return
        except ModelServerError as err:
            LOGGER.debug("Cannot check model %s: %s", model, err)
            if self._openai and capability == CAPABILITY_EMBEDDING:
                errors[field] = self._error_key("not_embedding_model")
            else:
                errors["base"] = self._error_key("cannot_connect")
            return
        except Exception:  # noqa: BLE001 - any failure must still show a form
            LOGGER.exception("Unexpected error checking model %s", model)
            errors["base"] = "unknown"
            return
        if not able:
            errors[field] = self._error_key(
                "model_no_tools"
                if capability == CAPABILITY_TOOLS
                else "not_embedding_model"
            )

    def _error_key(self, key: str) -> str:
        """Return a form error's key: the server's own words where they differ."""
        return f"{key}_openai" if self._openai else key

    def _async_finish(
        self, model: str, embedding_model: str | None
    ) -> ConfigFlowResult:
        """Create the entry, or update the one being reconfigured."""
        data: dict[str, Any]
        if self._openai:
            data = {
                CONF_BACKEND: Backend.OPENAI_COMPATIBLE.value,
                CONF_BASE_URL: self._url,
            }
            if self._api_key:
                data[CONF_API_KEY] = self._api_key
            data[CONF_MODEL] = model
        else:
            data = {CONF_OLLAMA_URL: self._url, CONF_MODEL: model}
        if embedding_model:
            data[CONF_EMBEDDING_MODEL] = embedding_model
        if self.source != SOURCE_RECONFIGURE:
            # Titled as its device is named: one name in every screen.
            return self.async_create_entry(
                title=DEVICE_NAME, data=data, options=default_options()
            )
        entry = self._get_reconfigure_entry()
        # Keep a title the user chose; replace one generated from the model.
        title = (
            DEVICE_NAME if entry.title == generated_title(entry.data) else entry.title
        )
        return self.async_update_reload_and_abort(
            entry,
            unique_id=url_without_credentials(self._url),
            title=title,
            data=data,
        )


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
