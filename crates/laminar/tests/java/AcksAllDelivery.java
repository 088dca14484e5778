// Run by crates/laminar/tests/cluster.rs with Java's source launcher:
//   java -cp 'KAFKA_LIB/*' AcksAllDelivery.java BOOTSTRAP TOPIC PARTITIONS RECORDS RATE_PER_S
// The Java client's idempotent producer at acks=all sends RECORDS values "j-<n>", round robin
// over the partitions, at RATE_PER_S, and prints one line "acked <n> <partition> <offset>" per
// acknowledged record and "failed <n> <error>" per record it gave up on, then "done".
// The test kills leaders meanwhile and checks the topic against these lines.
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class AcksAllDelivery {
    public static void main(String[] args) throws Exception {
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int records = Integer.parseInt(args[3]);
        long ratePerS = Long.parseLong(args[4]);
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("linger.ms", "5");
        props.put("delivery.timeout.ms", "120000");
        props.put("request.timeout.ms", "10000");
        props.put("metadata.max.age.ms", "1000");
        AtomicLong acked = new AtomicLong();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            long start = System.nanoTime();
            for (int n = 0; n < records; n++) {
                long due = start + n * 1_000_000_000L / ratePerS;
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
                final int seq = n;
                producer.send(new ProducerRecord<>(topic, n % partitions, null, "j-" + n), (m, e) -> {
                    synchronized (System.out) {
                        if (e == null) {
                            acked.incrementAndGet();
                            System.out.println("acked " + seq + " " + m.partition() + " " + m.offset());
                        } else {
                            System.out.println("failed " + seq + " " + e);
                        }
                    }
                });
            }
            producer.flush();
        }
        synchronized (System.out) {
            System.out.println("done " + acked.get());
        }
    }
}
