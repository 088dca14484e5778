# shellcheck shell=bash
# Sourced by bench/s5.sh and bench/transactions.sh: Laminar or Kafka started (and stopped, with
# machine.sh's stop_broker) on one
# port, and loads run with a time limit (Kafka's Java tools: `java_tool_setup` in machine.sh).
# The sourcing script sets: PORT, bootstrap, work (a scratch dir), bin (laminar), out, raw
# (bench_raw_dir OUT, machine.sh; prepare_run sets it), KAFKA_LIB, TOOL_HEAP, NETWORK_THREADS,
# IO_THREADS, REBALANCE_DELAY_MS, LOAD_TIMEOUT_S, and
# launcher_pid="" broker_pid="" tool_pid="" (what its cleanup stops).

# cleanup: stops the load and the broker still running, removes $work. Installed with
# `trap cleanup EXIT` (and TERM/INT turned into exits, so that it always runs).
cleanup() {
  if [[ -n $tool_pid ]] && kill -0 "$tool_pid" 2>/dev/null; then
    kill -TERM "$tool_pid" 2>/dev/null || true
    wait "$tool_pid" 2>/dev/null || true
  fi
  if [[ -n $launcher_pid ]] && kill -0 "$launcher_pid" 2>/dev/null; then
    kill -TERM "$launcher_pid" 2>/dev/null || true
    wait "$launcher_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}

status_kb() { # PID FIELD: a VmRSS/VmHWM line of /proc/PID/status, in kB
  awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"
}

# prepare_run NAME: sets raw (bench_raw_dir OUT: the raw files, outside the repository);
# refuses to start when something listens on PORT (wait_port would succeed against the wrong
# broker) or $raw holds results (they would be summarised with these); makes OUT, $raw and the
# scratch dir $work (.bench-NAME.XXXXXX here); installs the cleanup:
# bash runs the EXIT trap on `exit`, and TERM/INT are turned into exits so that it always runs.
prepare_run() {
  if bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; then
    echo "something already listens on 127.0.0.1:$PORT; set PORT" >&2
    exit 1
  fi
  raw=$(bench_raw_dir "$out")
  if [[ -n $(ls -A "$raw" 2>/dev/null) ]]; then
    echo "$raw already holds results; give another OUT (or move them away)" >&2
    exit 1
  fi
  mkdir -p "$out" "$raw"
  work=$(mktemp -d "$PWD/.bench-$1.XXXXXX")
  launcher_pid="" # what to stop: laminar itself, or run-kafka.sh (it forwards SIGTERM to the JVM)
  broker_pid=""   # the broker process whose /proc/PID/status we read (Kafka: the java child)
  tool_pid=""     # the load running now (its `timeout` wrapper, which passes signals on)
  trap cleanup EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
}

# start_broker BROKER DATA_DIR LOG: starts it in the background and waits for its port.
start_broker() {
  local broker=$1 data=$2 log=$3
  case $broker in
    laminar | base)
      local laminar_bin=$bin
      [[ $broker == base ]] && laminar_bin=$BASE_BIN
      "$laminar_bin" serve --listen "$bootstrap" --data-dir "$data" --metrics-listen none \
        --config "$work/laminar.toml" > "$log" 2>&1 &
      launcher_pid=$!
      broker_pid=$launcher_pid
      ;;
    kafka)
      # run-kafka.sh already sets group.initial.rebalance.delay.ms=0; a later line in
      # server.properties wins, so this makes it REBALANCE_DELAY_MS. Flush settings stay
      # Kafka's defaults (no fsync but on segment roll and shutdown).
      KAFKA_NETWORK_THREADS=$NETWORK_THREADS KAFKA_IO_THREADS=$IO_THREADS \
        KAFKA_EXTRA_PROPS="group.initial.rebalance.delay.ms=$REBALANCE_DELAY_MS" \
        bench/kafka/run-kafka.sh "$PORT" "$data" > "$log" 2>&1 &
      launcher_pid=$!
      ;;
  esac
  wait_port
  if [[ $broker == kafka ]]; then
    # run-kafka.sh starts `java ... kafka.Kafka` as its direct child (the storage-format java
    # that runs before it has exited by the time the port is open).
    broker_pid=$(pgrep -P "$launcher_pid" -x java)
  fi
}

# run_load NAME COMMAND...: runs it with a time limit, all output to $raw/NAME.txt after a
# line with the command; a failed load is recorded ("[exit N]") and the others still run.
run_load() {
  local name=$1 rc=0
  shift
  local file=$raw/$name.txt
  echo "\$ $*" > "$file"
  echo "$(date +%T) $name"
  timeout "$LOAD_TIMEOUT_S" "$@" >> "$file" 2>&1 &
  tool_pid=$!
  wait "$tool_pid" || rc=$?
  tool_pid=""
  echo "[exit $rc]" >> "$file"
  if ((rc != 0)); then echo "warning: $name exited $rc, see $file" >&2; fi
}

create_topic() { # NAME PARTITIONS TAG
  local file=$raw/$3-topics.txt
  "$bin" topics create "$1" --partitions "$2" --bootstrap "$bootstrap" >> "$file" 2>&1 ||
    { echo "creating topic $1 failed:" >&2; cat "$file" >&2; return 1; }
}


# run_rounds: ROUNDS rounds over the brokers of $BROKERS, in alternating order (as listed in
# odd rounds, reversed in even ones, so that no broker always runs on the warmer machine),
# calling the script's run_broker BROKER ROUND for each; the order goes to $out/order.txt.
run_rounds() {
  local brokers order round i broker
  read -r -a brokers <<< "$BROKERS"
  for round in $(seq 1 "$ROUNDS"); do
    order=("${brokers[@]}")
    if ((round % 2 == 0)); then
      order=()
      for ((i = ${#brokers[@]} - 1; i >= 0; i--)); do order+=("${brokers[i]}"); done
    fi
    echo "round $round: ${order[*]}" | tee -a "$out/order.txt"
    for broker in "${order[@]}"; do run_broker "$broker" "$round"; done
  done
}
