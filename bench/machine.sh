# shellcheck shell=bash
# Sourced by the bench scripts: `machine_info DIR` prints the machine, the disk under DIR and
# the laminar build, the header of every results/*/machine.txt; and helpers several scripts
# use: `evict_big DIR`, `java_tool_setup`, `bench_raw_dir OUT` and `cpu_ticks PID`.

# The results directory this file sits beside, for bench_raw_dir (resolved once, when sourced).
bench_results_dir=$(realpath -m "$(dirname "${BASH_SOURCE[0]}")/results")

# bench_raw_dir OUT: where a run's raw files go: broker logs, Prometheus dumps, every tool's raw
# output, latency series, histories and kept data directories. Outside the repository:
# ${LAMINAR_BENCH_RAW:-/var/tmp/laminar-bench-raw}/ followed by OUT's path under bench/results/
# (OUT's own name when it is elsewhere). OUT keeps what is committed: the README, summaries,
# charts and the small figures a summary is made from. bench/bench_raw.py is the same rule for
# the Python summaries.
bench_raw_dir() {
  local abs root=${LAMINAR_BENCH_RAW:-/var/tmp/laminar-bench-raw}
  abs=$(realpath -m "$1")
  case $abs in
    "$bench_results_dir"/*) echo "$root/${abs#"$bench_results_dir"/}" ;;
    *) echo "$root/$(basename "$abs")" ;;
  esac
}

cpu_ticks() { # PID: its user + system CPU time so far, in clock ticks (/proc/PID/stat)
  awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"
}

machine_info() {
  echo "date: $(date -Is)"
  echo "host: $(hostname)"
  echo "kernel: $(uname -r)"
  echo "cpus: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
  echo "memory: $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "filesystem: $(df -T "$1" | awk 'NR==2 {print $1, $2}')"
  echo "laminar: $(target/release/laminar --version) at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "rustc: $(rustc --version)"
}

# evict_big DIR: evicts every file under DIR whose path contains /big- from the page cache.
evict_big() {
  python3 - "$1" <<'PY'
import os, sys
n = 0
for root, _, files in os.walk(sys.argv[1]):
    if "/big-" not in root + "/":
        continue
    for f in files:
        fd = os.open(os.path.join(root, f), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        n += 1
print(f"evicted {n} files under {sys.argv[1]}", file=sys.stderr)
PY
}

# java_tool_setup: the `java_tool` command array, and its log4j2 config in $work.
java_tool_setup() {
  # The Java tools run as Kafka's bin/kafka-*-perf-test.sh run them (heap, G1 options), with a
  # log4j2 config that prints warnings, plus the clients' "ProducerConfig values:" and
  # "ConsumerConfig values:" dumps (logged by AbstractConfig): the raw files then show every
  # client setting in effect.
  cat > "$work/tools-log4j2.properties" <<'LOG4J'
status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = INFO
LOG4J
  # TOOL_HEAP is deliberately split into words (it may hold several JVM options).
  # shellcheck disable=SC2206
  java_tool=(java $TOOL_HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
    -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true
    "-Dlog4j2.configurationFile=$work/tools-log4j2.properties" -cp "$KAFKA_LIB/*")
}

# settle_disk: waits (at most 180 s) until the disk has been idle for 6 s in a row (its
# io_ticks, field 10 of /sys/block/DEV/stat, did not move; longer than ext4's 5 s journal
# commit), after a `sync`. A round that deleted gigabytes leaves the disk busy for a while on a
# file system mounted with `discard` (ext4 trims the freed blocks at its journal commits), and
# the next round's fsyncs would wait behind that.
settle_disk() {
  local dev=${1:-vda} quiet=0 waited=0 before after
  sync
  before=$(awk '{print $10}' "/sys/block/$dev/stat")
  while ((quiet < 6 && waited < 180)); do
    sleep 1
    waited=$((waited + 1))
    after=$(awk '{print $10}' "/sys/block/$dev/stat")
    if ((after == before)); then quiet=$((quiet + 1)); else quiet=0; fi
    before=$after
  done
  if ((quiet >= 6)); then
    echo "disk settled after ${waited} s"
  else
    echo "disk still busy after ${waited} s; going on" >&2
  fi
}

# Moves every process left in the blkio cgroup $1 back to the root cgroup and removes it (the
# scripts' cleanup on exit); nothing if it is gone.
remove_blkio_cgroup() {
  local cg=$1 p
  [[ -d $cg ]] || return 0
  if [[ -r $cg/cgroup.procs ]]; then
    while read -r p; do echo "$p" > /sys/fs/cgroup/blkio/cgroup.procs || true; done < "$cg/cgroup.procs"
  fi
  rmdir "$cg" || true
}

# wait_port: waits (at most 120 s) until 127.0.0.1:$PORT accepts, while $launcher_pid lives.
wait_port() {
  for _ in $(seq 1 120); do
    bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null && return 0
    kill -0 "$launcher_pid" 2>/dev/null || { echo "broker exited before listening" >&2; return 1; }
    sleep 1
  done
  echo "broker did not start listening on $PORT in 120 s" >&2
  return 1
}

# stop_broker: stops $launcher_pid (SIGTERM: a clean shutdown) and forgets it and $broker_pid.
stop_broker() {
  kill -TERM "$launcher_pid"
  wait "$launcher_pid" || true
  launcher_pid=""
  # shellcheck disable=SC2034 # the caller's
  broker_pid=""
}

# make_tls_certs DIR: a CA and a certificate for 127.0.0.1 (RSA 2048, 2 days) in DIR: the
# broker's keystore DIR/keystore.pem (the key, PKCS#8, and the chain), the CA DIR/ca.pem, and
# DIR/ssl-client.properties for Kafka's Java tools (SSL, the CA as a PEM truststore).
make_tls_certs() {
  local dir=$1
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=bench CA" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$dir/broker.key" \
    -out "$dir/broker.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$dir/san.ext"
  openssl x509 -req -in "$dir/broker.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 2 -extfile "$dir/san.ext" -out "$dir/broker.crt" 2>/dev/null
  cat "$dir/broker.key" "$dir/broker.crt" "$dir/ca.pem" > "$dir/keystore.pem"
  printf 'security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n' \
    "$dir/ca.pem" > "$dir/ssl-client.properties"
}
