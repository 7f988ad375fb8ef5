// A share consumer (KIP-932) on Kafka's own Java client (the release's KafkaShareConsumer),
// writing the same history as workloads/kafka/share.py: every record a poll returns
// (f: share-acquire, with its delivery count), every acknowledgement as it is made
// (f: share-ack invoke, value.outcome accept, release or reject) and its completion as the
// acknowledgement commit callback reports it (ok confirmed; fail refused, such as an
// InvalidRecordStateException for a lock that had expired; info unknown, or no answer before the
// consumer closed).
//
// Usage: java -cp CLASSPATH ShareConsumer PROPERTIES HISTORY PROCESS TOPIC GROUP DEADLINE DELAY
//        IDLE ACCEPT RELEASE REJECT CLIENT_VERSION
// PROPERTIES holds every client setting (the harness writes it: group.id, max.poll.records,
// share.acknowledgement.mode, ...). DEADLINE is Unix seconds; DELAY the seconds spent on each
// record before it is acknowledged; ACCEPT, RELEASE and REJECT the shares an explicit consumer
// draws its outcomes from (an implicit one accepts every record as its next poll does).
//
// Drain: SIGUSR1 asks the consumer to leave once no record has come for IDLE seconds. Exit 0
// drained, 3 when the deadline came first, 2 when the consumer cannot be constructed.

import java.io.FileReader;
import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.errors.InvalidRecordStateException;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.apache.kafka.common.errors.InvalidShareSessionEpochException;
import org.apache.kafka.common.errors.NotLeaderOrFollowerException;
import org.apache.kafka.common.errors.ShareSessionNotFoundException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ShareConsumer {
    static final Duration POLL = Duration.ofMillis(500);
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);
    static final long ERROR_PAUSE_MS = 500;
    static final int DRAINED = 0;
    static final int NOT_DRAINED = 3;  // workloads.kafka.clients.READER_NOT_CAUGHT_UP
    static final int CANNOT_CONSTRUCT = 2;
    static final String UNANSWERED = "no answer before the consumer closed";

    static volatile boolean draining = false;

    /** One acknowledgement asked and not yet answered. */
    record Ack(String producer, Number seq, String outcome, Short deliveryCount) {
    }

    private final Properties props = new Properties();
    private final History history;
    private final String process;
    private final String topic;
    private final String group;
    private final double deadline;
    private final double delay;
    private final double idle;
    private final double accept;
    private final double release;
    private final String clientVersion;
    private final boolean explicit;
    private final Random rng;
    // By partition, then offset: the acknowledgements without an answer, oldest first (a record
    // acquired again may be acknowledged again before the first answer).
    private final Map<Integer, Map<Long, Deque<Ack>>> pending = new TreeMap<>();
    // Implicit: the last poll's records, accepted by the next poll (or the close).
    private final List<ConsumerRecord<byte[], byte[]>> previous = new ArrayList<>();
    private KafkaShareConsumer<byte[], byte[]> consumer;

    ShareConsumer(String[] a) throws IOException {
        try (FileReader r = new FileReader(a[0], StandardCharsets.UTF_8)) {
            props.load(r);
        }
        process = a[2];
        topic = a[3];
        group = a[4];
        history = new History(a[1], process);
        deadline = Double.parseDouble(a[5]);
        delay = Double.parseDouble(a[6]);
        idle = Double.parseDouble(a[7]);
        accept = Double.parseDouble(a[8]);
        release = Double.parseDouble(a[9]);
        // a[10], reject's share: what accept and release leave
        clientVersion = a[11];
        explicit = "explicit".equals(props.getProperty("share.acknowledgement.mode"));
        rng = new Random(process.hashCode());
    }

    static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    static void warn(String what) {
        System.err.println(java.time.Instant.now() + " ShareConsumer " + what);
    }

    /** Consumes until drained (asked to drain, and no record for IDLE seconds) or the deadline;
     *  whether it drained. */
    boolean run() throws InterruptedException {
        String value = "{\"client\":" + History.quote("kafka-clients " + clientVersion + " (Java)")
            + ",\"share\":{\"acknowledgement\":" + History.quote(explicit ? "explicit" : "implicit")
            + ",\"outcomes\":{\"accept\":" + accept + ",\"release\":" + release + ",\"reject\":"
            + Math.max(0.0, 1.0 - accept - release) + "},\"delay\":" + delay
            + ",\"max_poll_records\":" + props.getProperty("max.poll.records") + "}}";
        history.write("ok", "open", topic, group, null, null, null, null, null, value);
        try {
            consumer = new KafkaShareConsumer<>(props, new ByteArrayDeserializer(),
                new ByteArrayDeserializer());
        } catch (KafkaException e) {  // its settings: no later attempt would do better
            warn("cannot construct the consumer: " + TransactionalProducer.text(e));
            System.exit(CANNOT_CONSTRUCT);
            return false;
        }
        consumer.setAcknowledgementCommitCallback(this::completed);
        double lastRecord = now();
        try {
            consumer.subscribe(List.of(topic));
            while (now() < deadline) {
                List<ConsumerRecord<byte[], byte[]>> got = poll();
                if (!got.isEmpty()) {
                    lastRecord = now();
                    handle(got);
                } else if (draining && now() - lastRecord >= idle) {
                    return true;
                }
            }
            return false;
        } finally {
            close();
        }
    }

    /** One poll, after the implicit acknowledgement of the last poll's records it sends. */
    List<ConsumerRecord<byte[], byte[]>> poll() throws InterruptedException {
        acceptPrevious();
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        try {
            ConsumerRecords<byte[], byte[]> polled = consumer.poll(POLL);
            polled.forEach(got::add);
        } catch (KafkaException | IllegalStateException e) {
            warn("poll: " + TransactionalProducer.text(e));
            Thread.sleep(ERROR_PAUSE_MS);
        }
        return got;
    }

    /** The records of one poll: each acquisition written, then each record processed (its
     *  delay) and acknowledged, an explicit consumer's sent at once by commitAsync. */
    void handle(List<ConsumerRecord<byte[], byte[]>> records) throws InterruptedException {
        for (ConsumerRecord<byte[], byte[]> r : records) {
            Object[] body = TransactionalCopier.decodeBody(r.value());
            String value = "{\"delivery_count\":" + deliveryCount(r) + ",\"client\":\"java\"}";
            history.write("ok", "share-acquire", topic, group, (String) body[0], (Number) body[1],
                r.partition(), r.offset(), null, value);
        }
        for (ConsumerRecord<byte[], byte[]> r : records) {
            if (delay > 0) {
                Thread.sleep((long) (Math.max(0, Math.min(delay, deadline - now())) * 1000));
            }
            if (explicit) {
                acknowledge(r, draw());
            } else {
                previous.add(r);
            }
        }
        if (explicit) {
            try {
                consumer.commitAsync();
            } catch (KafkaException | IllegalStateException e) {  // the next poll or close sends them
                warn("commitAsync: " + TransactionalProducer.text(e));
            }
        }
    }

    String draw() {
        double r = rng.nextDouble();
        if (r < accept) {
            return "accept";
        }
        return r < accept + release ? "release" : "reject";
    }

    void acknowledge(ConsumerRecord<byte[], byte[]> r, String outcome) {
        invoked(r, outcome);
        try {
            consumer.acknowledge(r, AcknowledgeType.valueOf(outcome.toUpperCase(Locale.ROOT)));
        } catch (KafkaException | IllegalStateException e) {  // never sent: the client refused it
            complete(r.partition(), r.offset(), "fail", TransactionalProducer.text(e));
        }
    }

    void acceptPrevious() {
        for (ConsumerRecord<byte[], byte[]> r : previous) {
            invoked(r, "accept");
        }
        previous.clear();
    }

    /** The consumer acknowledged `r`: written before the call that sends it. */
    void invoked(ConsumerRecord<byte[], byte[]> r, String outcome) {
        Object[] body = TransactionalCopier.decodeBody(r.value());
        Short count = deliveryCount(r);
        Ack ack = new Ack((String) body[0], (Number) body[1], outcome, count);
        pending.computeIfAbsent(r.partition(), p -> new TreeMap<>())
            .computeIfAbsent(r.offset(), o -> new ArrayDeque<>()).addLast(ack);
        write("invoke", r.partition(), r.offset(), ack, null);
    }

    /** The acknowledgement commit callback: one partition's offsets and their answer (called on
     *  this thread, from poll, commitAsync or close). */
    void completed(Map<TopicIdPartition, Set<Long>> offsets, Exception exception) {
        String type = completionType(exception);
        String error = exception == null ? null : TransactionalProducer.text(exception);
        for (Map.Entry<TopicIdPartition, Set<Long>> e : offsets.entrySet()) {
            for (long offset : new TreeSet<>(e.getValue())) {
                complete(e.getKey().partition(), offset, type, error);
            }
        }
    }

    /** ok with no error; fail when it is known not applied (the record was not this consumer's
     *  to acknowledge: its lock expired; the broker led no such partition, or refused the request
     *  itself); info for any other error, after which it may have been applied. The same errors
     *  as workloads/kafka/share.py's _REFUSED (tests/workloads/kafka/test_share.py compares). */
    static String completionType(Exception e) {
        if (e == null) {
            return "ok";
        }
        boolean refused = e instanceof InvalidRecordStateException
            || e instanceof NotLeaderOrFollowerException
            || e instanceof UnknownTopicOrPartitionException
            || e instanceof InvalidRequestException
            || e instanceof GroupAuthorizationException
            || e instanceof TopicAuthorizationException
            || e instanceof ShareSessionNotFoundException
            || e instanceof InvalidShareSessionEpochException;
        return refused ? "fail" : "info";
    }

    void complete(int partition, long offset, String type, String error) {
        Map<Long, Deque<Ack>> byOffset = pending.get(partition);
        Deque<Ack> queue = byOffset == null ? null : byOffset.get(offset);
        if (queue == null || queue.isEmpty()) {
            warn("an answer for " + offset + "@" + partition + ", never acknowledged");
            return;
        }
        Ack ack = queue.removeFirst();
        if (queue.isEmpty()) {
            byOffset.remove(offset);
        }
        write(type, partition, offset, ack, error);
    }

    void write(String type, int partition, long offset, Ack ack, String error) {
        String value = "{\"outcome\":" + History.quote(ack.outcome()) + ",\"delivery_count\":"
            + ack.deliveryCount() + "}";
        history.write(type, "share-ack", topic, group, ack.producer(), ack.seq(), partition, offset,
            error, value);
    }

    // ConsumerRecord.deliveryCount(), found when the class loads: every source of the Java client
    // is compiled against each release's kafka-clients, and 3.9's records have none.
    static final Method DELIVERY_COUNT = deliveryCountMethod();

    static Method deliveryCountMethod() {
        try {
            return ConsumerRecord.class.getMethod("deliveryCount");
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    /** The record's delivery count as the client gives it, or null when it has none. */
    static Short deliveryCount(ConsumerRecord<byte[], byte[]> r) {
        if (DELIVERY_COUNT == null) {
            return null;
        }
        try {
            return DELIVERY_COUNT.invoke(r) instanceof Optional<?> o && o.orElse(null) instanceof Short s
                ? s : null;
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }

    /** The close commits what is pending and serves the callbacks of what was sent; what is still
     *  unanswered then is unknown. */
    void close() {
        acceptPrevious();
        if (consumer != null) {
            try {
                consumer.close(CLOSE_TIMEOUT);
            } catch (KafkaException | IllegalStateException e) {
                warn("close: " + TransactionalProducer.text(e));
            }
        }
        for (int partition : new TreeSet<>(pending.keySet())) {
            Map<Long, Deque<Ack>> byOffset = pending.get(partition);
            for (long offset : new TreeSet<>(byOffset.keySet())) {
                while (byOffset.containsKey(offset)) {
                    complete(partition, offset, "info", UNANSWERED);
                }
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 12) {
            System.err.println("usage: ShareConsumer PROPERTIES HISTORY PROCESS TOPIC GROUP DEADLINE "
                + "DELAY IDLE ACCEPT RELEASE REJECT CLIENT_VERSION");
            System.exit(CANNOT_CONSTRUCT);
        }
        History.onDrainSignal(() -> draining = true, ShareConsumer::warn);
        boolean drained = new ShareConsumer(args).run();
        System.exit(drained ? DRAINED : NOT_DRAINED);
    }
}
