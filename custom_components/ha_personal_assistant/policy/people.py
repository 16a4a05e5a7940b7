"""Who may act: known Telegram people, and the HA user every action runs as.

telegram_bot lets an update in when its chat *or* its sender is allowed, so
anyone in an allowed group can write to the assistant. Only *known* people
may change state or confirm: those on the assistant's allowed list
(``allowed_user_ids``), those mapped to an HA user (``user_mapping``), and
those whose own private chat telegram_bot allows (a private chat's id is its
user's id). Everyone else gets answers without actions.

Every service call runs as an HA user, never as the system (a Context without
a user): the mapped user, else one non-admin user the integration creates and
keeps for this (group ``system-users``), so HA's logbook and permissions see
who acted.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

from homeassistant.auth.const import GROUP_ID_USER
from homeassistant.helpers.storage import Store
from homeassistant.util.hass_dict import HassKey

from ..const import DOMAIN, LOGGER

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from homeassistant.core import HomeAssistant

# telegram_bot's subentries of allowed chats (``SUBENTRY_TYPE_ALLOWED_CHAT_IDS``).
ALLOWED_CHAT_SUBENTRY: Final = "allowed_chat_ids"
ACTING_USER_NAME: Final = "Personal Assistant"
STORE_KEY: Final = f"{DOMAIN}.acting_user"
STORE_VERSION: Final = 1

# What the model reads when a person the assistant does not know calls a
# refused tool (what the person reads is in the translations).
NOT_KNOWN_TOOL: Final = (
    "Refused: the person writing is not known to this assistant (a guest in "
    "a group chat). They may ask questions, but nothing can be changed, "
    "confirmed, remembered or forgotten for them. Tell them so."
)
# The taint source of such a person's turn: their words come from outside the
# household. The Confirm message names it in the person's language (i18n.py).
NOT_KNOWN_SOURCE: Final = "a message from someone the assistant does not know"

DATA_ACTING_USER: HassKey[str] = HassKey(f"{DOMAIN}_acting_user")
_DATA_LOCK: HassKey[asyncio.Lock] = HassKey(f"{DOMAIN}_acting_user_lock")


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def private_chat_allowed(hass: HomeAssistant, bot_entry_id: str, user_id: int) -> bool:
    """Tell whether the telegram_bot entry allows this user's own private chat."""
    bot_entry = hass.config_entries.async_get_entry(bot_entry_id)
    if bot_entry is None:
        return False
    return any(
        subentry.subentry_type == ALLOWED_CHAT_SUBENTRY
        and _as_int(subentry.data.get("chat_id")) == user_id
        for subentry in bot_entry.subentries.values()
    )


def is_known(
    hass: HomeAssistant,
    *,
    bot_entry_id: str,
    user_id: int,
    allowed_user_ids: Collection[int],
    user_mapping: Mapping[str, str],
) -> bool:
    """Tell whether a Telegram user may change state and confirm.

    Read at every update, so a chat allowed or removed in telegram_bot counts
    at once.
    """
    return (
        user_id in allowed_user_ids
        or bool(user_mapping.get(str(user_id)))
        or (user_id > 0 and private_chat_allowed(hass, bot_entry_id, user_id))
    )


def acting_user_id(hass: HomeAssistant) -> str | None:
    """Return the integration's own HA user, once setup has made sure it exists."""
    return hass.data.get(DATA_ACTING_USER)


def _store(hass: HomeAssistant) -> Store[dict[str, Any]]:
    return Store(hass, STORE_VERSION, STORE_KEY, private=True)


async def async_ensure_acting_user(hass: HomeAssistant) -> str:
    """Return the id of the integration's non-admin HA user, creating it if missing.

    A system user (it cannot log in) in the ``system-users`` group: it may
    control entities, not administer Home Assistant. Its id is kept in the
    integration's storage, so it is the same user after every restart.
    """
    lock = hass.data.setdefault(_DATA_LOCK, asyncio.Lock())
    async with lock:
        store = _store(hass)
        stored = await store.async_load() or {}
        user = None
        if isinstance(user_id := stored.get("user_id"), str):
            user = await hass.auth.async_get_user(user_id)
        if user is None:
            user = await hass.auth.async_create_system_user(
                ACTING_USER_NAME, group_ids=[GROUP_ID_USER]
            )
            await store.async_save({"user_id": user.id})
            LOGGER.info(
                "Created the Home Assistant user %r that the assistant acts as",
                ACTING_USER_NAME,
            )
        elif user.is_admin:
            # Acting as an admin would let a chat do what only admins may.
            LOGGER.warning(
                "The user %r the assistant acts as was made an administrator; "
                "it is put back into the Users group",
                user.name,
            )
            await hass.auth.async_update_user(user, group_ids=[GROUP_ID_USER])
        hass.data[DATA_ACTING_USER] = user.id
        return user.id


async def async_remove_acting_user(hass: HomeAssistant) -> None:
    """Remove the integration's HA user and forget its id."""
    lock = hass.data.setdefault(_DATA_LOCK, asyncio.Lock())
    async with lock:
        hass.data.pop(DATA_ACTING_USER, None)
        store = _store(hass)
        stored = await store.async_load() or {}
        if isinstance(user_id := stored.get("user_id"), str) and (
            user := await hass.auth.async_get_user(user_id)
        ):
            await hass.auth.async_remove_user(user)
            LOGGER.info("Removed the Home Assistant user %r", user.name)
        await store.async_remove()
