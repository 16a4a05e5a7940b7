# ruff: noqa: RUF001 - street names, quotes and letters of many scripts
"""What the sanitizer looks for: emails, keys, hosts, coordinates, streets, numbers.

Compiled once at import (Home Assistant imports the integration in its import
executor); the words they are built from come from the data files (words.py).
"""

from __future__ import annotations

import re
from typing import Final

from .words import WORDS

EMAIL_SHAPE: Final = re.compile(
    r"(?<![\w.+-])[\w.+-]{1,64}@(?:[\w-]{1,63}\.)+[a-z]{2,24}\b", re.IGNORECASE
)
URL_CREDENTIALS: Final = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s/@:]+:[^\s/@]+@\S+")
# Key shapes of well-known services, then long random-looking strings.
KEY_SHAPES: Final = re.compile(
    r"\b(?:"
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{30,}"
    r"|glpat-[A-Za-z0-9_-]{16,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]+)?"
    r"|\d{8,10}:[A-Za-z0-9_-]{30,}"  # Telegram bot tokens
    r")"
)
LONG_TOKEN: Final = re.compile(r"(?<![\w/+=-])[A-Za-z0-9_+/=-]{20,}(?![\w/+=-])")
MAC_SHAPE: Final = re.compile(
    r"\b[0-9a-f]{2}(?:([:-])[0-9a-f]{2})(?:\1[0-9a-f]{2}){4}\b"
    r"|\b[0-9a-f]{4}\.[0-9a-f]{4}\.[0-9a-f]{4}\b",
    re.IGNORECASE,
)
IPV4: Final = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?(?![\w.]*\d)")
# A dotted quad named as a version: "firmware 1.0.19.2", "build 4.2.0.17".
VERSION_LABEL: Final = re.compile(
    r"(?<!\w)(?:firmware|fw|version|versión|versione|versão|versie|wersj[ai]|"
    r"ver\.?|v\.?|build|release|bios|kernel)\s*:?\s*$",
    re.IGNORECASE,
)
IPV6: Final = re.compile(
    r"(?<![\w:])(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?:%\w+)?(?![\w:])", re.IGNORECASE
)
LOCAL_HOST: Final = re.compile(
    r"\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+"
    r"(?:local|lan|home\.arpa|home|internal|intranet|localdomain|corp|"
    r"duckdns\.org|ui\.nabu\.casa|myfritz\.net|dynv6\.net|no-ip\.org|ddns\.net)"
    r"(?::\d{1,5})?\b",
    re.IGNORECASE,
)
# Two numbers with decimals, as a pair (52.5200, 13.4050) or in degrees.
COORD_PAIR: Final = re.compile(
    r"[-+]?\d{1,2}[.,]\d{2,}\s*°?\s*[NS]?\s*[,;/ ]\s*"
    r"[-+]?\d{1,3}[.,]\d{2,}\s*°?\s*[EWO]?(?![\d])",
    re.IGNORECASE,
)
COORD_DMS: Final = re.compile(
    r"\d{1,3}\s*°\s*\d{1,2}(?:[.,]\d+)?\s*['′]\s*"
    r"(?:\d{1,2}(?:[.,]\d+)?\s*(?:\"|″|'')\s*)?[NSEWO]\b"
    r"|\d{1,3}(?:[.,]\d+)?\s*°\s*[NSEWO]\b",
    re.IGNORECASE,
)
# The hemisphere first, as GPS devices and geocaching write it:
# "N 44° 29.477' E 11° 20.128'", "N52 31.200 E013 24.297", "N 52.5200 E 13.4050".
COORD_HEMISPHERE_FIRST: Final = re.compile(
    r"(?<![\w°'′])[NSEWO]\s?\d{1,3}\s*°\s*\d{1,2}(?:[.,]\d+)?\s*['′]"
    r"(?:\s*\d{1,2}(?:[.,]\d+)?\s*(?:\"|″|''))?"
    r"|(?<![\w°'′])[NSEWO]\s?\d{1,3}°?\s+\d{1,2}[.,]\d{3}(?!\d)"
    r"|(?<![\w°'′])[NS]\s?\d{1,2}[.,]\d{2,}\s*°?\s*[,;/]?\s*[EWO]\s?\d{1,3}[.,]\d{2,}°?"
)
DECIMAL: Final = re.compile(r"(?<![\w.])[-+]?\d{1,3}[.,](\d{2,})(?![\d])")

# Street addresses: a name with a street word and a house number, in the
# orders languages use them.
EN_SUFFIX: Final = (
    r"(?:street|st|avenue|ave|road|rd|lane|ln|boulevard|blvd|drive|dr|way|court|ct|"
    r"place|pl|terrace|close|crescent|square|sq|parkway|pkwy|highway|hwy|circle|cir|"
    r"trail|row|mews|grove|gardens)"
)
LATIN_UPPER: Final = "A-ZÀ-ÖØ-ÞĀ-ſ"
NAME_WORD: Final = rf"[{LATIN_UPPER}0-9][\w'’.-]*"
GLUED_SUFFIX: Final = (
    r"(?:straße|strasse|str\.|gasse|weg|allee|platz|ring|damm|ufer|chaussee|steig|"
    r"pfad|graben|markt|gracht|straat|laan|plein|kade|singel|dijk|vej|gade|gatan|"
    r"gata|gate|veien|vägen|väg|katu|tie|utca|ulica|cesta|ulice|náměstí)"
)
ROMANCE_PREFIX: Final = (
    r"(?:rue|avenue|av\.|boulevard|bd|chemin|impasse|allée|place|quai|cours|"
    r"chaussée|drève|ruelle|"
    r"calle|c/|avenida|avda\.?|paseo|plaza|carrer|avinguda|passeig|travesía|"
    r"via|viale|piazza|piazzale|lungomare|corso|vicolo|"
    r"largo|rua|travessa|praça|estrada|alameda|rodovia|strada|"
    r"ulica|ul\.|al\.|aleja|alei|aleje|os\.|osiedle|osiedlu|osiedla|pl\.)"
)
PARTICLES: Final = (
    r"(?:(?:de|del|della|delle|dei|degli|di|da|das|do|dos|du|des|la|le|les|l'|d'|"
    r"van|von|der|den|het|the|of)\s*)*"
)
HOUSE_NUMBER: Final = r"\d{1,5}\s?[a-zA-Z]?(?:\s?[/-]\s?\d{1,4}[a-zA-Z]?)?"
CYRILLIC_PREFIX: Final = (
    r"(?:ул|улица|пр|пр-т|просп|проспект|пер|переулок|бул|бульвар|ш|шоссе|наб|"
    r"набережная|пл|площадь|вул|вулиця|бульв|провулок|пр-кт|мкр|микрорайон)"
)
ADDRESSES: Final = (
    # 12 Main Street, 221B Baker St, 1600 Pennsylvania Avenue NW
    re.compile(
        rf"\b\d{{1,5}}[a-zA-Z]?,?\s+(?:{NAME_WORD}\s+){{1,4}}?(?i:{EN_SUFFIX})\b\.?"
        r"(?:\s+(?:NW|NE|SW|SE|N|S|E|W)\b)?"
    ),
    # 12 rue de la Paix, 5 avenue Foch
    re.compile(
        rf"\b\d{{1,5}}(?:\s?(?:bis|ter))?,?\s+(?i:{ROMANCE_PREFIX})\s+{PARTICLES}"
        rf"{NAME_WORD}(?:\s+{PARTICLES}{NAME_WORD}){{0,3}}"
    ),
    # Hauptstraße 5, Lindenweg 3a, Kalverstraat 12, Drottninggatan 5
    re.compile(
        rf"\b[\w'’-]{{2,}}(?i:{GLUED_SUFFIX})\s*,?\s*(?:nr\.?\s*)?{HOUSE_NUMBER}\b"
    ),
    # Berliner Straße 12, Alter Weg 5, Am Markt 3
    re.compile(
        rf"\b[{LATIN_UPPER}][\w'’-]+\s+(?:(?i:straße|strasse|str\.|weg|allee|platz|"
        rf"gasse|ring|damm|ufer|markt|laan|vej|gata|gate))\s*,?\s*{HOUSE_NUMBER}\b"
    ),
    # Calle Mayor 5, Via Roma 10, Rua Augusta, 100, ul. Długa 3, al. Róż 6
    re.compile(
        rf"(?<!\w)(?i:{ROMANCE_PREFIX})\s*{PARTICLES}{NAME_WORD}"
        rf"(?:\s+{PARTICLES}{NAME_WORD}){{0,3}}(?:\s*,\s*|\s+)"
        r"(?:(?i:n[º°o.]|nr\.?|no\.?)\s*)?"
        rf"{HOUSE_NUMBER}\b"
    ),
    # ул. Ленина, 5; улица Пушкина д. 10; вул. Шевченка 3
    re.compile(
        rf"(?<!\w)(?i:{CYRILLIC_PREFIX})\.?\s*[А-ЯЁЇІЄҐA-Z0-9][\w-]*"
        r"(?:\s+[А-ЯЁЇІЄҐа-яёїієґ\w][\w-]*){0,3}\s*,?\s*(?:(?i:д|дом|буд)\.?\s*)?"
        r"\d{1,4}\s?[а-яa-z]?(?:/\d{1,4})?"
    ),
    # Apartment and unit numbers left next to a removed street.
    re.compile(
        r"\b(?i:apt|apartment|unit|suite|flat|wohnung|kv\.|кв\.?)\s*#?\s*\d{1,4}[a-z]?\b"
    ),
)
# German streets named by a preposition and a noun, without a street word:
# "Am Sonnenhang 7", "Im Winkel 3", "An der Mühle 5", "Zur Alten Schmiede 2".
DE_STREET_PREPOSITION: Final = (
    r"(?:am|im|an\s+der|an\s+den|auf\s+der|auf\s+dem|auf\s+den|in\s+der|"
    r"in\s+den|zum|zur|zu\s+den|unter\s+den|hinter\s+der|hinter\s+dem|"
    r"vor\s+dem|bei\s+der|über\s+der)"
    # "Zur Alten Mühle 4", "Am Hohen Rain 2"
    r"(?:\s+(?:alte|neue|große|kleine|obere|untere|hohe|lange|krumme|"
    r"schöne)[nmrs]?)?"
)
# What such a street is named after: a slope, a field, a mill ("Sonnenhang",
# "Mühlfeld", "Kirchwinkel"). A noun ending so is a place, not a time.
DE_PLACE_NOUN: Final = (
    r"(?P<stem>[a-zäöüß]*?)(?:hang|berg|feld|felder|winkel|grund|bach|hof|höfe|garten|"
    r"gärten|wiese|wiesen|anger|rain|bühl|eck|ecke|tal|höhe|höhen|busch|"
    r"brunnen|mühle|kirche|schule|park|see|wald|holz|acker|äcker|kamp|horst|"
    r"heide|stein|tor|burg|graben|hain|aue|kreuz|linde|linden|eiche|eichen|"
    r"weide|weiden|hügel|bogen|blick|siedlung|hecke|brücke|kanal|deich|hafen|"
    r"moor|ried|loh|halde|schlag|sand|rott|dorf|zeile|hagen|kuhle|breite|bruch|"
    r"born|quelle|grube|steg|wall|wende|schmiede|teich|weiher|rück|kopf|leite)"
)
DE_NOT_A_PLACE: Final = (
    r"(?:montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag|wochenende|"
    r"morgen|abend|mittag|nachmittag|vormittag|anfang|ende|jahr|tag|monat|"
    r"januar|februar|märz|april|mai|juni|juli|august|september|oktober|"
    r"november|dezember|schluss|start|test|vergleich|moment|durchschnitt)"
)
DE_STREET: Final = re.compile(
    rf"(?<!\w)(?P<prep>{DE_STREET_PREPOSITION})\s+"
    rf"(?!{DE_NOT_A_PLACE}\s)(?P<noun>[{LATIN_UPPER}a-zäöüß][a-zäöüß]+"
    rf"(?:-[{LATIN_UPPER}a-zäöüß][a-zäöüß]+)?)\s+"
    r"\d{1,4}\s?[a-zA-Z]?(?!\w|[.,]\d|\s*(?:uhr|%|€|°|grad|jahre?n?|tage?n?|"
    r"minuten|stunden|punkte?n?|prozent|mal|euro|km|m|kg|cm)(?!\w))",
    re.IGNORECASE,
)
DE_PLACE: Final = re.compile(DE_PLACE_NOUN, re.IGNORECASE)
# US numbered streets: "230 west 79th street", "2210 w 32nd ave".
ORDINAL_STREET: Final = re.compile(
    r"\b\d{1,5}[a-z]?,?\s+(?:(?:n|s|e|w|ne|nw|se|sw|north|south|east|west)\.?\s+)?"
    r"\d{1,3}(?:st|nd|rd|th)\s+(?:street|st|avenue|ave|road|rd|boulevard|blvd|"
    r"drive|dr|lane|ln|parkway|pkwy|terrace|highway|hwy|trail)\b\.?",
    re.IGNORECASE,
)
# A flat after a street: "8 m. 12", "14, apt 3", "Top 5", "piso 3".
FLAT_AFTER: Final = re.compile(
    r"\s*,?\s*(?:m\.?|lok\.?|mieszk\.?|apt\.?|apartment|unit|suite|flat|whg\.?|"
    r"wohnung|top|stiege|tür|piso|pta\.?|puerta|esc\.?|int\.?|interno|scala|"
    r"app\.?|appartement|bte|kv\.?|кв\.?|квартира)\s*#?\s*\d{1,4}[a-zA-Z]?(?!\w)",
    re.IGNORECASE,
)
# The same shapes in lower case, inside a sentence ("i live at 12 elm
# street", "ich wohne in der berliner straße 12", "vivo en la calle mayor 5").
# Without capitals a street name is any word, so a name word is never one of
# these, and the address needs what people write before one: a preposition
# or a verb of living (ADDRESS_CUE), unless its street word is nothing else
# ("rue", "calle", "ulica", "улица").
NOT_A_STREET_NAME: Final = (
    r"(?:the|a|an|to|of|for|and|or|with|in|on|at|by|from|my|our|your|his|her|"
    r"their|is|are|was|it|this|that|what|when|where|how|why|who|which|best|top|"
    r"most|more|less|ways|way|things|tips|steps|ideas|reasons|places|people|"
    r"times|days|hours|minutes|weeks|months|years|miles|km|inch|inches|tb|gb|mb|"
    r"hard|flash|disk|thumb|usb|ssd|wheel|lane|road|street|avenue|drive|"
    r"der|die|das|den|dem|des|ein|eine|einer|einen|einem|und|oder|im|am|an|auf|"
    r"aus|bei|mit|nach|von|vom|zu|zum|zur|für|ist|sind|wie|was|wann|wo|meter|"
    r"le|la|les|un|une|et|ou|pour|avec|dans|sur|ce|cette|ces|quel|quelle|est|"
    r"au|aux|du|de|el|los|las|y|o|para|con|en|por|es|que|cuando|cuándo|donde|il|"
    r"lo|gli|e|per|su|è|che|quando|dove|i|w|na|z|do|od|po|jest|co|kiedy|gdzie|"
    r"czy|os|em|no|da|é|het|een|en|of|voor|met|op|wanneer|waar|och|på|för|är|"
    r"när|var|и|в|на|с|к|по|это|где|когда|что)"
)
LOWER_WORD: Final = rf"(?!{NOT_A_STREET_NAME}(?![\w'’]))[^\W\d_][\w'’.-]*"
ADDRESS_CUE: Final = re.compile(
    r"(?:^|[^\w'’])(?:at|near|on|in|to|from|for|of|by|off|outside|behind|opposite|"
    r"beside|past|around|along|into|onto|towards?|across|via|is|live|lives|lived|"
    r"living|address|moved|move|moving|deliver|delivered|delivery|ship|shipped|"
    r"send|sent|visit|visiting|stay|staying|house|home|flat|"
    r"im|am|an|der|die|das|dem|den|bei|nahe|nähe|wohne|wohnt|wohnen|adresse|"
    r"nach|zur|zum|auf|von|vom|neben|gegenüber|vor|hinter|ist|"
    r"au|aux|à|a|du|de|des|la|le|près|chez|vers|sur|dans|habite|j'habite|"
    r"habitons|habitent|est|en|del|el|al|cerca|vivo|vive|vivimos|dirección|"
    r"junto|es|alla|di|della|da|vicino|abito|abita|abitiamo|indirizzo|è|na|"
    r"przy|w|we|z|ze|do|od|obok|koło|blisko|mieszkam|mieszka|mieszkamy|adres|"
    r"to|no|em|perto|moro|mora|moramos|endereço|é|op|aan|bij|naar|van|woon|"
    r"woont|wonen|på|i|vid|nära|till|från|bor|adress|är|"
    r"на|в|во|у|по|около|рядом|возле|к|живу|живёт|живет|живем|живём|адрес)"
    r"[\s,:]*$",
    re.IGNORECASE,
)
# What makes each lower-case shape an address by itself, without a cue:
# street words that are nothing else in a sentence ("rue", "calle", "ulica";
# "avenue" and "boulevard" after a house number), a German street name's own
# preposition ("am markt 3"), a Cyrillic street word. The others ("via",
# "place", "al.", "12 ... drive") need a cue in lower case.
UNAMBIGUOUS_PREFIX: Final = (
    r"(?<!\w)(?:rue|chemin|impasse|allée|quai|drève|ruelle|calle|avenida|paseo|"
    r"carrer|avinguda|passeig|travesía|rua|travessa|praça|estrada|alameda|"
    r"strada|viale|piazza|piazzale|vicolo|ulica|ulicy|ulicę|ul\.|osiedle|osiedlu|"
    r"osiedla|aleja|alei|aleje)\s"
)
LOWER_EVIDENT: Final = (
    None,
    re.compile(
        rf"{UNAMBIGUOUS_PREFIX}|\s(?:avenue|av\.|boulevard|bd|avda\.?)\s",
        re.IGNORECASE,
    ),
    re.compile(r"^(?:am|im|an\s+der|auf\s+der)\s", re.IGNORECASE),
    re.compile(UNAMBIGUOUS_PREFIX, re.IGNORECASE),
    re.compile(r""),
)
CYRILLIC_STREET: Final = (
    r"(?:ул\.|улиц[аеуы]|пр\.|пр-т|просп\.?|проспект[еау]?|пер\.|переул(?:ок|ке)|"
    r"бул\.|бульвар[еа]?|шоссе|наб\.|набережн(?:ая|ой)|пл\.|площад[ьи]|вул\.|"
    r"вулиц[яі]|провул(?:ок|ку)|мкр\.?|микрорайон[еа]?)"
)
LOWER_ADDRESSES: Final = (
    # 12 elm street, 196b station road, 2210 w colfax ave
    re.compile(
        r"\b\d{1,5}[a-z]?,?\s+(?:(?:n|s|e|w|ne|nw|se|sw|north|south|east|west)\.?\s+)?"
        rf"(?:(?:{LOWER_WORD}|\d{{1,3}}(?:st|nd|rd|th))\s+){{1,3}}?{EN_SUFFIX}\b\.?",
        re.IGNORECASE,
    ),
    # 5 rue des lilas, 18 avenue de la république
    re.compile(
        rf"\b\d{{1,5}}(?:\s?(?:bis|ter))?,?\s+{ROMANCE_PREFIX}\s+{PARTICLES}"
        rf"{LOWER_WORD}(?:\s+{PARTICLES}{LOWER_WORD})?",
        re.IGNORECASE,
    ),
    # berliner straße 12, am markt 3
    re.compile(
        rf"(?<!\w)(?:am|im|an\s+der|auf\s+der|{LOWER_WORD})\s+(?:straße|strasse|"
        rf"str\.|weg|allee|platz|gasse|ring|damm|ufer|markt|laan|vej|gata|gate)"
        rf"\s*,?\s*{HOUSE_NUMBER}\b",
        re.IGNORECASE,
    ),
    # calle mayor 5, via roma 10, ul. długiej 3, rua das flores, 12
    re.compile(
        rf"(?<!\w){ROMANCE_PREFIX}\s*(?<=[\s.])(?:ulicy|ulicę)?\s*{PARTICLES}"
        rf"{LOWER_WORD}(?:\s+{PARTICLES}{LOWER_WORD}){{0,3}}(?:\s*,\s*|\s+)"
        rf"(?:(?:n[º°o.]|nr\.?|no\.?)\s*)?{HOUSE_NUMBER}\b",
        re.IGNORECASE,
    ),
    # улица ленина 5, на улице гагарина 12, ул. садовая, 5
    re.compile(
        rf"(?<!\w){CYRILLIC_STREET}\s*(?!{NOT_A_STREET_NAME}\s)[а-яёїієґ][\w-]*"
        r"(?:\s+[а-яёїієґ\w][\w-]*){0,2}\s*,?\s*(?:(?:д|дом|буд)\.?\s*)?"
        r"\d{1,4}\s?[а-я]?(?:/\d{1,4})?(?!\w)",
        re.IGNORECASE,
    ),
)
# Phone shapes the library may miss without the right region.
PHONE_FALLBACK: Final = re.compile(
    r"(?<![\w+])(?:\+|00)\d{1,3}[\s./-]?(?:\(\d{1,4}\)[\s./-]?)?\d{2,4}(?:[\s./-]?\d{2,4}){1,4}(?!\d)"
    r"|(?<![\w+])\(?0\d{2,4}\)?[\s./-]?\d{3,4}[\s./-]?\d{2,5}(?!\d)"
    r"|(?<![\w+])\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}(?!\d)"
)
# Digit groups that may be one number written the way people write phone
# numbers in their own country, without the country code: "555-0199",
# "01 42 68 53 17", "8 (812) 234-56-78", "138 0013 8000", "0221 / 987 65 43".
# phones.local_phone() decides; this only finds the runs. A run never starts or
# ends inside a word, a decimal or a version ("i-95", "3.14", "KB5044284").
NUMBER_RUN: Final = re.compile(
    r"(?<![\w+])(?<![\w][.,/:-])(?:\+\s?)?\(?\d{1,15}\)?"
    r"(?:(?:[ \t]?[-./][ \t]?|[ \t])\(?\d{1,15}\)?)*(?![\w]|[.,/:-]\d)"
)
# Words near a number that say it is a phone number, in many languages:
# call, caller, number, phone, mobile, text, spam, scam, lookup...
PHONE_CUE: Final = re.compile(
    r"(?<!\w)(?:call|caller|calling|rang|ring|dial|phone|number|numbers|no\.|nr\.?"
    r"|tel|tél|telephone|mobile|mobil|cell|landline|sms|text|texted|whatsapp|"
    r"voicemail|spam|scam|fraud|lookup|reverse|truecaller|fax|"
    r"anruf\w*|angerufen|anrufer|ruf|rufe|rufen|ruft|rückruf\w*|nummer|rufnummer|telefon\w*|handy|"
    r"festnetz|betrug|appel\w*|appelé|numéro|portable|arnaque|démarchage|"
    r"llam\w+|número|teléfono|móvil|chiam\w+|numero|telefono|cellulare|truffa|"
    r"dzwon\w*|numer\w*|komórk\w*|oszust\w*|połączeni\w*|"
    r"звон\w*|номер\w*|телефон\w*|мобильн\w*|мошенн\w*|"
    r"belde|bellen|gebeld|oplichter\w*|ligou|ligação|ligar|golpe)(?!\w)"
    r"|电话|電話|号码|號碼|手机|手機|来电|座机|番号",
    re.IGNORECASE,
)
PHONE_CUE_WINDOW: Final = 32  # characters either side of a number
LABEL_WINDOW: Final = 64  # characters before a list of draws or prefixes
# Numbers that are something else, named just before them.
NUMBER_LABEL: Final = re.compile(
    r"(?<!\w)(?:isbn(?:-1[03])?|issn|ean|upc|gtin|sku|iso|din|rfc|nfpa|kb|build|"
    r"version|ver\.?|art\.?-?nr\.?|model|models|part|parts|serial|s/n|ports?|"
    r"channels?|sizes?|pages?|chapters?|seats?|rooms?|levels?|lines?|bus|buses|"
    r"trams?|routes?|platforms?|gates?|tracks?|episodes?|seasons?|sections?|§|"
    # Spare parts and articles: "Ersatzteil 00611319", "réf. 0123456".
    r"ersatzteil\w*|teilenummer|artikel(?:nummer)?|bestellnummer|e-nr\.?|"
    r"p/n|mpn|ref\.?|réf\.?|référence|referencia|riferimento|"
    r"catalog(?:ue)?|katalog\w*|barcode|bar\s+code|código\s+de\s+barras|"
    r"code[-\s]barres?|strichcode|kod\s+kreskowy|streepjescode|"
    # Bank codes name a bank or branch, never a person's account: "sort code
    # 40-11-62", "routing number 021000021", "BLZ 37040044".
    r"sort\s+code|routing|aba|bsb|blz|bankleitzahl|bic|swift|transit)"
    r"\s*(?:no\.?|nr\.?|number|#)?\s*:?\s*$",
    re.IGNORECASE,
)
# Draws of a lottery: "Lottozahlen 3 12 19 27 38 45" is no phone number.
LOTTERY: Final = re.compile(
    r"(?<!\w)(?:lotto\w*|lotter\w*|loter[ií]a\w*|loto|lotek|euromil\w*|"
    r"eurojackpot|powerball|mega\s+millions|superenalotto|primitiva|bonoloto|"
    r"mega-?sena|keno|gewinnzahlen|ziehung\w*|tirage|estrazion\w*|sorteo\w*|"
    r"sorteio\w*|winning\s+numbers|numeri\s+vincenti|numéros\s+gagnants|"
    r"números\s+premiados)(?!\w)",
    re.IGNORECASE,
)
# Words that only say "number": with a lottery, they do not make a phone.
NUMBER_WORD: Final = re.compile(
    r"(?<!\w)(?:numbers?|no\.|nr\.?|nummer\w*|numéros?|números?|numer\w*|"
    r"numeri|numero|номер\w*|zahlen)(?!\w)",
    re.IGNORECASE,
)
# A list of dialling prefixes: "préfixes 0162 0163", "Vorwahlen 030 040".
PREFIX_CUE: Final = re.compile(
    r"(?<!\w)(?:pr[ée]fix\w*|prefij\w*|prefiss\w*|prefiks\w*|prefixo\w*|"
    r"vorwahl\w*|indicatif\w*|area\s+codes?|dial(?:l)?ing\s+codes?|"
    r"netnummer\w*|kierunkow\w*)(?!\w)",
    re.IGNORECASE,
)
# The fraction of a decimal number: "6,02214076" is not "02214076".
DECIMAL_BEFORE: Final = re.compile(r"(?<![\d.,])\d{1,3}[.,]$")
# A unit or currency next to a grouped number makes it an amount.
UNIT_AFTER: Final = re.compile(
    r"^\s?(?:€|\$|£|¥|₽|₹|元|zł|zl|kr|kč|eur|euro|euros|usd|dollars?|pln|rub|"
    r"руб\w*|yen|chf|gbp|m/s|km/h|km|m|kg|t|mah|people|inhabitants|residents|"
    r"einwohner|habitants|mieszkańców|жителей|views|years|jahre)(?!\w)",
    re.IGNORECASE,
)
UNIT_BEFORE: Final = re.compile(r"(?:€|\$|£|¥|₽|₹)\s?$")
MIN_LOCAL_DIGITS: Final = 7  # without a word saying "phone"
MIN_CUED_DIGITS: Final = 5  # small towns have 5-digit local numbers
MAX_PHONE_DIGITS: Final = 15  # E.164
# Bank account numbers: IBANs, compact or grouped, of the countries that use
# them; and long numbers written in groups of four (cards, national accounts).
IBAN_COUNTRIES: Final = WORDS.lists["iban_countries"]
IBAN: Final = re.compile(
    r"(?<![\w])([a-z]{2})\d{2}(?:[ -]?[a-z0-9]{4}){2,7}(?:[ -]?[a-z0-9]{1,4})?(?!\w)",
    re.IGNORECASE,
)
MIN_IBAN_DIGITS: Final = 8
LONG_GROUPED_NUMBER: Final = re.compile(
    r"(?<![\w])\d{2,6}(?:[ -]\d{4}){2,7}(?:[ -]\d{1,4})?(?!\w)"
)
MIN_ACCOUNT_DIGITS: Final = 13
# A number named as an account: "Kontonummer 1234567890", "numer konta ...".
ACCOUNT_NUMBER: Final = re.compile(
    r"(?<!\w)(?:account|acct|konto|kontonummer|kontonr\.?|kto\.?|compte|cuenta|"
    r"conto|conta|rachun\w*|numer\w*\s+konta|nr\.?\s+konta|сч[её]т\w*|"
    r"rekening\w*|iban|clabe|cbu|cvu|rib|c/c)"
    r"(?:\s+(?:number|no\.?|nr\.?|nummer|numéro|número|numero|corrente|"
    r"corriente|poupança|ahorros?|courant|bancari[ao]|bancária|interbancaria))?"
    r"\s*[:#=]?\s*(\d[\d -]{3,40}[\dxX])(?!\w)",
    re.IGNORECASE,
)
MIN_CUED_ACCOUNT_DIGITS: Final = 6
# Shorter with a check digit: "conta corrente 4821-7".
CHECK_DIGIT: Final = re.compile(r"\d{4,}-[\dxX]")
# A long number in one piece: a card number (Luhn), a Mexican CLABE (its own
# check digit); never one named by a label ("EAN 4006381333931").
LONG_NUMBER: Final = re.compile(r"(?<![\w.,+-])\d{15,19}(?!\w|[.,]\d)")
CLABE_DIGITS: Final = 18
CLABE_WEIGHTS: Final = (3, 7, 1) * 5 + (3, 7)  # over the first 17 digits
ENTITY_DOMAINS: Final = (
    "air_quality|alarm_control_panel|assist_satellite|automation|binary_sensor|button|"
    "calendar|camera|climate|conversation|counter|cover|date|datetime|device_tracker|"
    "event|fan|group|humidifier|image|input_boolean|input_button|input_datetime|"
    "input_number|input_select|input_text|lawn_mower|light|lock|media_player|notify|"
    "number|person|remote|scene|schedule|script|select|sensor|siren|stt|sun|switch|"
    "text|time|timer|todo|tts|update|vacuum|valve|wake_word|water_heater|weather|zone"
)
ENTITY_ID_PATTERN: Final = re.compile(rf"\b(?:{ENTITY_DOMAINS})\.\w+", re.IGNORECASE)

# light.turn_on names a service, not one of the house's entities.
SERVICE: Final = re.compile(
    r"\w+\.(?:turn_on|turn_off|toggle|reload|lock|unlock|open|press|"
    r"(?:open|close|stop|set|select|alarm|start|play|media|volume)_\w+)",
    re.IGNORECASE,
)

WORD: Final = re.compile(r"[^\W\d_][\w'’-]*")
