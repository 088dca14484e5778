// Run by crates/laminar/tests/acls.rs with Java's source launcher:
//   java -cp 'KAFKA_LIB/*' AuthorizedOperations.java BOOTSTRAP TOPIC GROUP [USER PASSWORD]
// What the Admin client reports a principal may do (includeAuthorizedOperations): on the
// cluster, on TOPIC and on GROUP, one line each with the operations sorted; then the same
// without asking, which Kafka answers with nothing ("null"). With USER and PASSWORD it
// connects over SASL_PLAINTEXT with PLAIN.
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.common.acl.AclOperation;

public class AuthorizedOperations {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        if (args.length > 4) {
            props.put("security.protocol", "SASL_PLAINTEXT");
            props.put("sasl.mechanism", "PLAIN");
            props.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
                    + args[3] + "\" password=\"" + args[4] + "\";");
        }
        String topic = args[1], group = args[2];
        try (Admin admin = Admin.create(props)) {
            System.out.println("cluster " + sorted(admin.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations().get()));
            System.out.println("topic " + sorted(admin.describeTopics(List.of(topic),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames().get()
                    .get(topic).authorizedOperations()));
            System.out.println("group " + sorted(admin.describeConsumerGroups(List.of(group),
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).all().get()
                    .get(group).authorizedOperations()));
            System.out.println("unasked " + admin.describeCluster().authorizedOperations().get());
        }
    }

    static String sorted(Set<AclOperation> ops) {
        if (ops == null) {
            return "null";
        }
        Set<String> names = new TreeSet<>();
        for (AclOperation op : ops) {
            names.add(op.name());
        }
        return String.join(",", names);
    }
}
