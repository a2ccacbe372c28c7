# -*- coding: utf-8 -*-
"""atc's QwenPaw plugin, by concern (``plugin.py`` beside this folder is the entry and
says what the plugin does): ``where`` (which atc runs, where atc keeps its files, standing
by beside the seed plugin), ``tools``, ``kick`` (the end-of-turn kick and the cadence)
and ``auto_watch``. Imports go one way: ``where`` imports none of the others, ``tools``
and ``kick`` import ``where``, ``auto_watch`` imports all three."""
