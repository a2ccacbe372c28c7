# How long things take on two cores: the one home of the time estimates atc's scripts and
# documents quote. Measured on a clean clone (`tests/e2e/run-all` prints each part's time
# beside its estimate, so a stale one shows in every CI log). `demo.sh` and `run-all` print
# these values; tests/it/docs/estimates.rs fails when README.md, CONTRIBUTING.md, tests/e2e/README.md,
# demo.sh, provision.sh or run-all states an estimate that is not one of them, word for word.
# Sourced by bash; one `est_<name>='<text>'` per line.
est_provision='about 2 minutes, up to 5 on a busy machine, and 1.5 GB'
est_demo_first='about 2–3 minutes'
est_demo_later='about 20–40 s (up to 60 on a busy machine)'
est_server_start='~10 s'
est_broker='~5–15 s'
est_browser='~15–40 s'
est_build='2–4 minutes'
est_fast='about 45 s'
est_crash='about 45 s'
est_e2e='about 18–23 minutes'
est_pip='about 30 s once its cache is warm'
est_run_all='about 23–28 minutes'
