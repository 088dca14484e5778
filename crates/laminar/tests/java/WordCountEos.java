// Run by crates/laminar/tests/kafka_streams.rs with Java's source launcher:
//   java -cp 'KAFKA_LIB/*' WordCountEos.java BOOTSTRAP IN OUT APP_ID STATE_DIR
// Kafka Streams' word count with processing.guarantee=exactly_once_v2: splits each line of IN
// into words, counts them in a state store (RocksDB, backed by a compacted changelog topic
// written in the same transactions) through a repartition topic, and writes each word's
// running count to OUT. Runs until it is killed; prints its state changes.
import java.util.Arrays;
import java.util.Properties;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class WordCountEos {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // Transactions stay open 2 s, so that the kills land inside them.
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 2000);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // A killed instance's member leaves the group only when its session times out.
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[1])
            .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word)
            .count(Materialized.as("word-counts"))
            .toStream()
            .to(args[2], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> System.out.println("state " + before + " -> " + now));
        streams.start();
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        Thread.currentThread().join();
    }
}
