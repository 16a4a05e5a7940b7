"""Word-level comparison of short facts: dedupe, forget and relevance."""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher
from typing import Final

_WORD: Final = re.compile(r"\w+")
_NUMBER: Final = re.compile(r"^\d+(?:[.,]\d+)?$")
MIN_STEM_LENGTH: Final = 4
# Words that carry no meaning of their own in a fact about a person. English
# only: the prompt language; other languages still match on content words.
STOPWORDS: Final = frozenset(
    {
        "a",
        "about",
        "all",
        "also",
        "am",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "let",
        "me",
        "my",
        "myself",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "too",
        "us",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
        "user",
        "remember",
        "please",
        "always",
        "usually",
    }
)
# Two facts at least this alike (in characters) are the same fact reworded.
NEAR_IDENTICAL_RATIO: Final = 0.95
# A query this alike to a fact (in characters) quotes it.
VERBATIM_RATIO: Final = 0.75


def normalize(text: str) -> str:
    """Return ``text`` folded for comparison: NFKC, lower case, single spaces."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_WORD.findall(folded))


def _stem(word: str) -> str:
    # A plural "s" is the difference that matters most for short facts
    # ("degrees" and "degree"); anything smarter needs a language model.
    if len(word) >= MIN_STEM_LENGTH and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def tokens(text: str) -> frozenset[str]:
    """Return the content words of ``text``, stemmed, without stopwords."""
    return frozenset(
        _stem(word)
        for word in normalize(text).split()
        # Single letters are the rest of contractions ("i'm", "don't").
        if word not in STOPWORDS and (len(word) > 1 or word.isdigit())
    )


def _numbers(words: frozenset[str]) -> frozenset[str]:
    return frozenset(word for word in words if _NUMBER.match(word))


def near_identical(first: str, second: str) -> bool:
    """Tell whether two facts say the same thing in (almost) the same words."""
    first_words, second_words = tokens(first), tokens(second)
    if first_words and first_words == second_words:
        return True
    if _numbers(first_words) != _numbers(second_words):
        return False
    ratio = SequenceMatcher(None, normalize(first), normalize(second)).ratio()
    return ratio >= NEAR_IDENTICAL_RATIO


def is_update(old: str, new: str) -> bool:
    """Tell whether ``new`` restates ``old`` with other numbers (19 → 20 degrees)."""
    old_words, new_words = tokens(old), tokens(new)
    old_numbers, new_numbers = _numbers(old_words), _numbers(new_words)
    if not old_numbers or not new_numbers or old_numbers == new_numbers:
        return False
    rest = old_words - old_numbers
    return bool(rest) and rest == new_words - new_numbers


def closeness(query: str, fact: str) -> float:
    """Return how well ``query`` names ``fact``, from 0 to 1.

    The share of the query's words found in the fact ("bedroom" names "likes
    the bedroom at 19 degrees" fully), or, for a query that quotes the fact
    almost verbatim, the character similarity of the two. Lower similarities
    say nothing: any two short English sentences share half their letters.
    """
    query_words = tokens(query)
    coverage = (
        len(query_words & tokens(fact)) / len(query_words) if query_words else 0.0
    )
    ratio = SequenceMatcher(None, normalize(query), normalize(fact)).ratio()
    return max(coverage, ratio if ratio >= VERBATIM_RATIO else 0.0)


# A fact is the user's own when this share of its content words are words the
# user wrote (and every number in it is one they wrote).
GROUNDED_SHARE: Final = 0.6
# Words match when one is the other plus at most this many letters of ending
# ("prefers" / "prefer", "named" / "name", "Küche" / "Küchen").
GROUNDED_ENDING: Final = 3


def _same_word(first: str, second: str) -> bool:
    if first == second:
        return True
    shorter, longer = sorted((first, second), key=len)
    return (
        len(shorter) >= MIN_STEM_LENGTH
        and longer.startswith(shorter)
        and len(longer) - len(shorter) <= GROUNDED_ENDING
    )


def grounded(fact: str, user_texts: list[str]) -> bool:
    """Tell whether ``fact`` is made of the user's own words.

    The rule for facts stored without asking: every number in the fact is one
    the user wrote, and at least :data:`GROUNDED_SHARE` of its content words
    (numbers included) are words the user wrote, with their endings allowed
    to differ. Words only the model or a web page wrote cannot become a fact.
    """
    fact_words = tokens(fact)
    if not fact_words:
        return False
    said = frozenset().union(*(tokens(text) for text in user_texts))
    numbers = _numbers(fact_words)
    if not numbers <= said:
        return False
    words = fact_words - numbers
    found = sum(1 for word in words if any(_same_word(word, own) for own in said))
    return (found + len(numbers)) / len(fact_words) >= GROUNDED_SHARE
