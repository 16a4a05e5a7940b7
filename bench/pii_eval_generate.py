"""Generate the issue #28 personal-data set (run in the bench venv, not .venv).

Sentences come from presidio-evaluator's data generator (``PresidioSentenceFaker``)
with Faker's locale providers; the templates are search queries, each with
words worth searching for besides the detail. Then each detail is written a
second time in a disguised form, by the formats' conventions, not by the
sanitizer's rules (the author of this file did not read its misses):

- numbers spelled digit by digit or in pairs, by ``num2words`` in the
  sentence's language;
- digit groups regrouped and split by spaces, dots, dashes or commas;
- e-mails written with "at"/"dot", their translations or bracketed forms;
- street addresses in lower case;
- dates of birth spelled.

Fixed seed; the output is committed as ``bench/security/pii28_queries.jsonl``.
Run: ``/work/pii-bench-venv/bin/python bench/pii_eval_generate.py``.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from faker import Faker
from faker.providers import BaseProvider
from num2words import num2words
from presidio_evaluator.data_generator import PresidioSentenceFaker

SEED = 2828
OUT = Path(__file__).resolve().parent / "security" / "pii28_queries.jsonl"
PER_TEMPLATE_SET = 160  # plain sentences per language

MONTHS = {
    "en": "January February March April May June July August September October "
    "November December",
    "de": "Januar Februar März April Mai Juni Juli August September Oktober "
    "November Dezember",
    "fr": "janvier février mars avril mai juin juillet août septembre octobre "
    "novembre décembre",
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre "
    "noviembre diciembre",
}
PLUS = {"en": "plus", "de": "plus", "fr": "plus", "es": "más"}
AT_DOT = {
    "en": [(" at ", " dot "), (" [at] ", " [dot] "), ("(at)", "(dot)")],
    "de": [(" at ", " punkt "), (" [at] ", " [punkt] "), ("(at)", "(punkt)")],
    "fr": [(" arobase ", " point "), (" [at] ", " [point] "), (" at ", " dot ")],
    "es": [(" arroba ", " punto "), (" [arroba] ", " [punto] "), (" at ", " dot ")],
}
LOCALES = {"en": "en_US", "de": "de_DE", "fr": "fr_FR", "es": "es_ES"}
# Countries for the sanitizer's phone library: the household's own.
COUNTRY = {
    "en_US": "US",
    "de_DE": "DE",
    "fr_FR": "FR",
    "es_ES": "ES",
    "it_IT": "IT",
    "nl_NL": "NL",
    "pt_PT": "PT",
    "pl_PL": "PL",
    "ru_RU": "RU",
    "uk_UA": "UA",
    "no_NO": "NO",
    "cs_CZ": "CZ",
    "el_GR": "GR",
}
# Search queries with a detail; the words outside the detail are searchable.
TEMPLATES = {
    "en": [
        "plumbers near me, call me on {{phone_number}}",
        "reverse lookup {{phone_number}} who called",
        "is {{phone_number}} a scam number",
        "newsletter signup not working for {{email}}",
        "why does gmail bounce mail to {{email}}",
        "how long does a transfer to {{iban}} take",
        "is {{iban}} a valid iban for a german bank",
        "my card {{credit_card}} was declined at the supermarket",
        "refund to card {{credit_card}} how many days",
        "router admin page {{ip_address}} not loading",
        "port forwarding to {{ip_address}} for minecraft server",
        "pizza delivery to {{street_address}} tonight",
        "24 hour locksmith near {{street_address}}",
        "taxi from {{street_address}} to the airport price",
        "horoscope for someone born {{birthday}}",
        "pension age if I was born {{birthday}}",
        (
            "search the web for plumbers near me, call me on {{phone_number}} or "
            "mail {{email}}, I live at {{street_address}}"
        ),
    ],
    "de": [
        "Klempner in der Nähe, ruf mich an unter {{phone_number}}",
        "wer hat mich angerufen {{phone_number}}",
        "ist {{phone_number}} eine Betrugsnummer",
        "Newsletter Anmeldung klappt nicht mit {{email}}",
        "warum kommen Mails an {{email}} zurück",
        "wie lange dauert eine Überweisung auf {{iban}}",
        "ist {{iban}} eine gültige IBAN",
        "meine Karte {{credit_card}} wurde im Supermarkt abgelehnt",
        "Erstattung auf Karte {{credit_card}} wie lange",
        "Router Oberfläche {{ip_address}} lädt nicht",
        "Portweiterleitung auf {{ip_address}} einrichten",
        "Pizza Lieferung nach {{street_address}} heute Abend",
        "Schlüsseldienst in der Nähe von {{street_address}}",
        "Taxi von {{street_address}} zum Flughafen Preis",
        "Horoskop für jemanden geboren am {{birthday}}",
        "Rentenalter wenn ich geboren bin am {{birthday}}",
        (
            "such im Netz nach Klempnern in der Nähe, ruf mich an unter "
            "{{phone_number}} oder schreib an {{email}}, ich wohne in "
            "{{street_address}}"
        ),
    ],
    "fr": [
        "plombier près de chez moi, appelez-moi au {{phone_number}}",
        "qui m'a appelé {{phone_number}}",
        "est-ce que {{phone_number}} est une arnaque",
        "inscription newsletter impossible avec {{email}}",
        "pourquoi les mails vers {{email}} reviennent",
        "combien de temps pour un virement vers {{iban}}",
        "est-ce que {{iban}} est un IBAN valide",
        "ma carte {{credit_card}} a été refusée au supermarché",
        "remboursement sur la carte {{credit_card}} combien de jours",
        "la page du routeur {{ip_address}} ne charge pas",
        "redirection de port vers {{ip_address}} pour un serveur",
        "livraison de pizza au {{street_address}} ce soir",
        "serrurier 24h près du {{street_address}}",
        "taxi du {{street_address}} à l'aéroport prix",
        "horoscope pour une personne née le {{birthday}}",
        "âge de la retraite si je suis né le {{birthday}}",
        (
            "cherche sur le web un plombier près de chez moi, appelez-moi au "
            "{{phone_number}} ou écrivez à {{email}}, j'habite au {{street_address}}"
        ),
    ],
    "es": [
        "fontaneros cerca de mí, llámame al {{phone_number}}",
        "quién me llamó desde {{phone_number}}",
        "es {{phone_number}} un número de estafa",
        "no funciona la suscripción al boletín con {{email}}",
        "por qué rebotan los correos a {{email}}",
        "cuánto tarda una transferencia a {{iban}}",
        "es {{iban}} un IBAN válido",
        "mi tarjeta {{credit_card}} fue rechazada en el supermercado",
        "reembolso a la tarjeta {{credit_card}} cuántos días",
        "la página del router {{ip_address}} no carga",
        "redirección de puertos a {{ip_address}} para un servidor",
        "pizza a domicilio en {{street_address}} esta noche",
        "cerrajero 24 horas cerca de {{street_address}}",
        "taxi desde {{street_address}} al aeropuerto precio",
        "horóscopo para alguien nacido el {{birthday}}",
        "edad de jubilación si nací el {{birthday}}",
        (
            "busca en la web fontaneros cerca de mí, llámame al {{phone_number}} "
            "o escribe a {{email}}, vivo en {{street_address}}"
        ),
    ],
}
# Streets of other conventions (house number after the name, other
# scripts), in an English query as a household abroad would type it.
ADDRESS_ONLY = [
    "pizza delivery to {{street_address}} tonight",
    "taxi from {{street_address}} to the airport price",
    "parcel for {{street_address}} not delivered",
]
EXTRA_LOCALES = ["it_IT", "nl_NL", "pt_PT", "pl_PL", "ru_RU", "uk_UA"]
OTHER_LOCALES = ["no_NO", "cs_CZ", "el_GR"]
KIND = {
    "phone_number": "phone",
    "email": "email",
    "iban": "iban",
    "credit_card": "card",
    "ip_address": "ip",
    "street_address": "address",
    "birthday": "dob",
}
CARD_TYPES = [
    "maestro",
    "visa13",
    "visa16",
    "visa19",
    "mastercard",
    "amex",
    "discover",
    "diners",
    "jcb15",
    "jcb16",
]


def make_provider(lang: str) -> type[BaseProvider]:
    """Return a Faker provider for cards of every length, IPs and birthdays."""

    class Extra(BaseProvider):
        def credit_card(self) -> str:
            card = self.generator.credit_card_number(self.random_element(CARD_TYPES))
            if self.random_int(0, 1):
                return " ".join(card[i : i + 4] for i in range(0, len(card), 4))
            return str(card)

        def ip_address(self) -> str:
            if self.random_int(0, 3) == 0:
                return str(self.generator.ipv6())
            return str(self.generator.ipv4(private=bool(self.random_int(0, 1))))

        def birthday(self) -> str:
            date = self.generator.date_of_birth(minimum_age=5, maximum_age=90)
            month = MONTHS[lang].split()[date.month - 1]
            forms = {
                "en": [
                    f"{date.day} {month} {date.year}",
                    f"on {month} {date.day}, {date.year}",
                    f"{date.month:02}/{date.day:02}/{date.year}",
                ],
                "de": [
                    f"{date.day}. {month} {date.year}",
                    f"{date.day:02}.{date.month:02}.{date.year}",
                ],
                "fr": [
                    f"{date.day} {month} {date.year}",
                    f"{date.day:02}/{date.month:02}/{date.year}",
                ],
                "es": [
                    f"{date.day} de {month} de {date.year}",
                    f"{date.day:02}/{date.month:02}/{date.year}",
                ],
            }[lang]
            return str(self.random_element(forms))

    return Extra


def sentences(
    locale: str, lang: str, templates: list[str], count: int
) -> list[dict[str, Any]]:
    """Return generated sentences with their details' spans."""
    faker = PresidioSentenceFaker(
        locale=locale,
        lower_case_ratio=0.0,
        sentence_templates=templates,
        entity_providers=[make_provider(lang)],
        base_records=[{"unused": ""}],
        entity_type_mapping={key: key for key in KIND},
        provider_aliases=[("iban", "iban")],
        random_seed=SEED,
    )
    rows = []
    for sample in faker.generate_new_fake_sentences(count):
        details = [
            {
                "kind": KIND[span.entity_type],
                "start": span.start_position,
                "end": span.end_position,
                "value": span.entity_value,
            }
            for span in sorted(sample.spans, key=lambda s: s.start_position)
        ]
        rows.append({"text": sample.full_text, "details": details})
    return rows


def spell_digits(digits: str, lang: str, rng: random.Random) -> str:
    """Spell digits one by one, or some in pairs ("fifty-five")."""
    words = []
    i = 0
    while i < len(digits):
        pair = digits[i : i + 2]
        if len(pair) == 2 and pair[0] != "0" and rng.random() < 0.3:  # noqa: PLR2004
            words.append(num2words(int(pair), lang=lang))
            i += 2
        else:
            words.append(num2words(int(digits[i]), lang=lang))
            i += 1
    return " ".join(words)


def spelled_number(value: str, lang: str, rng: random.Random) -> str:
    """Spell each digit group of a number, keeping the groups apart."""
    plus = value.strip().startswith("+")
    groups = re.findall(r"\d+", value)
    sep = rng.choice([", ", " ", " - "])
    text = sep.join(spell_digits(g, lang, rng) for g in groups)
    return f"{PLUS[lang]} {text}" if plus else text


def split_groups(value: str, rng: random.Random) -> str:
    """Regroup the digits (letters kept in front) by 2-4, split by one mark."""
    head = re.match(r"^\+?[A-Za-z]*", value.strip())
    prefix = head.group(0) if head else ""
    digits = re.sub(r"\D", "", value[len(prefix) :])
    if prefix and prefix[0] != "+":
        digits = re.sub(r"[^0-9A-Za-z]", "", value.strip()[len(prefix) :])
    sep = rng.choice([" ", ".", "-", ", ", " - "])
    parts = []
    i = 0
    while i < len(digits):
        size = rng.choice([2, 3, 4])
        parts.append(digits[i : i + size])
        i += size
    return (prefix + " " if prefix else "") + sep.join(parts)


def at_dot(value: str, lang: str, rng: random.Random) -> str:
    """Write an e-mail with words for @ and the dots of its domain."""
    local, _, domain = value.partition("@")
    at, dot = rng.choice(AT_DOT[lang])
    return f"{local}{at}{domain.replace('.', dot)}".replace("  ", " ")


def spelled_date(value: str, lang: str) -> str:
    """Spell the day and year of a date of birth, the month by its name."""
    numbers = re.findall(r"\d+", value)
    year = num2words(int(numbers[-1]), lang=lang, to="year")
    month_names = MONTHS[lang].split()
    month = next(
        (m for m in month_names if m.casefold() in value.casefold()),
        month_names[int(numbers[1 if lang != "en" else 0]) - 1]
        if len(numbers) == 3  # noqa: PLR2004
        else month_names[0],
    )
    day_number = int(numbers[0] if lang != "en" or len(numbers) == 2 else numbers[1])  # noqa: PLR2004
    if lang == "en" and len(numbers) == 2 and value.startswith("on"):  # noqa: PLR2004
        day_number = int(numbers[0])
    day = num2words(day_number, lang=lang, to="ordinal" if lang == "en" else "cardinal")
    glue = {"en": "of ", "de": "", "fr": "", "es": "de "}[lang]
    tail = {"en": "", "de": "", "fr": "", "es": "de "}[lang]
    return f"{day} {glue}{month} {tail}{year}"


def disguise(  # noqa: PLR0911
    kind: str, value: str, lang: str, rng: random.Random
) -> tuple[str, str]:
    """Return (form, disguised value) for one detail, or ("", "") for none."""
    if kind == "phone":
        if rng.random() < 0.5:  # noqa: PLR2004
            return "spelled", spelled_number(value, lang, rng)
        return "split", split_groups(value, rng)
    if kind == "card":
        if rng.random() < 0.3:  # noqa: PLR2004
            return "spelled", spelled_number(value, lang, rng)
        return "split", split_groups(value, rng)
    if kind == "iban":
        compact = value.replace(" ", "")
        sep = rng.choice([" ", "-", ".", "  "])
        return "split", sep.join(compact[i : i + 4] for i in range(0, len(compact), 4))
    if kind == "email":
        return "at_dot", at_dot(value, lang, rng)
    if kind == "address":
        return "lower", value.lower()
    if kind == "dob":
        return "spelled", spelled_date(value, lang)
    return "", ""


def row(
    text: str, details: list[dict[str, Any]], lang: str, locale: str, form: str
) -> dict[str, Any]:
    """Return one JSONL row: the query and each detail as it stands in it."""
    return {
        "lang": lang,
        "locale": locale,
        "country": COUNTRY[locale],
        "form": form,
        "query": text,
        "details": [
            {"kind": d["kind"], "value": d["value"], "surface": d["surface"]}
            for d in details
        ],
    }


def build() -> list[dict[str, Any]]:
    """Return every row: plain sentences and one disguised copy of each."""
    rng = random.Random(SEED)  # noqa: S311 - a data set, not a secret
    out: list[dict[str, Any]] = []
    plan = [
        (LOCALES[lang], lang, TEMPLATES[lang], PER_TEMPLATE_SET) for lang in LOCALES
    ]
    plan += [(loc, "en", ADDRESS_ONLY, 25) for loc in EXTRA_LOCALES + OTHER_LOCALES]
    for locale, lang, templates, count in plan:
        for sample in sentences(locale, lang, templates, count):
            text = sample["text"]
            details = [
                {**d, "surface": text[d["start"] : d["end"]]} for d in sample["details"]
            ]
            out.append(row(text, details, lang, locale, "plain"))
            pieces = []
            last = 0
            moved = []
            forms = set()
            for detail in details:
                form, value = disguise(detail["kind"], detail["value"], lang, rng)
                if not form:
                    form, value = "plain", detail["value"]
                forms.add(form)
                pieces.append(text[last : detail["start"]])
                pieces.append(value)
                last = detail["end"]
                moved.append({**detail, "surface": value})
            pieces.append(text[last:])
            if forms != {"plain"}:
                disguised = "".join(pieces)
                out.append(row(disguised, moved, lang, locale, "+".join(sorted(forms))))
    return out


def main() -> int:
    """Write the set."""
    Faker.seed(SEED)
    rows = build()
    with OUT.open("w", encoding="utf-8") as file:
        for item in rows:
            file.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(f"{len(rows)} queries -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
