// Run by crates/laminar/tests/kafka_tools.rs with Java's source launcher:
//   java -cp 'KAFKA_LIB/*' KeylessToCompacted.java BOOTSTRAP TOPIC
// Sends three records in one batch to a compacted topic, the middle one without a key. The
// broker refuses the batch with INVALID_RECORD and names the record at fault (KIP-467), and
// the Java producer fails that record with InvalidRecordException and the broker's message,
// and the others as part of a batch with an invalid record. One line per record.
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public class KeylessToCompacted {
    public static void main(String[] args) throws InterruptedException {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        // One batch for the three records.
        props.put("linger.ms", "500");
        props.put("enable.idempotence", "false");
        props.put("retries", "0");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            sent.add(producer.send(new ProducerRecord<>(args[1], 0, "k0", "v0")));
            sent.add(producer.send(new ProducerRecord<>(args[1], 0, null, "no key")));
            sent.add(producer.send(new ProducerRecord<>(args[1], 0, "k2", "v2")));
            producer.flush();
            for (int i = 0; i < sent.size(); i++) {
                try {
                    RecordMetadata m = sent.get(i).get();
                    System.out.println(i + " appended at " + m.offset());
                } catch (ExecutionException e) {
                    System.out.println(i + " " + e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
                }
            }
        }
    }
}
