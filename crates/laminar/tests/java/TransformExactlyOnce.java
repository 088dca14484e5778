// Run by crates/laminar/tests/java_transactions.rs with Java's source launcher:
//   java -cp 'KAFKA_LIB/*' TransformExactlyOnce.java BOOTSTRAP IN OUT GROUP TXN_ID TOTAL
// A consume-transform-produce loop, exactly once: reads IN with a read_committed consumer,
// writes "out-" + value to OUT and commits the consumer's offsets in the same transaction
// (sendOffsetsToTransaction), 20 records per transaction, each open for at least 150 ms. When anything fails (the broker
// was killed), it drops its producer and consumer and starts again, as an application does:
// the new producer's initTransactions fences the old one and ends its transaction, and the
// new consumer goes on from the committed offsets. Exits 0 once the committed offsets cover
// all TOTAL input records; prints one line per restart.
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TransformExactlyOnce {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3], txnId = args[4];
        long total = Long.parseLong(args[5]);
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("isolation.level", "read_committed");
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("max.poll.records", "20");
        // A member left behind by a restart (its LeaveGroup lost with the broker) holds the
        // next rebalance until its session times out.
        cp.put("session.timeout.ms", "6000");
        cp.put("heartbeat.interval.ms", "1000");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("transactional.id", txnId);
        pp.put("transaction.timeout.ms", "20000");
        pp.put("delivery.timeout.ms", "20000");
        pp.put("request.timeout.ms", "5000");
        pp.put("max.block.ms", "20000");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        Set<TopicPartition> inputs = new HashSet<>();
        long deadline = System.currentTimeMillis() + 600_000;
        int restarts = 0;
        while (System.currentTimeMillis() < deadline) {
            KafkaProducer<String, String> producer = null;
            KafkaConsumer<String, String> consumer = null;
            try {
                producer = new KafkaProducer<>(pp);
                producer.initTransactions();
                consumer = new KafkaConsumer<>(cp);
                consumer.subscribe(List.of(in));
                while (true) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                    if (records.isEmpty()) {
                        inputs.addAll(consumer.assignment());
                        if (committed(consumer, inputs) >= total) {
                            System.out.println("done " + total + " after " + restarts + " restarts");
                            return;
                        }
                        continue;
                    }
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<String, String> r : records) {
                        producer.send(new ProducerRecord<>(out, r.key(), "out-" + r.value()));
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    // Transactions stay open a while, so that the kills land inside them.
                    Thread.sleep(150);
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    producer.commitTransaction();
                }
            } catch (ProducerFencedException e) {
                // Only another instance of this id could fence it: there is none.
                System.out.println("fenced: " + e);
                System.exit(2);
            } catch (KafkaException e) {
                restarts++;
                System.out.println("restart " + restarts + ": " + e.getClass().getSimpleName() + ": " + e.getMessage()
                        + (e.getCause() == null ? "" : " (cause: " + e.getCause() + ")"));
            } finally {
                if (producer != null) producer.close(Duration.ZERO);
                if (consumer != null) consumer.close(Duration.ofSeconds(2));
            }
            Thread.sleep(200);
        }
        System.out.println("not done in time");
        System.exit(1);
    }

    /** The sum of the group's committed offsets on the input partitions: the records done. */
    static long committed(KafkaConsumer<String, String> consumer, Set<TopicPartition> inputs) {
        long sum = 0;
        for (OffsetAndMetadata o : consumer.committed(inputs, Duration.ofSeconds(10)).values()) {
            if (o != null) sum += o.offset();
        }
        return sum;
    }
}
