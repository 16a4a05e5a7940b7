"""Documents the assistant can search: added ones, files, and HA's own knowledge.

``index`` stores, embeds and searches them; ``chunking`` cuts them;
``knowledge`` writes HA's own (exposed entities, areas, floors) as text;
``folder`` reads the documents folder.
"""
