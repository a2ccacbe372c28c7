# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_atc_global_optspecs
    string join \n state= base-url= json allow-insecure-remote q/quiet v/verbose h/help V/version
end

function __fish_atc_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_atc_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_atc_using_subcommand
    set -l cmd (__fish_atc_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c atc -n "__fish_atc_needs_command" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_needs_command" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_needs_command" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_needs_command" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_needs_command" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_needs_command" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_needs_command" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_needs_command" -f -a "watch" -d 'Record tasks and where their results must go'
complete -c atc -n "__fish_atc_needs_command" -f -a "status" -d 'Show watched tasks (the 20 most recent, newest first)'
complete -c atc -n "__fish_atc_needs_command" -f -a "cancel" -d 'Stop watching tasks (each child task keeps running)'
complete -c atc -n "__fish_atc_needs_command" -f -a "tick" -d 'One pass: poll each watched task once and deliver finished results'
complete -c atc -n "__fish_atc_needs_command" -f -a "redeliver" -d 'Try given-up deliveries again: undelivered, unconfirmed, misrouted or error'
complete -c atc -n "__fish_atc_needs_command" -f -a "wait" -d 'Wait in the foreground until tasks end, and print their results'
complete -c atc -n "__fish_atc_needs_command" -f -a "doctor" -d 'Check the setup and say what to fix: server, token, agents, job file, timer'
complete -c atc -n "__fish_atc_needs_command" -f -a "log" -d 'Show what happened to the watches, from the event log beside the job file'
complete -c atc -n "__fish_atc_needs_command" -f -a "paths" -d 'Print where atc keeps its files, as every command finds them in this environment'
complete -c atc -n "__fish_atc_needs_command" -f -a "import-plugin-state" -d 'Import the jobs of the Agent Task Callback plugin (atc\'s Python predecessor)'
complete -c atc -n "__fish_atc_needs_command" -f -a "timer" -d 'Print systemd units or crontab lines that run `atc tick` on a schedule'
complete -c atc -n "__fish_atc_needs_command" -f -a "config" -d 'Show or change the settings in atc\'s config file (read by every command)'
complete -c atc -n "__fish_atc_needs_command" -f -a "qwenpaw" -d 'Set atc up inside QwenPaw: its plugin (the Agent Task Callback tools), per agent'
complete -c atc -n "__fish_atc_needs_command" -f -a "generate" -d 'Print a man page or shell completions (for packagers)'
complete -c atc -n "__fish_atc_needs_command" -f -a "parent-read" -d 'The parent read these tasks\' finished results itself: do not post them (what atc\'s QwenPaw plugin runs when a check_agent_task call answers a finished task)'
complete -c atc -n "__fish_atc_using_subcommand watch" -l from -d 'Also watch every task named by a `[TASK_ID: …]` line in FILE (`-`: standard input), as submit_to_agent and `qwenpaw agents chat --background` print them; a `[TARGET_AGENT: AID]` line under one says the agent it runs on (as --target-agent, for that task)' -r -F
complete -c atc -n "__fish_atc_using_subcommand watch" -l child-session -d 'The child\'s own session ("[SESSION: …]" in submit_to_agent\'s answer; --from reads it from the line after each [TASK_ID: …]): what `cancel --stop` and --stop-after stop. Only with one task id' -r
complete -c atc -n "__fish_atc_using_subcommand watch" -l stop-after -d 'Stop the child (POST /console/chat/stop) when a tick finds it still running this long after it started; its "Task cancelled" result is delivered with a line saying atc stopped it. Needs the child\'s session' -r
complete -c atc -n "__fish_atc_using_subcommand watch" -l check-in -d 'While the child runs, post a short notice into the parent chat every D (at most 5 times): how long it has run, and how to stop it or the check-ins. Not with --group (a group reports together, in its one turn)' -r
complete -c atc -n "__fish_atc_using_subcommand watch" -l session -d 'Session the result goes to: the asking agent\'s "Session ID" [env: ATC_SESSION_ID]' -r
complete -c atc -n "__fish_atc_using_subcommand watch" -l user -d 'User of that session ("User ID" in the agent\'s prompt) [env: ATC_USER_ID] [default: default]' -r
complete -c atc -n "__fish_atc_using_subcommand watch" -l channel -d 'Channel of that session ("Channel" in the agent\'s prompt) [env: ATC_CHANNEL] [default: console]' -r
complete -c atc -n "__fish_atc_using_subcommand watch" -l agent -d 'Agent that owns the session (the one asking) [env: ATC_AGENT_ID] [default: default]' -r
complete -c atc -n "__fish_atc_using_subcommand watch" -l target-agent -d 'Agent the task runs on, when it is not --agent (polls go out as this agent, as check_agent_task does)' -r
complete -c atc -n "__fish_atc_using_subcommand watch" -l origin -d 'Who is watching, recorded as the job\'s origin: atc\'s QwenPaw plugin passes `plugin` from its tools, so that what the parent is told names the tool\'s options (stop_after) rather than atc\'s flags, and `auto` at the end of the turn whose submit_to_agent started the tasks (nothing while auto-watch is off, and a record the file holds is never taken over) [default: cli]' -r -f -a "cli\t'A command line'
plugin\t'atc\'s QwenPaw plugin\'s tools (watch_agent_task), called by the model'
auto\t'atc\'s QwenPaw plugin by itself, at the end of the turn whose submit_to_agent started the tasks'"
complete -c atc -n "__fish_atc_using_subcommand watch" -l group -d 'Deliver the results of all these tasks together, as one turn, once none is still running (fan-in), under `[ATC_GROUP: NAME]` (so NAME holds no `]`)' -r
complete -c atc -n "__fish_atc_using_subcommand watch" -l on-no-answer -d 'When the watch ends without an answer (lost, expired, abandoned) [default: notify]' -r -f -a "notify\t'Post one notice turn into the parent chat'
silent\t'Post nothing'"
complete -c atc -n "__fish_atc_using_subcommand watch" -l on-empty -d 'When the child succeeds with an empty answer [default: deliver]' -r -f -a "deliver\t'Deliver it like any result (\'(No text content in response)\')'
skip\t'Record the job as skipped and post nothing'"
complete -c atc -n "__fish_atc_using_subcommand watch" -l fork-branch -d 'The fork branch the child works on: a completed delivery ends with [FORK_BRANCH: BRANCH]' -r
complete -c atc -n "__fish_atc_using_subcommand watch" -l forward -d 'Send the parent\'s final reply on to the person on an IM channel (QwenPaw runs the woken turn through the console, so it never reaches them otherwise); for a console parent, show one toast in the web console once the woken turn ended [default: auto]' -r -f -a "auto\t'The reply for a parent on an IM channel, a toast for a console parent'
never\t'Never'"
complete -c atc -n "__fish_atc_using_subcommand watch" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand watch" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand watch" -l create-session -d 'Deliver even if the parent chat does not exist yet: QwenPaw starts it'
complete -c atc -n "__fish_atc_using_subcommand watch" -l no-task-check -d 'Do not ask the server whether it has each task (a script that watches many tasks at once and wants one request less each). Without it, a task id the server has never heard of (QwenPaw\'s "Task not found") is refused with exit 6, nothing watched'
complete -c atc -n "__fish_atc_using_subcommand watch" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand watch" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand watch" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand watch" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand watch" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand status" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand status" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand status" -l all -d 'List every job, not just the 20 most recent'
complete -c atc -n "__fish_atc_using_subcommand status" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand status" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand status" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand status" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand status" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand cancel" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand cancel" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand cancel" -l stop -d 'Also stop the child itself (POST /console/chat/stop on its chat, on the agent that holds it: --target-agent, else found among the server\'s agents), then end the watch; tried up to 3 times, then refused (the watch kept): exit 1 when the child\'s session is unknown or the child still runs after the stops, 5 when the server cannot be reached or refuses'
complete -c atc -n "__fish_atc_using_subcommand cancel" -l check-ins -d 'Only stop the check-ins (--check-in); keep watching'
complete -c atc -n "__fish_atc_using_subcommand cancel" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand cancel" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand cancel" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand cancel" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand cancel" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand cancel" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand tick" -l concurrency -d 'Polls and deliveries in flight at once [env: ATC_CONCURRENCY] [config: concurrency] [default: 8]' -r
complete -c atc -n "__fish_atc_using_subcommand tick" -l http-timeout -d 'Timeout of each HTTP phase (connect, send, wait for the answer, read it) [env: ATC_HTTP_TIMEOUT] [config: http-timeout] [default: 30s]' -r
complete -c atc -n "__fish_atc_using_subcommand tick" -l max-strikes -d 'Consecutive failed checks before a job is abandoned [env: ATC_MAX_STRIKES] [config: max-strikes] [default: 90]' -r
complete -c atc -n "__fish_atc_using_subcommand tick" -l max-age -d 'A task not finished this long after `watch` expires [env: ATC_MAX_AGE] [config: max-age] [default: 24h]' -r
complete -c atc -n "__fish_atc_using_subcommand tick" -l busy-retry -d 'Wait before retrying a delivery the parent chat refused as busy anyway (409) [env: ATC_BUSY_RETRY] [config: busy-retry] [default: 20s]' -r
complete -c atc -n "__fish_atc_using_subcommand tick" -l busy-deadline -d 'How long a delivery waits for a busy or unreachable parent chat before it is given up as undelivered (and how long an unknown one is read back) [env: ATC_BUSY_DEADLINE] [config: busy-deadline] [default: 6h]' -r
complete -c atc -n "__fish_atc_using_subcommand tick" -l keep -d 'Keep finished jobs in the file this long after their last change [env: ATC_KEEP] [config: keep] [default: 7d]' -r
complete -c atc -n "__fish_atc_using_subcommand tick" -l follow-up-depth -d 'How many levels a child\'s later reply goes up a delegation tree: a result delivered into a watched child\'s chat (its own answer already delivered) wakes it, and its reply goes to the child\'s parent as a follow-up; 0 keeps it there [env: ATC_FOLLOW_UP_DEPTH] [config: follow-up-depth] [default: 5]' -r
complete -c atc -n "__fish_atc_using_subcommand tick" -l poll-ceiling -d 'The longest wait between two polls of a child whose turn\'s end atc\'s QwenPaw plugin kicks (it is polled when that turn ends; otherwise at 20s, 40s, 80s… up to this); other watches are polled every tick [env: ATC_POLL_CEILING] [config: poll-ceiling] [default: 5m]' -r
complete -c atc -n "__fish_atc_using_subcommand tick" -l turn-timeout -d 'Ask QwenPaw to stop the parent\'s resumed turn after this long [env: ATC_TURN_TIMEOUT] [config: turn-timeout] [default: QwenPaw\'s own, 1h]' -r
complete -c atc -n "__fish_atc_using_subcommand tick" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand tick" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand tick" -l kicked -d 'Started because a QwenPaw turn just ended (atc\'s plugin does this, naming the turn in ATC_KICK): only the watches that turn may concern are polled, and only what waits for its chat is delivered (without ATC_KICK, everything, each watch polled once); a task still reading running (named in ATC_KICK), or a parent still busy, is looked at again for up to 2 s; when another tick is running, leave it a mark to make one more pass instead. Nobody reads its stderr: its give-ups are left for the next tick to say'
complete -c atc -n "__fish_atc_using_subcommand tick" -l no-batch -d 'One result per parent turn: do not gather everything due for a chat into one turn [env: ATC_NO_BATCH=1] [config: no-batch = true]'
complete -c atc -n "__fish_atc_using_subcommand tick" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand tick" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand tick" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand tick" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand tick" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand tick" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand redeliver" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand redeliver" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand redeliver" -l create-session -d 'Allow the delivery to start the parent chat if it does not exist'
complete -c atc -n "__fish_atc_using_subcommand redeliver" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand redeliver" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand redeliver" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand redeliver" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand redeliver" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand redeliver" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand wait" -l agent -d 'Agent the task runs on [env: ATC_AGENT_ID] [default: default]' -r
complete -c atc -n "__fish_atc_using_subcommand wait" -l timeout -d 'Give up after this long (exit 124; 5 if the last poll failed) [default: no limit]' -r
complete -c atc -n "__fish_atc_using_subcommand wait" -l interval -d 'Time between polls [default: 3s]' -r
complete -c atc -n "__fish_atc_using_subcommand wait" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand wait" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand wait" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand wait" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand wait" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand wait" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand wait" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand wait" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand doctor" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand doctor" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand doctor" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand doctor" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand doctor" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand doctor" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand doctor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand doctor" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand log" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand log" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand log" -l all -d 'Every event kept, not just the last 50'
complete -c atc -n "__fish_atc_using_subcommand log" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand log" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand log" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand log" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand log" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand log" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand paths" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand paths" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand paths" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand paths" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand paths" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand paths" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand paths" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand paths" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand import-plugin-state" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand import-plugin-state" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand import-plugin-state" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand import-plugin-state" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand import-plugin-state" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand import-plugin-state" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand import-plugin-state" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand import-plugin-state" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand timer; and not __fish_seen_subcommand_from print" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand timer; and not __fish_seen_subcommand_from print" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand timer; and not __fish_seen_subcommand_from print" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand timer; and not __fish_seen_subcommand_from print" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand timer; and not __fish_seen_subcommand_from print" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand timer; and not __fish_seen_subcommand_from print" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand timer; and not __fish_seen_subcommand_from print" -s h -l help -d 'Print help'
complete -c atc -n "__fish_atc_using_subcommand timer; and not __fish_seen_subcommand_from print" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand timer; and not __fish_seen_subcommand_from print" -f -a "print" -d 'Print the units (systemd), crontab lines (cron) or a LaunchAgent (launchd, macOS), naming this atc binary'
complete -c atc -n "__fish_atc_using_subcommand timer; and __fish_seen_subcommand_from print" -l interval -d 'How often to tick [default: 20s]' -r
complete -c atc -n "__fish_atc_using_subcommand timer; and __fish_seen_subcommand_from print" -l unit -d 'Print only this systemd unit (to redirect it into its file)' -r -f -a "service\t'atc-tick.service'
timer\t'atc-tick.timer'"
complete -c atc -n "__fish_atc_using_subcommand timer; and __fish_seen_subcommand_from print" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand timer; and __fish_seen_subcommand_from print" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand timer; and __fish_seen_subcommand_from print" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand timer; and __fish_seen_subcommand_from print" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand timer; and __fish_seen_subcommand_from print" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand timer; and __fish_seen_subcommand_from print" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand timer; and __fish_seen_subcommand_from print" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand timer; and __fish_seen_subcommand_from print" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -f -a "path" -d 'Print the config file\'s path (whether or not it exists yet)'
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -f -a "show" -d 'Every setting, its value and where it came from (flag, environment, file, default)'
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -f -a "get" -d 'Print the value one setting has here (what `config show` shows for it)'
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -f -a "set" -d 'Write KEY = VALUE into the config file, keeping the rest of it (comments included)'
complete -c atc -n "__fish_atc_using_subcommand config; and not __fish_seen_subcommand_from path show get set unset" -f -a "unset" -d 'Remove KEY from the config file (it falls back to its environment variable or default); an unknown key too, to mend a typo'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from path" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from path" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from path" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from path" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from path" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from path" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from path" -s h -l help -d 'Print help'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from path" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from show" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from show" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from show" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from show" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from show" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from show" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from show" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from get" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from get" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from get" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from get" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from get" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from get" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from get" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from set" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from set" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from set" -l force -d 'Set `state` even though the job file it replaces still watches tasks (nothing ticks that file afterwards: their results are not delivered)'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from set" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from set" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from set" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from set" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from set" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from set" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from unset" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from unset" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from unset" -l force -d 'Unset `state` even though the job file it names still watches tasks'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from unset" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from unset" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from unset" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from unset" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from unset" -s h -l help -d 'Print help'
complete -c atc -n "__fish_atc_using_subcommand config; and __fish_seen_subcommand_from unset" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and not __fish_seen_subcommand_from install zip" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and not __fish_seen_subcommand_from install zip" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and not __fish_seen_subcommand_from install zip" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and not __fish_seen_subcommand_from install zip" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and not __fish_seen_subcommand_from install zip" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and not __fish_seen_subcommand_from install zip" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and not __fish_seen_subcommand_from install zip" -s h -l help -d 'Print help'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and not __fish_seen_subcommand_from install zip" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and not __fish_seen_subcommand_from install zip" -f -a "install" -d 'Install atc\'s QwenPaw plugin and enable its tools for agents'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and not __fish_seen_subcommand_from install zip" -f -a "zip" -d 'Write the plugin zip that QwenPaw\'s own installer takes, and print its path'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -l working-dir -d 'QwenPaw\'s working dir [env: QWENPAW_WORKING_DIR] [default: ~/.copaw if it exists, else ~/.qwenpaw]' -r -F
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -l agents -d 'Enable the tools for these agents [default: the active agent]' -r
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -l all -d 'Enable the tools for every agent'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -l dry-run -d 'Print what would change, change nothing'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -l replace-agent-task-callback -d 'Move from the Agent Task Callback plugin in one step: note which agents have its tools enabled; under atc\'s job-file lock, merge its jobs into the job file and prove the save, remove the old plugin (through the running server\'s API, no prompt; else from disk), then save; mark the jobs handed over in its state file (a copy beside it first, so a reinstalled old plugin cannot deliver them again); install atc\'s plugin with its tools enabled for exactly those agents, and have the server load it again (every tool offered, no restart). A task is never watched by both or by nobody: a removal that fails imports nothing; run again after a save that failed, it imports what the old state file still holds'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from install" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from zip" -l out -d 'Where to write it [default: the current directory]' -r -F
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from zip" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from zip" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from zip" -l thin -d 'Carry no atc: atc-qwenpaw-plugin-<version>.zip with a requirements.txt pinning this atc (atc-qwenpaw==<version>), which QwenPaw\'s loader pip-installs into the server\'s environment (it needs the package on an index QwenPaw\'s pip reaches, and pip 26.2.2 or newer there). For the plugin Market, and for any platform once a release\'s wheels are published'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from zip" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from zip" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from zip" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from zip" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from zip" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand qwenpaw; and __fish_seen_subcommand_from zip" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -s h -l help -d 'Print help'
complete -c atc -n "__fish_atc_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -f -a "man" -d 'The man page of atc, or of one command (man/ holds them all)'
complete -c atc -n "__fish_atc_using_subcommand generate; and not __fish_seen_subcommand_from man completions" -f -a "completions" -d 'Completions for a shell (completions/ holds bash, zsh and fish)'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from man" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from man" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from man" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from man" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from man" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from man" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from man" -s h -l help -d 'Print help'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from man" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from completions" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from completions" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from completions" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from completions" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from completions" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from completions" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from completions" -s h -l help -d 'Print help'
complete -c atc -n "__fish_atc_using_subcommand generate; and __fish_seen_subcommand_from completions" -s V -l version -d 'Print version'
complete -c atc -n "__fish_atc_using_subcommand parent-read" -l session -d 'Session of the chat that read them [env: ATC_SESSION_ID]' -r
complete -c atc -n "__fish_atc_using_subcommand parent-read" -l user -d 'User of that chat [env: ATC_USER_ID] [default: default]' -r
complete -c atc -n "__fish_atc_using_subcommand parent-read" -l channel -d 'Channel of that chat [env: ATC_CHANNEL] [default: console]' -r
complete -c atc -n "__fish_atc_using_subcommand parent-read" -l agent -d 'Agent of that chat [env: ATC_AGENT_ID] [default: default]' -r
complete -c atc -n "__fish_atc_using_subcommand parent-read" -l state -d 'Job file [env: ATC_STATE] [config: state] [default: $XDG_STATE_HOME/atc/jobs.json, i.e. ~/.local/state/atc/jobs.json]' -r -F
complete -c atc -n "__fish_atc_using_subcommand parent-read" -l base-url -d 'QwenPaw URL recorded into new watches [env: ATC_BASE_URL] [default: QWENPAW_RUNTIME_API_URL (managed runtime), else base-url in the config file, else last_api in QwenPaw\'s config.json, else http://127.0.0.1:8088]; /api is appended unless present' -r
complete -c atc -n "__fish_atc_using_subcommand parent-read" -l json -d 'Print one JSON document on stdout instead of text'
complete -c atc -n "__fish_atc_using_subcommand parent-read" -l allow-insecure-remote -d 'Send tokens over plain http:// to a host that is not this machine (refused otherwise: use https://); a watch records it for its tick [env: ATC_ALLOW_INSECURE_REMOTE=1]'
complete -c atc -n "__fish_atc_using_subcommand parent-read" -s q -l quiet -d 'Print nothing on success'
complete -c atc -n "__fish_atc_using_subcommand parent-read" -s v -l verbose -d 'Say more on stderr (repeat for more)'
complete -c atc -n "__fish_atc_using_subcommand parent-read" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c atc -n "__fish_atc_using_subcommand parent-read" -s V -l version -d 'Print version'
