"""Machines of the house: IP addresses and MAC addresses that are some device's."""

from __future__ import annotations

import ipaddress
import re
from typing import Final

from .words import WORDS, alternation

# Public DNS resolvers everybody may name ("8.8.8.8 or 1.1.1.1?"): they are
# nobody's machine. Google, Cloudflare (and its family filters), Quad9,
# OpenDNS, AdGuard, CleanBrowsing, Level3, DNS.WATCH, Comodo, Yandex, Mullvad.
_PUBLIC_RESOLVERS: Final = frozenset(
    ipaddress.ip_address(address) for address in WORDS.lists["public_resolvers"]
)
_THIS_NETWORK: Final = ipaddress.ip_network("0.0.0.0/8")


def valid_ip(text: str) -> bool:
    """Tell an address of some machine from addresses that are nobody's.

    Not a machine's: loopback, unspecified, multicast (224.0.0.251, ff02::fb),
    IPv4's reserved 240.0.0.0/4 (the broadcast 255.255.255.255 and the
    netmasks 255.255.255.0, 255.255.0.0), "this network" 0.0.0.0/8 (wildcard
    masks) and the public DNS resolvers.
    """
    try:
        address = ipaddress.ip_interface(text.split("%", 1)[0]).ip
    except ValueError:
        return False
    special = address.version == 4 and (  # noqa: PLR2004
        address.is_reserved or address in _THIS_NETWORK
    )
    return not (
        address.is_loopback
        or address.is_unspecified
        or address.is_multicast
        or special
        or address in _PUBLIC_RESOLVERS
    )


# MAC addresses that are no device's: broadcast, all zeros, and the group
# addresses of IPv4 and IPv6 multicast and of IEEE 802.1 (STP, LLDP).
_GROUP_MAC: Final = re.compile(
    r"(?:ff[:.-]?){5}ff|(?:00[:.-]?){5}00|01[:.-]?00[:.-]?5e|33[:.-]?33|"
    r"01[:.-]?80[:.-]?c2",
    re.IGNORECASE,
)


def device_mac(text: str) -> bool:
    """Tell a device's MAC address from a broadcast or multicast one."""
    return _GROUP_MAC.match(text) is None


# A MAC address without separators, "001A2B3C4D5E": twelve hex digits. The
# same shape is a short commit or container id ("3f9a2c1e4b5d"), so it is a
# MAC in capitals (as routers show it) or near a word of networks and devices.
BARE_MAC: Final = re.compile(r"(?<![\w:.-])[0-9A-Fa-f]{12}(?![\w:.-])")


def _cue(words: str, stems: str) -> re.Pattern[str]:
    """Compile a search for the words of two lists (data/lists.json), stems open."""
    return re.compile(
        rf"(?<!\w)(?:{alternation(WORDS.lists[words])}|"
        rf"(?:{alternation(WORDS.lists[stems])})\w*)(?!\w)",
        re.IGNORECASE,
    )


_MAC_CUE: Final = _cue("mac_cues", "mac_cue_stems")
_HASH_CUE: Final = _cue("hash_cues", "hash_cue_stems")
_MAC_CUE_WINDOW: Final = 40


def bare_mac(text: str, match: re.Match[str]) -> bool:
    """Tell twelve hex digits that are a MAC address from a hash or an id."""
    value = match.group(0)
    before = text[max(0, match.start() - _MAC_CUE_WINDOW) : match.start()]
    after = text[match.end() : match.end() + _MAC_CUE_WINDOW]
    if not device_mac(value) or _HASH_CUE.search(before):
        return False
    if _MAC_CUE.search(before) or _MAC_CUE.search(after):
        return True
    letters = any(c.isalpha() for c in value)
    return value.isupper() and letters and any(c.isdigit() for c in value)
