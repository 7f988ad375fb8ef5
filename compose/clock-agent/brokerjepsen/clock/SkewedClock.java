package brokerjepsen.clock;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;

/**
 * The time of day a node's Kafka (or ZooKeeper) code reads: true time plus the node's offset, read
 * from the harness's clock file ("+3600", "-0.5": seconds, the line compose/clocks.py writes).
 *
 * <p>A daemon thread reads the file every POLL_MS, so a clock step's new offset is seen within that
 * (the harness waits longer before it writes the step's ok). The monotonic clock (nanoTime) stays
 * true: a broker's timeouts measured on it are not what a clock step asks about.
 */
public final class SkewedClock {
  static final long POLL_MS = 100;
  private static volatile long offsetMillis = 0;
  private static volatile Path file;

  private SkewedClock() {}

  /** Reads the file once now (the node starts on the offset it holds), then every POLL_MS. */
  static void start(Path clockFile) {
    file = clockFile;
    reread();
    Thread reader =
        new Thread(
            () -> {
              while (true) {
                try {
                  Thread.sleep(POLL_MS);
                } catch (InterruptedException e) {
                  return;
                }
                reread();
              }
            },
            "brokerjepsen-clock");
    reader.setDaemon(true);
    reader.start();
  }

  /** The file's offset; one it cannot read or parse leaves the last one (a rename is atomic). */
  static void reread() {
    try {
      String line = new String(Files.readAllBytes(file), StandardCharsets.US_ASCII).trim();
      offsetMillis = parseOffsetMillis(line);
    } catch (java.io.IOException | NumberFormatException e) {
      // keep the last offset
    }
  }

  static long parseOffsetMillis(String line) {
    if (line.isEmpty()) {
      throw new NumberFormatException("empty clock file");
    }
    return Math.round(Double.parseDouble(line) * 1000.0);
  }

  public static long currentTimeMillis() {
    return System.currentTimeMillis() + offsetMillis;
  }

  public static Instant instantNow() {
    return Instant.now().plusMillis(offsetMillis);
  }
}
