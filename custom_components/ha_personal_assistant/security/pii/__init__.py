"""The PII sanitizer: what leaves the house in a web query carries nothing personal.

``sanitizer`` is the engine (:func:`sanitizer.sanitize`) and ``redactor``
its result (what was cut, by category); ``patterns`` the shapes it looks
for; ``phones``, ``accounts``, ``network``, ``addresses``, ``names``,
``secrets``, ``shapes``, ``disguise`` and ``leftovers`` the harder cases;
``words`` reads the word lists of each language from ``data/``.
"""
