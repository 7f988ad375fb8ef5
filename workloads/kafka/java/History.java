// The history writer of the harness's Java clients (TransactionalProducer, TransactionalCopier,
// ShareConsumer): one JSON line per event with contract/history.py's fields in its order, each
// line written whole with one write to a file opened for appending, as contract/history.py does.

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Locale;

final class History {
    private final OutputStream out;
    private final String process;

    History(String path, String process) throws IOException {
        this.out = new FileOutputStream(path, true);
        this.process = process;
    }

    /** One event. `value` is JSON text already (or null); `msg_id` is `producer:seq` when both
     *  are known, as HistoryWriter.write makes it. */
    void write(String type, String f, String stream, String producer, Number seq,
               Number partition, Number offset, String error, String value) {
        write(type, f, stream, null, producer, seq, partition, offset, error, value);
    }

    /** One event of a consumer of a group (`group`: the reader group the history records). */
    synchronized void write(String type, String f, String stream, String group, String producer,
                            Number seq, Number partition, Number offset, String error,
                            String value) {
        StringBuilder b = new StringBuilder(256);
        Instant at = Instant.now();
        b.append("{\"time\":").append(String.format(Locale.ROOT, "%d.%06d", at.getEpochSecond(),
                at.getNano() / 1000))
            .append(",\"process\":").append(quote(process))
            .append(",\"type\":").append(quote(type))
            .append(",\"f\":").append(quote(f))
            .append(",\"system\":\"kafka\",\"stream\":").append(quoteOrNull(stream))
            .append(",\"group\":").append(quoteOrNull(group))
            .append(",\"producer\":").append(quoteOrNull(producer))
            .append(",\"seq\":").append(seq)
            .append(",\"msg_id\":").append(
                producer == null || seq == null ? "null" : quote(producer + ":" + seq))
            .append(",\"partition\":").append(partition)
            .append(",\"offset\":").append(offset)
            .append(",\"node\":null,\"error\":").append(quoteOrNull(error))
            .append(",\"value\":").append(value == null ? "null" : value)
            .append(",\"redelivered\":null}\n");
        try {
            out.write(b.toString().getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new RuntimeException("history not written: " + e.getMessage(), e);
        }
    }

    /** Runs `drain` when the harness sends SIGUSR1 (the drain: finish what is left, then
     *  exit); a JVM that keeps that signal for itself gets no drain but its deadline, and
     *  `warn` hears why. */
    static void onDrainSignal(Runnable drain, java.util.function.Consumer<String> warn) {
        try {
            sun.misc.Signal.handle(new sun.misc.Signal("USR1"), signal -> drain.run());
        } catch (IllegalArgumentException e) {
            warn.accept("SIGUSR1 cannot be handled here: " + e.getMessage());
        }
    }

    static String quoteOrNull(String s) {
        return s == null ? "null" : quote(s);
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
