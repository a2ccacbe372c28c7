"""Regenerates the golden renderings from QwenPaw's own formatter.

Run with the python of a virtualenv that has qwenpaw==2.2.2.post1 installed
(tests/e2e/provision.sh prints it):  $PY tests/data/render/generate.py
Each NAME.json is a GET /api/console/chat/task/{id} body; NAME.txt is what
format_background_status_text returns for it, cut to 8000 characters as atc does.
"""

import json
import pathlib

from qwenpaw.agents.tools.agent_management import format_background_status_text

TASK_ID = "task-d7f9d48350b1"
here = pathlib.Path(__file__).resolve().parent
for source in sorted(here.glob("*.json")):
    payload = json.loads(source.read_text(encoding="utf-8"))
    text = format_background_status_text(TASK_ID, payload)[:8000]
    source.with_suffix(".txt").write_bytes(text.encode("utf-8"))
    print(source.stem)
