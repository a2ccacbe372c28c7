"""Helpers for atc's real-QwenPaw scenarios. Run with the provisioned venv's python.

  setup --llm-url URL [--model M]
      Prepares the working dir named by $QWENPAW_WORKING_DIR (the caller sets the
      isolated environment: HOME, QWENPAW_WORKING_DIR, TMPDIR, telemetry/keyring off):
      `qwenpaw init --defaults --accept-security`, a custom OpenAI-compatible
      provider pointing at URL, that model activated globally and as every shipped
      agent's active_model, `.bootstrap_completed` touched in every workspace.
      Prints one JSON line: {"agents": [...ids...], "provider": ..., "model": ...}.

  oracle TASK_ID
      Reads a GET /api/console/chat/task/<id> payload (JSON) on stdin and writes
      exactly what qwenpaw.agents.tools.agent_management.format_background_status_text
      returns for it (no trailing newline added).

  oracle-batch
      Reads a JSON list of {"task_id": ..., "payload": {...}} on stdin and prints a
      JSON list of the formatter's outputs (one import for many payloads).
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

PROVIDER_ID = "atc-e2e-fake"


def _init_working_dir():
    wd = os.environ.get("QWENPAW_WORKING_DIR")
    if not wd:
        sys.exit("qwenpaw_setup: QWENPAW_WORKING_DIR must be set (isolated working dir)")
    if (Path(wd) / "config.json").exists():
        return Path(wd)
    cmd = [sys.executable, "-m", "qwenpaw", "init", "--defaults", "--accept-security"]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    if proc.returncode != 0 or not (Path(wd) / "config.json").exists():
        sys.stderr.write(proc.stdout[-4000:])
        sys.exit("qwenpaw_setup: `qwenpaw init --defaults --accept-security` failed "
                 "(exit %s)" % proc.returncode)
    return Path(wd)


def setup(llm_url, model):
    wd = _init_working_dir()

    # Imported only now: qwenpaw resolves its working/secret dirs at import time.
    from qwenpaw.config.config import mutate_agent_config
    from qwenpaw.config.utils import load_config
    from qwenpaw.config.config import ModelSlotConfig
    from qwenpaw.providers.model_info import ModelInfo
    from qwenpaw.providers.provider import ProviderInfo
    from qwenpaw.providers.provider_manager import ProviderManager

    async def configure():
        manager = ProviderManager.get_instance()
        if manager.get_provider(PROVIDER_ID) is None:
            await manager.add_custom_provider(ProviderInfo(
                id=PROVIDER_ID,
                name="atc e2e fake LLM",
                base_url=llm_url,
                api_key="dummy",
                chat_model="OpenAIChatModel",
                extra_models=[ModelInfo(id=model, name=model)],
            ))
        await manager.activate_model(PROVIDER_ID, model)

    asyncio.run(configure())

    config = load_config()
    agents = sorted(config.agents.profiles.keys())
    for agent_id in agents:
        def apply(agent_config):
            agent_config.active_model = ModelSlotConfig(provider_id=PROVIDER_ID, model=model)
        mutate_agent_config(agent_id, apply)
        workspace = Path(config.agents.profiles[agent_id].workspace_dir)
        # Without this flag the first user turn ever is stored with a bootstrap
        # guidance block prepended (contract §8).
        (workspace / ".bootstrap_completed").touch()
    print(json.dumps({"working_dir": str(wd), "agents": agents,
                      "provider": PROVIDER_ID, "model": model}))


def _formatter():
    from qwenpaw.agents.tools.agent_management import format_background_status_text
    return format_background_status_text


def oracle(task_id):
    payload = json.loads(sys.stdin.read())
    text = _formatter()(task_id, payload)
    # Bytes, not text mode: no newline translation, no locale encoding.
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()


def oracle_batch():
    items = json.loads(sys.stdin.read())
    fmt = _formatter()
    out = json.dumps([fmt(item["task_id"], item["payload"]) for item in items])
    sys.stdout.buffer.write(out.encode("ascii") + b"\n")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup")
    s.add_argument("--llm-url", required=True, help="e.g. http://127.0.0.1:PORT/v1")
    s.add_argument("--model", default="fake-echo")
    o = sub.add_parser("oracle")
    o.add_argument("task_id")
    sub.add_parser("oracle-batch")
    args = ap.parse_args()
    if args.cmd == "setup":
        setup(args.llm_url, args.model)
    elif args.cmd == "oracle":
        oracle(args.task_id)
    else:
        oracle_batch()


if __name__ == "__main__":
    main()
