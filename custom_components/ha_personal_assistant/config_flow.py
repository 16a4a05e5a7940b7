"""Config flow for the Personal Assistant: the model server and its models.

The options (timeouts, people, permissions) are in options_flow.py.
"""

import asyncio
from typing import TYPE_CHECKING, Any, override

from homeassistant.config_entries import (
    SOURCE_RECONFIGURE,
    ConfigEntry,
    ConfigFlow,
    ConfigFlowResult,
)
from homeassistant.core import callback
from homeassistant.helpers.selector import (
    SelectOptionDict,
    SelectSelector,
    SelectSelectorConfig,
    SelectSelectorMode,
    TextSelector,
    TextSelectorConfig,
    TextSelectorType,
)

from .backends import OllamaBackend, OpenAIBackend, normalize_base_url
from .const import (
    CONF_API_KEY,
    CONF_BACKEND,
    CONF_BASE_URL,
    CONF_EMBEDDING_MODEL,
    CONF_MODEL,
    CONF_OLLAMA_URL,
    DEFAULT_BASE_URL,
    DEFAULT_OLLAMA_URL,
    DOMAIN,
    EMBED_TIMEOUT,
    LOGGER,
)
from .model_server import (
    AuthFailed,
    Backend,
    ModelBackend,
    ModelNotFound,
    ModelServerError,
    ServerModel,
    async_is_private_url,
)
from .naming import DEVICE_NAME, assistant_name, generated_title
from .ollama_api import (
    CAPABILITY_COMPLETION,
    CAPABILITY_EMBEDDING,
    CAPABILITY_TOOLS,
    InvalidOllamaUrl,
    normalize_url,
    url_without_credentials,
)
from .options_flow import PersonalAssistantOptionsFlow, default_options

if TYPE_CHECKING:
    from collections.abc import Mapping

    # At run time HA aliases voluptuous to probatio, whose types HA's flow
    # helpers expect; the voluptuous stubs would not match them.
    import probatio as vol
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
                url = normalize_url(user_input[CONF_OLLAMA_URL])
            except InvalidOllamaUrl:
                errors[CONF_OLLAMA_URL] = "invalid_url"
            else:
                await self._async_claim_unique_id(url_without_credentials(url))
                self._backend = OllamaBackend(self.hass, url)
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
            except InvalidOllamaUrl:
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
