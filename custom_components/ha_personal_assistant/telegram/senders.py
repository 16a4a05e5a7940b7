"""Who writes on Telegram: who is let in, who may act, as whom, in which language."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..i18n import async_texts, pick_language
from ..models import Speaker
from ..policy.people import is_known
from .incoming import person

if TYPE_CHECKING:
    from collections.abc import Mapping

    from homeassistant.core import HomeAssistant

    from ..i18n import Texts
    from .incoming import Incoming


class Senders:
    """The options' allowed users and mapping, and each sender's language."""

    def __init__(
        self,
        hass: HomeAssistant,
        *,
        allowed_user_ids: frozenset[int],
        user_mapping: Mapping[str, str],
    ) -> None:
        """Keep the options; the languages are learned from the updates."""
        self.hass = hass
        self.allowed_user_ids = allowed_user_ids
        self.user_mapping = dict(user_mapping)
        # Each sender's Telegram language_code, from the raw updates (inbound.py).
        self._languages: dict[int, str] = {}

    def lets_in(self, user_id: int) -> bool:
        """Tell whether the options' allowed list (empty: everyone) has the user."""
        return not self.allowed_user_ids or user_id in self.allowed_user_ids

    def note_language(self, user_id: int, code: str) -> None:
        """Remember a Telegram user's language_code."""
        self._languages[user_id] = code

    def language_of(self, user_id: int) -> str | None:
        """Return a Telegram user's language_code, if their updates told it."""
        return self._languages.get(user_id)

    def ha_user_id(self, incoming: Incoming) -> str | None:
        """Return the HA user the sender is mapped to, if any."""
        return self.user_mapping.get(str(incoming.user_id))

    def is_known(self, incoming: Incoming) -> bool:
        """Tell whether the sender may change state and confirm (see people.py)."""
        return is_known(
            self.hass,
            bot_entry_id=incoming.bot_entry_id,
            user_id=incoming.user_id,
            allowed_user_ids=self.allowed_user_ids,
            user_mapping=self.user_mapping,
        )

    def speaker(self, incoming: Incoming) -> Speaker:
        """Return who wrote, as the assistant and its safety layers see them."""
        return Speaker(
            person=person(incoming),
            name=incoming.first_name,
            ha_user_id=self.ha_user_id(incoming),
            chat_id=incoming.chat_id,
            may_act=self.is_known(incoming),
            language=pick_language(incoming.language, self.hass.config.language),
        )

    async def async_texts(self, incoming: Incoming) -> Texts:
        """Return the fixed texts in the sender's language, else HA's."""
        return await async_texts(self.hass, incoming.language)
