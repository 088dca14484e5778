# shellcheck shell=bash
# Sourced by the bench scripts: `machine_info DIR` prints the machine, the disk under DIR and
# the laminar build, the header of every results/*/machine.txt; and helpers several scripts
# use: `evict_big DIR` and `java_tool_setup`.
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
