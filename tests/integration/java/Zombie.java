// A zombie transactional producer, for tests/integration/test_txn_java.py. Run with the Kafka
// client jars on the class path (Java 17 source launch, no build step):
//   java -cp '<kafka jars>/*' Zombie.java BOOTSTRAP TOPIC TRANSACTIONAL_ID
// The first producer opens a transaction and writes "zombie-<i>"; a second producer with the same
// transactional.id then calls initTransactions, which bumps the epoch and aborts the first one's
// transaction. The zombie's commitTransaction must fail with ProducerFencedException; the second
// producer commits "live-<i>". Prints one line per step; exits 0 only when the zombie was fenced.
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringSerializer;

public class Zombie {
    static final int RECORDS = 10;

    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    static void send(KafkaProducer<String, String> producer, String topic, String prefix)
            throws Exception {
        for (int i = 0; i < RECORDS; i++) {
            producer.send(new ProducerRecord<>(topic, 0, prefix + i, prefix + i)).get();
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], txnId = args[2];
        KafkaProducer<String, String> zombie = producer(bootstrap, txnId);
        zombie.beginTransaction();
        send(zombie, topic, "zombie-");
        System.out.println("zombie wrote " + RECORDS);
        KafkaProducer<String, String> live = producer(bootstrap, txnId);
        System.out.println("live initialised");
        boolean fenced = false;
        try {
            zombie.commitTransaction();
            System.out.println("zombie committed");
        } catch (ProducerFencedException e) {
            fenced = true;
            System.out.println("zombie fenced: " + e.getClass().getName());
        } finally {
            zombie.close();
        }
        live.beginTransaction();
        send(live, topic, "live-");
        live.commitTransaction();
        live.close();
        System.out.println("live committed " + RECORDS);
        System.exit(fenced ? 0 : 1);
    }
}
