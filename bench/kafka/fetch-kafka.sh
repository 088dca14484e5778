#!/usr/bin/env bash
# Fetch Apache Kafka (broker, tools, Streams, Connect runtime and FileStream connectors) jars and their runtime dependencies from
# Maven Central into $KAFKA_LIB, so run-kafka.sh can start a real Kafka broker
# without a Kafka tarball.
#
#   KAFKA_LIB      target directory for the jars   (default /tmp/kafka-lib)
#   KAFKA_VERSION  Apache Kafka version, 4.x         (default 4.3.1)
#
# Idempotent: if $KAFKA_LIB already holds a complete fetch of the same version
# (marker file .kafka-version), it does nothing.
set -euo pipefail

KAFKA_LIB="${KAFKA_LIB:-/tmp/kafka-lib}"
KAFKA_VERSION="${KAFKA_VERSION:-4.3.1}"
SCALA_VERSION="${SCALA_VERSION:-2.13}"
LOG4J_VERSION="${LOG4J_VERSION:-2.25.4}"
SLF4J_VERSION="${SLF4J_VERSION:-2.0.17}"
MVN_TIMEOUT="${MVN_TIMEOUT:-600}"

marker="$KAFKA_LIB/.kafka-version"
if [[ -f "$marker" && "$(cat "$marker")" == "$KAFKA_VERSION" ]] \
   && ls "$KAFKA_LIB"/kafka_"$SCALA_VERSION"-"$KAFKA_VERSION".jar >/dev/null 2>&1 \
   && ls "$KAFKA_LIB"/connect-file-"$KAFKA_VERSION".jar >/dev/null 2>&1 \
   && ls "$KAFKA_LIB"/kafka-streams-"$KAFKA_VERSION".jar >/dev/null 2>&1; then
  echo "Kafka $KAFKA_VERSION jars already in $KAFKA_LIB"
  exit 0
fi

command -v mvn >/dev/null || { echo "mvn not found" >&2; exit 1; }

work="$(mktemp -d /tmp/kafka-fetch.XXXXXX)"
trap 'rm -rf "$work"' EXIT

cat > "$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>laminar.bench</groupId>
  <artifactId>kafka-lib</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_${SCALA_VERSION}</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <!-- Kafka Connect's distributed worker and the FileStream connectors (issue 11's
         Connect round trip). -->
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>connect-runtime</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>connect-file</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <!-- Kafka Streams (issue 13's exactly-once word count). -->
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-streams</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <!-- Kafka 4.x logs through slf4j + log4j2. Its poms pull slf4j-api 1.7,
         which cannot see an slf4j2 binding, so pin slf4j-api 2.x and add the
         log4j2 binding (log4j-core matches what kafka-server declares). -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-api</artifactId>
      <version>${SLF4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-api</artifactId>
      <version>${LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j2-impl</artifactId>
      <version>${LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>${LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
POM

echo "Fetching Apache Kafka $KAFKA_VERSION jars into $KAFKA_LIB ..."
# Copy into a staging dir first, then swap, so a failed or older fetch never
# leaves a mix of versions on the classpath.
(cd "$work" && timeout "$MVN_TIMEOUT" mvn -B -q \
   dependency:copy-dependencies \
   -DincludeScope=runtime \
   -DoutputDirectory="$work/lib")
mkdir -p "$KAFKA_LIB"
rm -f "$marker" "$KAFKA_LIB"/*.jar
mv "$work"/lib/*.jar "$KAFKA_LIB"/
echo "$KAFKA_VERSION" > "$marker"
echo "Done: $(ls "$KAFKA_LIB"/*.jar | wc -l) jars in $KAFKA_LIB"
