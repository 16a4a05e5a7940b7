# ruff: noqa: RUF001 - street names of many languages
"""Street addresses the patterns alone cannot tell: in lower case, German, flats."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from .names import MIN_NAME_CHARS
from .patterns import (
    ADDRESS_CUE,
    DE_PLACE,
    FLAT_AFTER,
    LOWER_EVIDENT,
)
from .redactor import ADDRESS, Redactor
from .words import WORDS, alternation

if TYPE_CHECKING:
    from collections.abc import Callable


def lower_address(redactor: Redactor, index: int) -> Callable[[re.Match[str]], bool]:
    """Accept a lower-case address that is evident, or follows a cue.

    Where capitals already showed the address ("71 rue de la Paix"), they
    also showed where it ends: the lower-case reading is not used.
    """
    evident = LOWER_EVIDENT[index]
    text = redactor.text

    def accept(match: re.Match[str]) -> bool:
        if redactor.taken(match.start(), match.end()):
            return False
        return (
            (evident is not None and evident.search(match.group(0)) is not None)
            or (index == _PREFIX_FIRST and _evident_prefix(text, match))
            or ADDRESS_CUE.search(text[max(0, match.start() - 24) : match.start()])
            is not None
        )

    return accept


_PREFIX_FIRST: Final = 3  # the index of "calle mayor 5" in LOWER_ADDRESSES
# "via" that names no street: a climbing route, the Milky Way, a procession.
_VIA_PHRASE: Final = re.compile(
    rf"v[ií]a\s+(?:{alternation(WORDS.lists['via_not_a_street'])})(?!\w)",
    re.IGNORECASE,
)


def _evident_prefix(text: str, match: re.Match[str]) -> bool:
    """Tell a street word that is evident from where it stands.

    "via saragozza 45" opening the query (English "via" never opens one
    before a name and a number); "os. kolorowe 8" and "al. róż 6" unless
    they are "4 os." (persons) or "et al.".
    """
    head = match.group(0)[:4].casefold()
    before = text[: match.start()]
    if head.startswith(("via ", "vía ")):
        return _VIA_PHRASE.match(match.group(0)) is None and (
            not before.strip() or re.search(r"[.!?;:]\s*$", before) is not None
        )
    if head.startswith("os."):
        return re.search(r"\d\s*$", before) is None
    if head.startswith("al."):
        return re.search(r"(?<!\w)et\s*$", before, re.IGNORECASE) is None
    return False


def flats(text: str, spans: list[tuple[int, int, str]]) -> list[tuple[int, int]]:
    """Find the flat after each street found: "os. kolorowe 8 m. 12"."""
    found = []
    for _, end, category in spans:
        if category != ADDRESS:
            continue
        # The house number may have taken the flat's letter: "8 m" of "8 m. 12".
        starts = [end]
        if re.match(r"\s[a-zA-Z]", text[end - 2 : end]):
            starts.append(end - 2)
        for at in starts:
            if flat := FLAT_AFTER.match(text, at):
                found.append((at, flat.end()))
                break
    return found


def de_street(text: str, match: re.Match[str]) -> bool:
    """Tell "Am Sonnenhang 7" (a street) from "Im Garten 5 Tomaten" (a count).

    The noun is a compound naming a place ("Sonnen-hang", "Mühl-feld"), or
    the preposition has a capital inside the sentence, which German gives a
    street's name only ("Paket an Am Sonnenhang 7").
    """
    noun = match.group("noun")
    place = DE_PLACE.fullmatch(noun)
    if place is not None and len(place.group("stem")) >= MIN_NAME_CHARS:
        return True
    before = text[: match.start()]
    return (
        match.group("prep")[0].isupper()
        and noun[0].isupper()
        and re.search(r"[^\W\d_][\w'’-]*[\s,]+$", before) is not None
    )
