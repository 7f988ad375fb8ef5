// The exactly-once copier (consume-transform-produce) on Kafka's own Java client (the release's
// kafka-clients), writing the same history as workloads/kafka/copier.py: on a 4.x cluster whose
// transaction.version is 2 its transactions speak KIP-890's protocol (TV2), which librdkafka does
// not.
//
// Usage: java -cp CLASSPATH TransactionalCopier PROPERTIES HISTORY PROCESS INPUT OUTPUT DEADLINE
//        SIZE ABORT_RATIO CLIENT_VERSION
// PROPERTIES holds every client setting (the harness writes it): the producer's prefixed
// `producer.`, the consumer's `consumer.` (its group.id is the copy's group). DEADLINE is Unix
// seconds.
//
// A consumer in the copy's group reads INPUT read_committed; each batch of at most SIZE records is
// copied, key and value unchanged, into the same partition of OUTPUT in one transaction that also
// commits the batch's input offsets (sendOffsetsToTransaction). Each transaction's records are
// written as `f: copy` events of its outcome when it ends: ok committed, fail aborted (the abort
// returned, or the commit was never asked), info when the commit was asked and its outcome is
// unknown. After a transaction that did not commit, the consumer is rewound to the group's
// committed offsets (as Kafka's own TransactionalMessageCopier does), so that a later transaction
// copies those records again.
//
// Drain: SIGUSR1 asks the copier to stop once every assigned partition has been read to its end
// offset (under read_committed, the last stable offset) over every input partition, as the
// group's committed offsets (or its own position) say. Exit 0 drained, 3 when the deadline came first, 2 when a client cannot be constructed.

import java.io.FileReader;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TransactionalCopier {
    static final Duration POLL = Duration.ofMillis(500);
    static final Duration COMMITTED_TIMEOUT = Duration.ofSeconds(10);
    static final Duration OFFSETS_TIMEOUT = Duration.ofSeconds(5);
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(5);
    static final int DRAINED = 0;
    static final int NOT_DRAINED = 3;  // workloads.kafka.clients.READER_NOT_CAUGHT_UP
    static final int CANNOT_CONSTRUCT = 2;

    static volatile boolean draining = false;

    /** What one copier transaction copied, as its delivery callbacks come back. */
    static final class Copy {
        final String id;
        final List<ConsumerRecord<byte[], byte[]>> records;
        final Map<Integer, long[]> positions = new ConcurrentHashMap<>();

        Copy(String id, List<ConsumerRecord<byte[], byte[]>> records) {
            this.id = id;
            this.records = records;
        }
    }

    private final Properties producerProps = new Properties();
    private final Properties consumerProps = new Properties();
    private final History history;
    private final String process;
    private final String input;
    private final String output;
    private final double deadline;
    private final int size;
    private final double abortRatio;
    private final Random rng;
    private final String clientVersion;
    private KafkaProducer<byte[], byte[]> producer;
    private KafkaConsumer<byte[], byte[]> consumer;
    private boolean rewind = false;  // the last transaction did not commit: back to the committed
    private int number = 0;

    TransactionalCopier(String[] a) throws IOException {
        Properties all = new Properties();
        try (FileReader r = new FileReader(a[0], StandardCharsets.UTF_8)) {
            all.load(r);
        }
        for (String key : all.stringPropertyNames()) {
            if (key.startsWith("producer.")) {
                producerProps.setProperty(key.substring("producer.".length()), all.getProperty(key));
            } else if (key.startsWith("consumer.")) {
                consumerProps.setProperty(key.substring("consumer.".length()), all.getProperty(key));
            } else {
                throw new IllegalArgumentException("a property of neither side: " + key);
            }
        }
        process = a[2];
        input = a[3];
        output = a[4];
        history = new History(a[1], process);
        deadline = Double.parseDouble(a[5]);
        size = Integer.parseInt(a[6]);
        abortRatio = Double.parseDouble(a[7]);
        clientVersion = a[8];
        rng = new Random(process.hashCode());
    }

    static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    /** A second before the next attempt, or what is left of the run if less. */
    void pause() throws InterruptedException {
        Thread.sleep((long) Math.max(0, Math.min(1000, (deadline - now()) * 1000)));
    }

    static void warn(String what) {
        System.err.println(java.time.Instant.now() + " TransactionalCopier " + what);
    }

    /** Copies until drained (asked to drain, and nothing left in its partitions) or the
     *  deadline; whether it drained. */
    boolean run() throws InterruptedException {
        String value = "{\"client\":" + History.quote("kafka-clients " + clientVersion + " (Java)")
            + ",\"transactional_id\":" + History.quoteOrNull(producerProps.getProperty("transactional.id"))
            + ",\"copy\":{\"group\":" + History.quoteOrNull(consumerProps.getProperty("group.id"))
            + ",\"input\":" + History.quote(input) + "}}";
        history.write("ok", "open", null, process, null, null, null, null, value);
        try {
            while (now() < deadline) {
                if (!ready()) {
                    pause();
                    continue;
                }
                ConsumerRecords<byte[], byte[]> polled;
                try {
                    polled = consumer.poll(POLL);
                } catch (KafkaException e) {  // its successor starts from the committed offsets
                    warn("the consumer failed: " + TransactionalProducer.text(e));
                    closeConsumer();
                    pause();
                    continue;
                }
                if (!polled.isEmpty()) {
                    List<ConsumerRecord<byte[], byte[]>> all = new ArrayList<>(polled.count());
                    polled.forEach(all::add);
                    for (int i = 0; i < all.size(); i += size) {
                        if (!copy(all.subList(i, Math.min(all.size(), i + size)))) {
                            break;  // what follows is read again from the committed offsets
                        }
                    }
                } else if (draining && drained()) {
                    return true;
                }
            }
            return false;
        } finally {
            closeConsumer();
            closeProducer(Duration.ofSeconds(1));
        }
    }

    /** A producer initialised (fencing an earlier instance of the same id) and a consumer in the
     *  group, rewound if the last transaction did not commit; false while either cannot be had. */
    boolean ready() {
        if (producer == null) {
            KafkaProducer<byte[], byte[]> p;
            try {
                p = new KafkaProducer<>(producerProps, new ByteArraySerializer(), new ByteArraySerializer());
            } catch (KafkaException e) {  // its settings: no later attempt would do better
                warn("cannot construct the producer: " + TransactionalProducer.text(e));
                System.exit(CANNOT_CONSTRUCT);
                return false;
            }
            try {
                TransactionalProducer.initialise(p, history, process, null,
                    producerProps.getProperty("transactional.id"));
                producer = p;
            } catch (KafkaException e) {
                warn("cannot start a transactional producer: " + TransactionalProducer.text(e));
                try {
                    p.close(Duration.ZERO);
                } catch (RuntimeException closing) {
                    // an instance that never started: nothing to record
                }
                return false;
            }
        }
        if (consumer != null && rewind) {
            rewind();
        }
        rewind = false;
        if (consumer == null) {
            try {
                consumer = new KafkaConsumer<>(consumerProps, new ByteArrayDeserializer(),
                    new ByteArrayDeserializer());
            } catch (KafkaException e) {
                warn("cannot construct the consumer: " + TransactionalProducer.text(e));
                System.exit(CANNOT_CONSTRUCT);
                return false;
            }
            consumer.subscribe(List.of(input));
        }
        return true;
    }

    /** Back to the group's committed offsets (a partition with none: its first), as a new member
     *  would start; a consumer that cannot be rewound is closed, its successor starts there. */
    void rewind() {
        try {
            Set<TopicPartition> assigned = consumer.assignment();
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned,
                COMMITTED_TIMEOUT);
            for (TopicPartition tp : assigned) {
                OffsetAndMetadata at = committed.get(tp);
                if (at != null) {
                    consumer.seek(tp, at.offset());
                } else {
                    consumer.seekToBeginning(Collections.singleton(tp));
                }
            }
        } catch (KafkaException e) {
            warn("cannot rewind the consumer, closing it: " + TransactionalProducer.text(e));
            closeConsumer();
        }
    }

    /** The copy is done: every partition of the input copied to its end offset (under
     *  read_committed, the last stable offset), as the group's committed offsets say, or, for a
     *  partition this copier holds, its own position. Judged over every input partition, not
     *  only the assigned ones: a copier must not leave while a partition nobody holds at the
     *  moment is still to copy. */
    boolean drained() {
        try {
            Set<TopicPartition> every = new HashSet<>();
            for (PartitionInfo p : consumer.partitionsFor(input, OFFSETS_TIMEOUT)) {
                every.add(new TopicPartition(input, p.partition()));
            }
            if (every.isEmpty()) {
                return false;
            }
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(every,
                COMMITTED_TIMEOUT);
            Map<TopicPartition, Long> end = consumer.endOffsets(every, OFFSETS_TIMEOUT);
            Set<TopicPartition> assigned = consumer.assignment();
            for (TopicPartition tp : every) {
                OffsetAndMetadata c = committed.get(tp);
                long at = c == null ? -1 : c.offset();
                if (assigned.contains(tp)) {
                    at = Math.max(at, consumer.position(tp, OFFSETS_TIMEOUT));
                }
                Long high = end.get(tp);
                if (high == null || at < high) {
                    return false;
                }
            }
        } catch (KafkaException e) {
            return false;
        }
        return true;
    }

    /** One transaction over `records`; whether it committed. */
    boolean copy(List<ConsumerRecord<byte[], byte[]>> records) {
        number++;
        Copy t = new Copy(process + ":t" + number, records);
        history.write("invoke", "txn", null, process, null, null, null, null,
            "{\"txn\":" + History.quote(t.id) + "}");
        TransactionalProducer.End end = one(t);
        String value = "{\"txn\":" + History.quote(t.id) + ",\"copies\":" + records.size()
            + (end.planned() ? ",\"planned\":true}" : "}");
        history.write(end.outcome(), "txn", null, process, null, null, null, end.error(), value);
        boolean ok = end.outcome().equals("ok");
        String error = ok ? null : end.planned() ? TransactionalProducer.PLANNED_ABORT : end.error();
        for (int i = 0; i < records.size(); i++) {
            ConsumerRecord<byte[], byte[]> r = records.get(i);
            Object[] body = decodeBody(r.value());
            long[] at = t.positions.get(i);
            String source = "{\"txn\":" + History.quote(t.id) + ",\"from\":{\"stream\":"
                + History.quote(r.topic()) + ",\"partition\":" + r.partition() + ",\"offset\":"
                + r.offset() + "}}";
            history.write(end.outcome(), "copy", output, (String) body[0], (Number) body[1],
                at == null ? null : (Number) (int) at[0], at == null ? null : (Number) at[1],
                error, source);
        }
        if (!ok) {
            rewind = true;
        }
        return ok;
    }

    /** Copies one batch in one transaction with its input offsets, and ends it. */
    TransactionalProducer.End one(Copy t) {
        boolean commitAsked = false;
        try {
            producer.beginTransaction();
            for (int i = 0; i < t.records.size(); i++) {
                send(t, i);
            }
            if (rng.nextDouble() < abortRatio) {
                producer.flush();  // written first, then aborted: readers have records to skip
                return abort(TransactionalProducer.PLANNED_ABORT, true, false);
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = consumedOffsets(t.records);
            while (true) {
                try {
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    break;
                } catch (TimeoutException e) {  // may be asked again
                    if (now() >= deadline) {
                        return lostInstance("fail", TransactionalProducer.text(e), false);
                    }
                }
            }
            commitAsked = true;
            history.write("info", "end-txn", null, process, null, null, null, null,
                TransactionalProducer.endTxnValue(t.id));
            while (true) {
                try {
                    producer.commitTransaction();
                    return new TransactionalProducer.End("ok", null, false);
                } catch (TimeoutException e) {
                    if (now() >= deadline) {
                        return lostInstance("info", TransactionalProducer.text(e), false);
                    }
                }
            }
        } catch (KafkaException e) {
            if (TransactionalProducer.fatal(e)) {
                return lostInstance(commitAsked ? "info" : "fail", TransactionalProducer.text(e), false);
            }
            return abort(TransactionalProducer.text(e), false, commitAsked);
        } catch (IllegalStateException e) {  // the instance is in no state to go on
            return lostInstance(commitAsked ? "info" : "fail", TransactionalProducer.text(e), false);
        }
    }

    void send(Copy t, int i) {
        ConsumerRecord<byte[], byte[]> r = t.records.get(i);
        producer.send(new ProducerRecord<>(output, r.partition(), r.key(), r.value()), (md, err) -> {
            if (err == null) {
                t.positions.put(i, new long[] {md.partition(), md.offset()});
            }
        });
    }

    /** The offsets a transaction commits for what it copied: per input partition, the one after
     *  the last record copied. */
    static Map<TopicPartition, OffsetAndMetadata> consumedOffsets(
            List<ConsumerRecord<byte[], byte[]>> records) {
        Map<TopicPartition, Long> after = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            after.merge(new TopicPartition(r.topic(), r.partition()), r.offset() + 1, Math::max);
        }
        Map<TopicPartition, OffsetAndMetadata> out = new LinkedHashMap<>();
        after.forEach((tp, o) -> out.put(tp, new OffsetAndMetadata(o)));
        return out;
    }

    /** As the transactional producer's abort: a transaction whose commit was never asked ends
     *  aborted whatever the abort returns; one whose commit was asked, only if it returns. */
    TransactionalProducer.End abort(String error, boolean planned, boolean commitAsked) {
        String outcome = commitAsked ? "info" : "fail";
        while (true) {
            try {
                producer.abortTransaction();
                return new TransactionalProducer.End("fail", error, planned);
            } catch (TimeoutException e) {  // may be asked again
                if (now() >= deadline) {
                    return lostInstance(outcome, error + "; the abort failed: "
                        + TransactionalProducer.text(e), planned);
                }
            } catch (KafkaException | IllegalStateException e) {
                return lostInstance(outcome, error + "; the abort failed: "
                    + TransactionalProducer.text(e), planned);
            }
        }
    }

    /** The instance can no longer be used: the next transaction's initTransactions, on a new
     *  one, fences it and ends what it left open. */
    TransactionalProducer.End lostInstance(String outcome, String error, boolean planned) {
        warn("transactional producer lost: " + error);
        closeProducer(Duration.ZERO);
        return new TransactionalProducer.End(outcome, error, planned);
    }

    void closeProducer(Duration timeout) {
        if (producer != null) {
            try {
                producer.close(timeout);
            } catch (RuntimeException e) {
                // closing a broken instance: nothing to record
            }
            producer = null;
        }
    }

    void closeConsumer() {
        if (consumer != null) {
            try {
                consumer.close(CLOSE_TIMEOUT);
            } catch (RuntimeException e) {
                warn("closing the consumer: " + TransactionalProducer.text(e));
            }
            consumer = null;
        }
    }

    /** {producer, seq} from a record's body, as contract.history.decode_body: a JSON object
     *  whose `producer` is a string and `seq` an integer; {null, null} for any other body. */
    static Object[] decodeBody(byte[] body) {
        Object[] none = {null, null};
        if (body == null) {
            return none;
        }
        try {
            Json p = new Json(new String(body, StandardCharsets.UTF_8));
            Object v = p.value();
            p.end();
            if (v instanceof Map<?, ?> m && m.get("producer") instanceof String producer
                    && m.get("seq") instanceof Number seq
                    && (seq instanceof Long || seq instanceof BigInteger)) {
                return new Object[] {producer, seq};
            }
        } catch (IllegalArgumentException e) {
            // not JSON: a body the harness did not write
        }
        return none;
    }

    /** Just enough JSON for a record's body: objects, arrays, strings, numbers, literals. */
    static final class Json {
        private final String s;
        private int i = 0;

        Json(String s) {
            this.s = s;
        }

        void end() {
            space();
            if (i != s.length()) {
                throw new IllegalArgumentException("text after the value");
            }
        }

        private void space() {
            while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
        }

        private char peek() {
            if (i >= s.length()) {
                throw new IllegalArgumentException("truncated");
            }
            return s.charAt(i);
        }

        private void expect(char c) {
            if (peek() != c) {
                throw new IllegalArgumentException("expected " + c);
            }
            i++;
        }

        Object value() {
            space();
            char c = peek();
            if (c == '{') {
                i++;
                Map<String, Object> m = new TreeMap<>();
                space();
                if (peek() == '}') {
                    i++;
                    return m;
                }
                while (true) {
                    space();
                    String key = string();
                    space();
                    expect(':');
                    m.put(key, value());  // a repeated key: the last, as Python's json
                    space();
                    if (peek() == ',') {
                        i++;
                    } else {
                        expect('}');
                        return m;
                    }
                }
            }
            if (c == '[') {
                i++;
                List<Object> l = new ArrayList<>();
                space();
                if (peek() == ']') {
                    i++;
                    return l;
                }
                while (true) {
                    l.add(value());
                    space();
                    if (peek() == ',') {
                        i++;
                    } else {
                        expect(']');
                        return l;
                    }
                }
            }
            if (c == '"') {
                return string();
            }
            for (String literal : new String[] {"true", "false", "null"}) {
                if (s.startsWith(literal, i)) {
                    i += literal.length();
                    return literal.equals("null") ? null : Boolean.valueOf(literal);
                }
            }
            return number();
        }

        private String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = peek();
                i++;
                if (c == '"') {
                    return b.toString();
                }
                if (c < 0x20) {
                    throw new IllegalArgumentException("control character in a string");
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = peek();
                i++;
                switch (e) {
                    case '"', '\\', '/' -> b.append(e);
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'n' -> b.append('\n');
                    case 'r' -> b.append('\r');
                    case 't' -> b.append('\t');
                    case 'u' -> {
                        if (i + 4 > s.length()) {
                            throw new IllegalArgumentException("truncated escape");
                        }
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                    }
                    default -> throw new IllegalArgumentException("bad escape");
                }
            }
        }

        private Number number() {
            int start = i;
            if (i < s.length() && s.charAt(i) == '-') {
                i++;
            }
            int digits = i;
            while (i < s.length() && Character.isDigit(s.charAt(i))) {
                i++;
            }
            if (i == digits || (s.charAt(digits) == '0' && i - digits > 1)) {
                throw new IllegalArgumentException("not a number");
            }
            boolean integral = true;
            if (i < s.length() && s.charAt(i) == '.') {
                integral = false;
                i++;
                int fraction = i;
                while (i < s.length() && Character.isDigit(s.charAt(i))) {
                    i++;
                }
                if (i == fraction) {
                    throw new IllegalArgumentException("not a number");
                }
            }
            if (i < s.length() && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
                integral = false;
                i++;
                if (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) {
                    i++;
                }
                int exponent = i;
                while (i < s.length() && Character.isDigit(s.charAt(i))) {
                    i++;
                }
                if (i == exponent) {
                    throw new IllegalArgumentException("not a number");
                }
            }
            String text = s.substring(start, i);
            if (!integral) {
                return Double.valueOf(text);
            }
            BigInteger n = new BigInteger(text);
            return n.bitLength() < 64 ? (Number) n.longValue() : n;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 9) {
            System.err.println("usage: TransactionalCopier PROPERTIES HISTORY PROCESS INPUT OUTPUT "
                + "DEADLINE SIZE ABORT_RATIO CLIENT_VERSION");
            System.exit(CANNOT_CONSTRUCT);
        }
        History.onDrainSignal(() -> draining = true, TransactionalCopier::warn);
        boolean drained = new TransactionalCopier(args).run();
        System.exit(drained ? DRAINED : NOT_DRAINED);
    }
}
