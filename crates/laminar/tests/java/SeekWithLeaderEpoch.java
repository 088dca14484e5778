// Run by crates/laminar/tests/kafka_tools.rs with Java's source launcher:
//   java -cp 'KAFKA_LIB/*' SeekWithLeaderEpoch.java BOOTSTRAP TOPIC
// The Java consumer validates a position that carries a leader epoch with OffsetForLeaderEpoch
// (KIP-320) before it fetches from it. It prints one line per step for the test to check.
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class SeekWithLeaderEpoch {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        // No reset: a position the broker cannot validate must surface, not be papered over.
        props.put("auto.offset.reset", "none");
        props.put("enable.auto.commit", "false");
        TopicPartition tp = new TopicPartition(args[1], 0);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(tp));

            // Epoch 0 is the partition's only epoch: its end offset is the log end, so the
            // position is valid and fetching starts there.
            consumer.seek(tp, new OffsetAndMetadata(5, Optional.of(0), ""));
            System.out.println("epoch 0: first offset " + firstOffset(consumer));

            // An epoch the broker never had: Kafka answers UNDEFINED_EPOCH_OFFSET, and a
            // consumer without a reset policy reports the log as truncated.
            consumer.seek(tp, new OffsetAndMetadata(5, Optional.of(7), ""));
            try {
                System.out.println("epoch 7: first offset " + firstOffset(consumer));
            } catch (LogTruncationException e) {
                System.out.println("epoch 7: LogTruncationException");
            }
        }
    }

    private static long firstOffset(KafkaConsumer<String, String> consumer) {
        long deadline = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
            for (ConsumerRecord<String, String> r : records) {
                return r.offset();
            }
        }
        return -1;
    }
}
