# ruff: noqa: RUF001 - words of many languages
"""Passwords, PINs and codes the user says: "my password is hunter2".

The value goes; the words around it stay ("the alarm code is 7391" leaves as
"the alarm code is"), so the search still helps.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from .words import WORDS

if TYPE_CHECKING:
    from collections.abc import Iterator

# A password, PIN or door code the user says is theirs: "my password is
# hunter2", "mein Passwort ist ...", "the alarm code is 7391", "is Tr0ub4dor&3
# a strong password". The value goes; the words around it stay.
_PW_WORDS: Final = (
    r"(?:passwords?|passwd|passphrase|passcode|pass\s+code|pwd|pw|passwort|"
    r"kennwort|mot\s+de\s+passe|mdp|contraseña|contrasena|clave|senha|"
    r"parola\s+d'ordine|hasło|haslo|пароль|wachtwoord|lösenord|losenord|"
    r"adgangskode|passord|salasana|jelszó|heslo|şifre|sifre|密码|密碼|パスワード|"
    r"비밀번호|(?:wi-?fi|wlan|wpa2?|network|netzwerk)[\s-]?(?:key|schlüssel)|"
    r"clé\s+(?:wi-?fi|wpa)|psk)"
)
# PIN and code are secret only when they are someone's or something's:
# "my pin", "the door code", "code de la porte", never "area code 212".
_CODE_WORD: Final = (
    r"(?:pin(?:\s*code|\s*number)?|pin-code|pincode|pinkod|pinkode|code|codice|"
    r"código|codigo|kod|код|digicode|türcode|tuercode|torcode|alarmcode|"
    r"zugangscode|sicherheitscode|passcode|nip|puk[12]?(?:-?code)?|pin码|暗证码)"
)
# Codes that are always someone's secret: a door code, a SIM's PUK.
_SELF_CODE_WORD: Final = re.compile(
    r"digicode|türcode|tuercode|torcode|alarmcode|zugangscode|sicherheitscode|"
    r"passcode|puk[12]?(?:-?code)?",
    re.IGNORECASE,
)
# "the code is 4821", "der Code ist 4821", "le code est 4821": a code stated
# as such is a secret even without whose it is.
_ARTICLE_BEFORE: Final = re.compile(
    r"(?:^|(?<![\w'’])(?:the|this|that|der|die|das|dieser|diese|le|la|ce|el|"
    r"este|esta|il|lo|questo|o|a|este|esse|het|de|deze))\s+$",
    re.IGNORECASE,
)
_MIN_STATED_CODE_DIGITS: Final = 4
_MIN_PUK_DIGITS: Final = 4  # a PUK has 8; "PUK 2" is the second PUK
_KEY_OWNER: Final = re.compile(
    r"(?<!\w)(?:my|our|mine|his|her|their|mein\w*|unser\w*|mon|ma|mes|notre|nos|"
    r"mi|mis|nuestr\w+|mio|mia|mie|miei|nostr\w+|mój|moj\w*|nasz\w*|мой|моя|моё|"
    r"мои|наш\w*|mijn|onze|ons|mitt|min|mina|vår|vårt|minha|meu|nossa|nosso|"
    r"door|gate|garage|alarm|keypad|lock|safe|bank|card|debit|credit|sim|phone|"
    r"mobile|handy|natel|móvil|celular|telemóvel|portable|telefon|telefono|"
    r"wifi|wi-fi|wlan|router|access|entry|security|building|front|"
    r"tür|haustür|tor|garagentor|alarmanlage|tresor|karte|bankkarte|"
    r"porte|portail|alarme|carte|coffre|puerta|portón|alarma|tarjeta|caja|"
    r"porta|portone|cancello|allarme|carta|cassaforte|drzwi|bramy|brama|"
    r"alarmu|karty|sejfu|домофона|двери|ворот|сигнализации|карты|сейфа|"
    r"deur|poort|kaart|dörr|port|kort|larm|porta|portão|cartão|"
    r"我的|门|卡)(?!\w)",
    re.IGNORECASE,
)
# Codes that name something public, not a secret: "sort code 40-11-62",
# "area code", "zip code", "error code", "bank code".
_PUBLIC_CODE: Final = re.compile(
    r"(?<!\w)(?:sort|area|zip|post|postal|error|status|country|bar|promo|"
    r"discount|coupon|voucher|qr|source|tracking|dial(?:l)?ing|region|language|"
    r"currency|colou?r|hex|ascii|unicode|exit|return|fault|diagnostic|obd|dtc|"
    r"product|iata|icao|airport|swift|bic|branch|routing|transit|morse|"
    r"response|http)[\s-]*$",
    re.IGNORECASE,
)
_LATIN_BOUNDARY: Final = r"A-Za-z0-9À-ɏ"
_KEY_WORD: Final = re.compile(
    rf"(?<![{_LATIN_BOUNDARY}])(?:({_PW_WORDS})|({_CODE_WORD}))"
    rf"(?![{_LATIN_BOUNDARY}])",
    re.IGNORECASE,
)
# "code for the gate", "code de la porte", "kod do bramy", "код от домофона"
# "PIN der Alarmanlage", "senha do portão", "código de la puerta del garaje":
# one or two such links.
_KEY_LINK: Final = (
    r"\s+(?:(?:for|of|to|on|für|zum|zur|vom|von|der|de\s+la|del|della|dello|"
    r"delle|dei|degli|di|des|de|du|do|dos|das|dla|da|al|от|для|van|voor|till|"
    r"för)\s+|d'|de\s+l'|dell')"
    r"(?:(?:the|my|our|das|die|der|den|dem|la|le|les|el|il|mi|mon|ma|het|de)\s+"
    r"|l')?[\w'’-]+"
)
# "code alarme 6402", "hasło do brokera mqtt ...": words naming what the code
# or password is for, right before its value, without "is".
_KEY_BARE_QUALIFIER: Final = r"(?:\s+[^\W\d_][\w'’-]*){1,2}\s+"
# "mot de passe wifi : ...", "contraseña wifi = ...": a word naming what the
# password is for, then an explicit "is" or colon.
_KEY_QUALIFIER: Final = r"\s+[\w'’-]+(?=\s*(?:[:=]|is\s|est\s|es\s|ist\s|è\s|to\s))"
_KEY_IS: Final = (
    r"(?:\s*(?P<is>(?:is|are|was|ist|lautet|war|heißt|est|c'est|es|era|è|é|to|"
    r"jest|это|är|er|on|set\s+to|changed\s+to|is\s+now|ist\s+jetzt)(?!\w)"
    r"|[:=–—-]|是|为|為|は|는)\s*|\s+)"
)
_KEY_VALUE: Final = (
    r"(?P<value>\"[^\"]{1,64}\"|'[^']{1,64}'|«[^»]{1,64}»|„[^“”]{1,64}[“”]"
    r"|[^\s\"'«„,;\u3000-\u9fff\uac00-\ud7af]{1,64}"
    r"(?<![.,;:?)\u3000-\u9fff\uac00-\ud7af]))"
)
_PLAIN_FORM: Final = 0  # "password is ...", "password: ..."
_LINKED_FORM: Final = 1  # with one or two links ("code de la porte")
_QUALIFIED: Final = 2  # with a qualifier word and "is" or a colon
_BARE: Final = 3  # with a qualifier and no "is" ("code alarme 6402")
# The forms in the order they are tried; one link before two, so "kod do
# bramy to 2468" reads "to" as "is", not as a second link.
_KEY_AFTER: Final = (
    (_PLAIN_FORM, re.compile(_KEY_IS + _KEY_VALUE, re.IGNORECASE)),
    (_LINKED_FORM, re.compile(_KEY_LINK + _KEY_IS + _KEY_VALUE, re.IGNORECASE)),
    (
        _LINKED_FORM,
        re.compile(_KEY_LINK + _KEY_LINK + _KEY_IS + _KEY_VALUE, re.IGNORECASE),
    ),
    (_QUALIFIED, re.compile(_KEY_QUALIFIER + _KEY_IS + _KEY_VALUE, re.IGNORECASE)),
    (_BARE, re.compile(_KEY_BARE_QUALIFIER + _KEY_VALUE, re.IGNORECASE)),
    (
        _BARE,
        re.compile(
            rf"(?P<link>{_KEY_LINK}){_KEY_BARE_QUALIFIER}{_KEY_VALUE}", re.IGNORECASE
        ),
    ),
    (
        _BARE,
        re.compile(
            rf"(?P<link>{_KEY_LINK}{_KEY_LINK}){_KEY_BARE_QUALIFIER}{_KEY_VALUE}",
            re.IGNORECASE,
        ),
    ),
)
_MIN_BARE_KEY_CHARS: Final = 4
# "is Tr0ub4dor&3 a strong password", "use hunter2 as my password"
_KEY_BEFORE_WORD: Final = re.compile(
    rf"(?<!\w)(?:is|use|using|ist|nehme|est|utiliser|es|usar|czy|jest|как|är)\s+"
    rf"{_KEY_VALUE}\s+(?P<between>(?:[\w'’-]+\s+){{0,5}}?)(?:{_PW_WORDS}|pin)(?!\w)",
    re.IGNORECASE,
)
# "is bluepanda77 a strong enough wifi password": more than three words
# between only for a value that looks chosen as a password.
_MAX_WORDS_BETWEEN: Final = 3
# After "my password is": words that describe it instead of being it.
_NOT_A_KEY: Final = WORDS.lists["not_a_key"]


def _plain_word(value: str) -> bool:
    return value.isalpha() and value.islower()


def _word_like(value: str) -> bool:
    """Tell a word of the sentence ("tp-link", "Fritzbox") from a password."""
    return re.fullmatch(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*", value) is not None and (
        value.islower() or value[1:].islower()
    )


def _password_shaped(value: str) -> bool:
    """Tell a value that looks chosen as a password: letters with digits or signs."""
    return len(value) >= _MIN_BARE_KEY_CHARS and not _word_like(value)


def _code_value(
    text: str, word: re.Match[str], after: re.Match[str], *, bare: bool
) -> bool:
    """Tell whether what follows a PIN or code word is its value.

    It has a digit and is someone's or something's ("my pin", "code alarme",
    "PIN der Alarmanlage"), a code that is always secret (digicode, PUK), or
    a code stated as such ("der Code ist 3058"); never a code that names
    something public ("sort code", "area code").
    """
    value = after.group("value")
    code = word.group(2)
    digits = sum(c.isdigit() for c in value)
    if not digits or (code.casefold().startswith("puk") and digits < _MIN_PUK_DIGITS):
        return False
    if not code.casefold().startswith("pin") and _PUBLIC_CODE.search(
        text[max(0, word.start() - 16) : word.start()]
    ):
        return False
    if bare:
        # Without "is", the words between name what the code opens:
        # "code alarme 6402", never "my code review 2024".
        return _KEY_OWNER.search(text[word.end() : after.start("value")]) is not None
    owner = text[max(0, word.start() - 24) : after.start("value")]
    if _KEY_OWNER.search(owner) or _SELF_CODE_WORD.fullmatch(code):
        return True
    return (
        "is" in after.re.groupindex
        and after.group("is") is not None
        and sum(c.isdigit() for c in value) >= _MIN_STATED_CODE_DIGITS
        and _ARTICLE_BEFORE.search(text[max(0, word.start() - 12) : word.start()])
        is not None
    )


def _secret_value(
    text: str, word: re.Match[str], after: re.Match[str], form: int
) -> bool:
    """Tell whether what follows "password" or "door code" is its value."""
    value = after.group("value")
    bare = value.strip("\"'«»„“”").casefold()
    if bare in _NOT_A_KEY or bare.strip("!?.") in _NOT_A_KEY:
        return False
    if value[0] in "\"'«„" and form != _BARE:
        return True
    if form == _QUALIFIED and _plain_word(value):
        # "password manager is bitwarden": the word was not a qualifier.
        return False
    if word.group(2) is not None:
        return _code_value(text, word, after, bare=form == _BARE)
    return _password_value(after, form)


def _password_value(after: re.Match[str], form: int) -> bool:
    """Tell whether what follows the word password (and its links) is its value."""
    value = after.group("value")
    if form == _BARE:
        # "hasło do brokera mqtt zaq1@WSX": after a link and a qualifier,
        # without "is", only a value that looks chosen as a password.
        return "link" in after.re.groupindex and _password_shaped(value)
    if form == _LINKED_FORM and after.group("is") is None:
        # "hasło do routera tp-link", "password for windows 11": without
        # "is", the words after the link may still name the thing.
        return _password_shaped(value)
    # "password manager", "wifi password qr code": without "is", a plain word
    # after the word password is the next word of the sentence.
    return after.group("is") is not None or not _plain_word(value)


def said_secrets(text: str) -> Iterator[tuple[int, int]]:
    """Find the values of passwords, PINs and codes said in the query."""
    for word in _KEY_WORD.finditer(text):
        for form, pattern in _KEY_AFTER:
            after = pattern.match(text, word.end())
            if after is not None and _secret_value(text, word, after, form):
                yield after.span("value")
                break
    for match in _KEY_BEFORE_WORD.finditer(text):
        value = match.group("value")
        if value.strip("\"'«»„“”").casefold() in _NOT_A_KEY:
            continue
        if len(match.group("between").split()) <= _MAX_WORDS_BETWEEN or (
            _password_shaped(value) and any(c.isdigit() for c in value)
        ):
            yield match.span("value")
