# shellcheck shell=bash
# Background processes of the local control planes (hack/local-cluster.sh,
# hack/karmada-cluster.sh): started with their output in $LOGS/<name>.log
# and their PID in $PIDS/<name>, waited for, and stopped by recorded PID
# only. The sourcing script defines die and sets LOGS and PIDS; WAIT_SECONDS
# (default 60) bounds wait_for.

start() { # name command...: run in the background, record the PID
  local name=$1
  shift
  "$@" >"${LOGS:?}/$name.log" 2>&1 &
  echo $! >"${PIDS:?}/$name"
}

wait_for() { # what url [curl args...]: until it answers ok, or a process exits
  local what=$1 url=$2 i f limit=${WAIT_SECONDS:-60}
  shift 2
  for ((i = 0; i < limit * 10; i++)); do
    if [[ $(curl -s --max-time 2 "$@" "$url" 2>/dev/null) == ok ]]; then return; fi
    for f in "$PIDS"/*; do
      kill -0 "$(cat "$f")" 2>/dev/null || die "$(basename "$f") exited; last lines of $LOGS/$(basename "$f").log:
$(tail -20 "$LOGS/$(basename "$f").log")"
    done
    sleep 0.1
  done
  die "$what not ready at $url after $limit s"
}

stop() { # names...: SIGTERM together, wait up to 20 s, then SIGKILL
  local n pid i alive pids=()
  for n in "$@"; do
    [[ -f $PIDS/$n ]] || continue
    pid=$(cat "$PIDS/$n")
    kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$PIDS/$n"
  done
  for ((i = 0; i < 200; i++)); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}
