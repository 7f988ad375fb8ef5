// A transactional producer on Kafka's own Java client (the release's kafka-clients), writing the
// same history as workloads/kafka/transactions.py: on a 4.x cluster whose transaction.version is 2
// it speaks KIP-890's protocol (TV2), which librdkafka does not.
//
// Usage: java -cp CLASSPATH TransactionalProducer PROPERTIES HISTORY PROCESS TOPIC COUNT RATE
//        DEADLINE SIZE ABORT_RATIO CLIENT_VERSION [NOT_BEFORE]
// PROPERTIES holds every producer setting (the harness writes it); DEADLINE is Unix seconds, and
// so is NOT_BEFORE, the time of its first transaction (a producer that starts late; 0 or left
// out: at once). Left out is allowed because the built client lives in a cache every checkout
// of the harness shares, and one from before NOT_BEFORE passes ten arguments.
//
// A record's send ends with its transaction: ok committed (at its delivery's partition and offset),
// fail aborted, info when the commit was asked and its outcome is unknown.
// History.java writes its history; TransactionalCopier.java shares its error helpers.

import java.io.FileReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TransactionalProducer {
    // Must equal contract.history.PLANNED_ABORT: the checker counts these apart from refusals.
    static final String PLANNED_ABORT = "ABORTED: the producer aborted its transaction";

    /** What one transaction sent, as its delivery callbacks come back. */
    static final class Txn {
        final String id;
        final List<Integer> seqs = new ArrayList<>();
        final Map<Integer, long[]> positions = new ConcurrentHashMap<>();
        final Map<Integer, String> errors = new ConcurrentHashMap<>();

        Txn(String id) {
            this.id = id;
        }
    }

    /** A transaction's end: its outcome, error, and whether the producer chose to abort. */
    record End(String outcome, String error, boolean planned) {}

    private final Properties props;
    private final History history;
    private final String process;
    private final String topic;
    private final int count;
    private final double rate;
    private final double deadline;
    private final int size;
    private final double abortRatio;
    private final Random rng;
    private final String clientVersion;
    private final double notBefore;
    private KafkaProducer<byte[], byte[]> producer;
    private List<Integer> partitions = List.of();

    TransactionalProducer(String[] a) throws IOException {
        props = new Properties();
        try (FileReader r = new FileReader(a[0], StandardCharsets.UTF_8)) {
            props.load(r);
        }
        process = a[2];
        topic = a[3];
        history = new History(a[1], process);
        count = Integer.parseInt(a[4]);
        rate = Double.parseDouble(a[5]);
        deadline = Double.parseDouble(a[6]);
        size = Integer.parseInt(a[7]);
        abortRatio = Double.parseDouble(a[8]);
        rng = new Random(process.hashCode());
        clientVersion = a[9];
        notBefore = a.length > 10 ? Double.parseDouble(a[10]) : 0;
    }

    /** An event of this producer's, in its topic (History.java writes it). */
    void write(String type, String f, Integer seq, Integer partition, Long offset, String error,
               String value) {
        history.write(type, f, topic, process, seq, partition, offset, error, value);
    }

    /** The value of the marks of an instance's initTransactions (f: init-txn): invoke when asked,
     *  ok when it returned (the id's epoch is bumped: every earlier instance is fenced), info when
     *  it failed (it may have bumped the epoch all the same). */
    static String initTxnValue(String transactionalId) {
        return "{\"transactional_id\":" + History.quoteOrNull(transactionalId) + "}";
    }

    /** initTransactions on a new instance, between its marks (initTxnValue). */
    static void initialise(KafkaProducer<byte[], byte[]> p, History history, String process,
                           String topic, String transactionalId) {
        String value = initTxnValue(transactionalId);
        history.write("invoke", "init-txn", topic, process, null, null, null, null, value);
        try {
            p.initTransactions();
        } catch (RuntimeException e) {
            history.write("info", "init-txn", topic, process, null, null, null, text(e), value);
            throw e;
        }
        history.write("ok", "init-txn", topic, process, null, null, null, null, value);
    }

    /** The value of the mark that a transaction's commit (EndTxn) is being asked. */
    static String endTxnValue(String txn) {
        return "{\"txn\":" + History.quote(txn) + ",\"commit\":true}";
    }

    static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    /** The exception and its root cause: "Failed to construct kafka producer" says nothing alone. */
    static String text(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String said = e.getClass().getSimpleName() + ": " + e.getMessage();
        return root == e ? said : said + " (" + root.getClass().getSimpleName() + ": " + root.getMessage() + ")";
    }

    /** Fatal: the instance cannot go on (fenced, out of order, not authorised, too old). */
    static boolean fatal(Exception e) {
        return e instanceof ProducerFencedException || e instanceof OutOfOrderSequenceException
            || e instanceof AuthorizationException || e instanceof UnsupportedVersionException;
    }

    void start() {
        try {
            producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
        } catch (KafkaException e) {  // its settings: no later attempt would do better
            System.err.println("cannot construct the producer: " + text(e));
            System.exit(2);
        }
        initialise(producer, history, process, topic, props.getProperty("transactional.id"));
        if (partitions.isEmpty()) {
            List<Integer> found = new ArrayList<>();
            for (PartitionInfo p : producer.partitionsFor(topic)) {
                found.add(p.partition());
            }
            found.sort(null);
            partitions = found;
        }
    }

    void close() {
        if (producer != null) {
            try {
                producer.close(Duration.ZERO);
            } catch (RuntimeException e) {
                // closing a broken instance: nothing to record
            }
            producer = null;
        }
    }

    void run() throws InterruptedException {
        String client = "java kafka-clients " + clientVersion;
        write("ok", "open", null, null, null, null, "{\"client\":" + History.quote(client)
            + ",\"transactional_id\":" + History.quote(props.getProperty("transactional.id")) + "}");
        // A late instance (start_at) inits only then: it fences whichever instance of its
        // transactional id is running, as a replacement started by an operator does.
        long late = (long) ((Math.min(notBefore, deadline) - now()) * 1000);
        if (late > 0) {
            Thread.sleep(late);
        }
        int seq = 0;
        int number = 0;
        double nextAt = now();
        while (seq < count && now() < deadline) {
            if (producer == null) {
                try {
                    start();
                } catch (KafkaException e) {
                    System.err.println("cannot start a transactional producer: " + text(e));
                    close();
                    Thread.sleep(1000);
                    continue;
                }
            }
            number++;
            Txn t = new Txn(process + ":t" + number);
            int n = Math.min(size, count - seq);
            for (int i = 1; i <= n; i++) {
                t.seqs.add(seq + i);
            }
            if (rate > 0) {
                nextAt = Math.max(nextAt, now() - 1.0) + n / rate;
                long wait = (long) ((nextAt - now()) * 1000);
                if (wait > 0) {
                    Thread.sleep(wait);
                }
            }
            End end = one(t);
            seq += t.seqs.size();
            record(t, end);
        }
        close();
    }

    End one(Txn t) {
        write("invoke", "txn", null, null, null, null, "{\"txn\":" + History.quote(t.id) + "}");
        boolean commitAsked = false;
        try {
            producer.beginTransaction();
            for (int seq : t.seqs) {
                write("invoke", "send", seq, null, null, null, "{\"txn\":" + History.quote(t.id) + "}");
                send(t, seq);
            }
            if (rng.nextDouble() < abortRatio) {
                producer.flush();  // written first, then aborted: readers have records to skip
                return abort(t, PLANNED_ABORT, true, false);
            }
            commitAsked = true;
            write("info", "end-txn", null, null, null, null, endTxnValue(t.id));
            while (true) {
                try {
                    producer.commitTransaction();
                    return new End("ok", null, false);
                } catch (TimeoutException e) {
                    if (now() >= deadline) {
                        close();
                        return new End("info", text(e), false);
                    }
                }
            }
        } catch (KafkaException e) {
            if (fatal(e)) {
                close();
                return new End(commitAsked ? "info" : "fail", text(e), false);
            }
            return abort(t, text(e), false, commitAsked);
        }
    }

    void send(Txn t, int seq) {
        int partition = partitions.get(seq % partitions.size());
        byte[] body = ("{\"producer\":" + History.quote(process) + ",\"seq\":" + seq + "}")
            .getBytes(StandardCharsets.UTF_8);
        producer.send(new ProducerRecord<>(topic, partition, null, body), (md, err) -> {
            if (err == null) {
                t.positions.put(seq, new long[] {md.partition(), md.offset()});
            } else {
                t.errors.put(seq, text(err));
            }
        });
    }

    /** A transaction whose commit was never asked can only end aborted; one whose commit was
     *  asked and refused is aborted only if the abort returns. */
    End abort(Txn t, String error, boolean planned, boolean commitAsked) {
        try {
            producer.abortTransaction();
            return new End("fail", error, planned);
        } catch (KafkaException e) {
            close();
            String why = error + "; the abort failed: " + text(e);
            return new End(commitAsked ? "info" : "fail", planned ? PLANNED_ABORT : why, planned);
        }
    }

    void record(Txn t, End end) {
        StringBuilder seqs = new StringBuilder();
        for (int s : t.seqs) {
            seqs.append(seqs.length() == 0 ? "" : ",").append(s);
        }
        String value = "{\"txn\":" + History.quote(t.id) + ",\"seqs\":[" + seqs + "]"
            + (end.planned() ? ",\"planned\":true}" : "}");
        write(end.outcome(), "txn", null, null, null, end.error(), value);
        for (int seq : t.seqs) {
            long[] at = t.positions.get(seq);
            String error = null;
            if (!end.outcome().equals("ok")) {
                error = end.planned() ? PLANNED_ABORT : t.errors.getOrDefault(seq, end.error());
            }
            write(end.outcome(), "send", seq, at == null ? null : (int) at[0],
                at == null ? null : at[1], error, "{\"txn\":" + History.quote(t.id) + "}");
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 10 && args.length != 11) {
            System.err.println("usage: TransactionalProducer PROPERTIES HISTORY PROCESS TOPIC COUNT "
                + "RATE DEADLINE SIZE ABORT_RATIO CLIENT_VERSION [NOT_BEFORE]");
            System.exit(2);
        }
        new TransactionalProducer(args).run();
    }
}
