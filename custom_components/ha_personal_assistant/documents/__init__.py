"""Documents the assistant can search: added ones, files, and HA's own knowledge.

``index`` adds and searches them; ``embedder`` embeds their chunks in the
background; ``chunking`` cuts them; ``knowledge`` writes HA's own (exposed
entities, areas, floors) as text and ``ha_watch`` rebuilds it after changes;
``folder`` reads the documents folder. Their tables are in ``store/documents``.
"""
