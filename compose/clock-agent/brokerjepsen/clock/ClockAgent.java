package brokerjepsen.clock;

import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.nio.file.Path;
import java.security.ProtectionDomain;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

/**
 * A node's fake clock for a JVM broker: `-javaagent:clock-agent.jar=FILE`. Every class of Kafka's
 * and ZooKeeper's is rewritten as it loads so that its reads of the time of day
 * (System.currentTimeMillis(), Instant.now()) read SkewedClock instead: true time plus the offset
 * in FILE. The JDK's own classes keep true time (the log lines' timestamps among them), and
 * nanoTime is untouched.
 *
 * <p>Why not libfaketime, as RabbitMQ's nodes: preloaded, it puts every time read of the JVM
 * through the library (a System.currentTimeMillis() call fifteen times slower), and a KRaft
 * quorum of three such JVMs on two cores missed its election timeouts.
 */
public final class ClockAgent {
  private static final String[] REWRITTEN = {"org/apache/kafka/", "kafka/", "org/apache/zookeeper/"};
  private static final String CLOCK = "brokerjepsen/clock/SkewedClock";

  private ClockAgent() {}

  public static void premain(String args, Instrumentation inst) {
    if (args == null || args.isEmpty()) {
      throw new IllegalArgumentException("clock agent: -javaagent:clock-agent.jar=FILE");
    }
    SkewedClock.start(Path.of(args));
    inst.addTransformer(new Rewriter());
    System.err.println("brokerjepsen clock agent: the time of day is offset by " + args);
  }

  static boolean rewrites(String className) {
    if (className == null) {
      return false;
    }
    for (String prefix : REWRITTEN) {
      if (className.startsWith(prefix)) {
        return true;
      }
    }
    return false;
  }

  /** The class's bytes with its time-of-day reads sent to SkewedClock; null when it has none. */
  static byte[] rewrite(byte[] classfile) {
    ClassReader reader = new ClassReader(classfile);
    ClassWriter writer = new ClassWriter(reader, 0);
    boolean[] changed = {false};
    reader.accept(
        new ClassVisitor(Opcodes.ASM9, writer) {
          @Override
          public MethodVisitor visitMethod(
              int access, String name, String descriptor, String signature, String[] exceptions) {
            MethodVisitor inner = super.visitMethod(access, name, descriptor, signature, exceptions);
            return new MethodVisitor(Opcodes.ASM9, inner) {
              @Override
              public void visitMethodInsn(
                  int opcode, String owner, String method, String desc, boolean isInterface) {
                if (opcode == Opcodes.INVOKESTATIC
                    && owner.equals("java/lang/System")
                    && method.equals("currentTimeMillis")
                    && desc.equals("()J")) {
                  changed[0] = true;
                  super.visitMethodInsn(opcode, CLOCK, "currentTimeMillis", desc, false);
                } else if (opcode == Opcodes.INVOKESTATIC
                    && owner.equals("java/time/Instant")
                    && method.equals("now")
                    && desc.equals("()Ljava/time/Instant;")) {
                  changed[0] = true;
                  super.visitMethodInsn(opcode, CLOCK, "instantNow", desc, false);
                } else {
                  super.visitMethodInsn(opcode, owner, method, desc, isInterface);
                }
              }
            };
          }
        },
        0);
    return changed[0] ? writer.toByteArray() : null;
  }

  private static final class Rewriter implements ClassFileTransformer {
    @Override
    public byte[] transform(
        ClassLoader loader,
        String className,
        Class<?> redefined,
        ProtectionDomain domain,
        byte[] classfile) {
      if (!rewrites(className)) {
        return null;
      }
      try {
        return rewrite(classfile);
      } catch (RuntimeException | LinkageError e) {
        // A class ASM cannot read runs as it is, on true time: said, never fatal to the broker.
        System.err.println("brokerjepsen clock agent: " + className + " left on true time: " + e);
        return null;
      }
    }
  }
}
