// The test MBeans (domain jmxgate.test) every test agent registers, whichever
// Jolokia runs it: Launcher (1.7.1 in embedded Jetty) and Agent2 (a 2.x JVM
// agent). Plain JMX only, so that it loads without Jolokia or Jetty classes.
// See README.md in this directory for the MBeans.

import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.KeyStoreException;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.InvalidKeySpecException;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.AttributeNotFoundException;
import javax.management.InvalidAttributeValueException;
import javax.management.MBeanException;
import javax.management.MBeanOperationInfo;
import javax.management.MBeanParameterInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import javax.management.ReflectionException;
import javax.management.StandardMBean;
import javax.management.openmbean.CompositeData;
import javax.management.openmbean.CompositeDataSupport;
import javax.management.openmbean.CompositeType;
import javax.management.openmbean.OpenDataException;
import javax.management.openmbean.OpenType;
import javax.management.openmbean.SimpleType;
import javax.management.openmbean.TabularData;
import javax.management.openmbean.TabularDataSupport;
import javax.management.openmbean.TabularType;


public class TestMBeans {

    // ------------------------------------------------------------------
    // Audit counters (jmxgate.test:type=Counter)
    // ------------------------------------------------------------------

    /** Operations invoked on type=Operations + attribute writes on type=Types. */
    static final AtomicLong INVOCATIONS = new AtomicLong();
    /** Attribute reads (getAttribute) on type=Types. */
    static final AtomicLong READS = new AtomicLong();

    public interface CounterMBean {
        long getInvocations();
        long getReads();
        long getSlowReads();
    }

    static final AtomicLong SLOW_READS = new AtomicLong();

    public static class Counter implements CounterMBean {
        public long getInvocations() { return INVOCATIONS.get(); }
        public long getReads() { return READS.get(); }
        /** Takes 300 ms and counts itself: shows whether concurrent reads shared one. */
        public long getSlowReads() {
            try {
                Thread.sleep(300);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return SLOW_READS.incrementAndGet();
        }
    }

    // ------------------------------------------------------------------
    // jmxgate.test:type=Types
    // ------------------------------------------------------------------

    public interface TypesMBean {
        long getLongMax();

        long getCounter();
        void setCounter(long v);

        int getInt();
        void setInt(int v);

        double getDouble();

        boolean getFlag();
        void setFlag(boolean v);

        String getName();
        void setName(String v);

        String getSpecial();

        int[] getIntArray();

        String[] getStringArray();
        void setStringArray(String[] v);

        List<String> getList();
        void setList(List<String> v);

        Map<String, Integer> getMap();
        void setMap(Map<String, Integer> v);

        CompositeData getComposite();

        TabularData getTabular();

        String getNullValue();

        Map<String, Object> getNested();

        Date getDate();

        ObjectName getObjectName();
    }

    public static class Types extends StandardMBean implements TypesMBean {
        private final String initialName;
        private volatile long counter;
        private volatile int intValue;
        private volatile boolean flag;
        private volatile String name;
        private volatile String[] stringArray;
        private volatile List<String> list;
        private volatile Map<String, Integer> map;
        private final CompositeData composite;
        private final TabularData tabular;

        Types(String initialName) throws Exception {
            super(TypesMBean.class);
            this.initialName = initialName;
            reset();
            CompositeType endpoint = new CompositeType(
                    "Endpoint", "host and port",
                    new String[] {"host", "port"},
                    new String[] {"host name", "port number"},
                    new OpenType<?>[] {SimpleType.STRING, SimpleType.INTEGER});
            composite = new CompositeDataSupport(endpoint,
                    new String[] {"host", "port"}, new Object[] {"localhost", 8778});
            CompositeType row = new CompositeType(
                    "Row", "one table row",
                    new String[] {"name", "value"},
                    new String[] {"row key", "row value"},
                    new OpenType<?>[] {SimpleType.STRING, SimpleType.INTEGER});
            TabularType table = new TabularType("Table", "two-row table", row, new String[] {"name"});
            TabularDataSupport t = new TabularDataSupport(table);
            t.put(new CompositeDataSupport(row, new String[] {"name", "value"}, new Object[] {"alpha", 1}));
            t.put(new CompositeDataSupport(row, new String[] {"name", "value"}, new Object[] {"beta", 2}));
            tabular = t;
        }

        /** Restores all writable attributes to their initial values. */
        synchronized void reset() {
            counter = 0L;
            intValue = 42;
            flag = false;
            name = initialName;
            stringArray = new String[] {"a", "b", "c"};
            list = new ArrayList<>(Arrays.asList("x", "y", "z"));
            Map<String, Integer> m = new LinkedHashMap<>();
            m.put("one", 1);
            m.put("two", 2);
            map = m;
        }

        public long getLongMax() { return Long.MAX_VALUE; }
        public long getCounter() { return counter; }
        public void setCounter(long v) { counter = v; }
        public int getInt() { return intValue; }
        public void setInt(int v) { intValue = v; }
        public double getDouble() { return 3.14159; }
        public boolean getFlag() { return flag; }
        public void setFlag(boolean v) { flag = v; }
        public String getName() { return name; }
        public void setName(String v) { name = v; }
        public String getSpecial() {
            return "quote\" backslash\\ slash/ bang! newline\n tab\t unicode \u00e9\u20ac\ud83d\ude00 <tag>&amp;";
        }
        public int[] getIntArray() { return new int[] {1, 2, 3}; }
        public String[] getStringArray() { return stringArray == null ? null : stringArray.clone(); }
        public void setStringArray(String[] v) { stringArray = v == null ? null : v.clone(); }
        public List<String> getList() { return list == null ? null : new ArrayList<>(list); }
        public void setList(List<String> v) { list = v == null ? null : new ArrayList<>(v); }
        public Map<String, Integer> getMap() { return map == null ? null : new LinkedHashMap<>(map); }
        public void setMap(Map<String, Integer> v) { map = v == null ? null : new LinkedHashMap<>(v); }
        public CompositeData getComposite() { return composite; }
        public TabularData getTabular() { return tabular; }
        public String getNullValue() { return null; }
        public Map<String, Object> getNested() {
            Map<String, Object> level2 = new LinkedHashMap<>();
            level2.put("leaf", "deep");
            level2.put("num", 7);
            Map<String, Object> inner = new LinkedHashMap<>();
            inner.put("k", "v");
            Map<String, Object> level1 = new LinkedHashMap<>();
            level1.put("level2", level2);
            level1.put("list", Arrays.<Object>asList("x", "y", inner));
            Map<String, Object> root = new LinkedHashMap<>();
            root.put("level1", level1);
            root.put("slash/key", "slashed");
            root.put("empty", Collections.emptyMap());
            return root;
        }
        public Date getDate() { return new Date(1577934245000L); } // 2020-01-02T03:04:05Z
        public ObjectName getObjectName() {
            try {
                return new ObjectName("jmxgate.test:type=Types");
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }

        // Audit hooks: count reads and writes that really reach the MBean.
        @Override
        public Object getAttribute(String attribute)
                throws AttributeNotFoundException, MBeanException, ReflectionException {
            READS.incrementAndGet();
            return super.getAttribute(attribute);
        }

        @Override
        public AttributeList getAttributes(String[] attributes) {
            AttributeList out = new AttributeList();
            for (String a : attributes) {
                try {
                    out.add(new Attribute(a, getAttribute(a)));
                } catch (Exception e) {
                    // skipped, like the default implementation
                }
            }
            return out;
        }

        @Override
        public void setAttribute(Attribute attribute)
                throws AttributeNotFoundException, InvalidAttributeValueException,
                       MBeanException, ReflectionException {
            INVOCATIONS.incrementAndGet();
            super.setAttribute(attribute);
        }

        @Override
        public AttributeList setAttributes(AttributeList attributes) {
            AttributeList out = new AttributeList();
            for (Attribute a : attributes.asList()) {
                try {
                    setAttribute(a);
                    out.add(new Attribute(a.getName(), getAttribute(a.getName())));
                } catch (Exception e) {
                    // skipped, like the default implementation
                }
            }
            return out;
        }
    }

    // ------------------------------------------------------------------
    // jmxgate.test:type=Operations
    // ------------------------------------------------------------------

    public interface OperationsMBean {
        int add(int a, int b);
        long add(long a, long b, long c);
        String add(String a, String b);
        String echo(String s);
        void fail();
        long sleep(long millis) throws InterruptedException;
        String noArgs();
        int arrayLength(String[] items);
        String repeat(String s, int times);
        void reset();
        /** Registers jmxgate.test:type=Dynamic,name=NAME (changes the MBean list). */
        void register(String name) throws Exception;
        void unregister(String name) throws Exception;
    }

    public static class Operations extends StandardMBean implements OperationsMBean {
        private final Types types;

        Operations(Types types) throws Exception {
            super(OperationsMBean.class);
            this.types = types;
        }

        public int add(int a, int b) { return a + b; }
        public long add(long a, long b, long c) { return a + b + c; }
        public String add(String a, String b) { return a + b; }
        public String echo(String s) { return s; }
        public void fail() { throw new IllegalStateException("deliberate failure"); }
        public long sleep(long millis) throws InterruptedException {
            Thread.sleep(millis);
            return millis;
        }
        public String noArgs() { return "ok"; }
        public int arrayLength(String[] items) { return items == null ? -1 : items.length; }
        public String repeat(String s, int times) {
            StringBuilder sb = new StringBuilder(Math.max(0, s.length() * times));
            for (int i = 0; i < times; i++) {
                sb.append(s);
            }
            return sb.toString();
        }
        public void reset() { types.reset(); }
        public void register(String name) throws Exception {
            ManagementFactory.getPlatformMBeanServer()
                    .registerMBean(new Pattern("dynamic-" + name, 0), dynamicName(name));
        }
        public void unregister(String name) throws Exception {
            ManagementFactory.getPlatformMBeanServer().unregisterMBean(dynamicName(name));
        }
        private static ObjectName dynamicName(String name) throws Exception {
            return new ObjectName("jmxgate.test:type=Dynamic,name=" + name);
        }

        @Override
        public Object invoke(String actionName, Object[] params, String[] signature)
                throws MBeanException, ReflectionException {
            INVOCATIONS.incrementAndGet();
            return super.invoke(actionName, params, signature);
        }

        // Real parameter names in MBeanInfo (visible in Jolokia "list").
        @Override
        protected String getParameterName(MBeanOperationInfo op, MBeanParameterInfo param, int seq) {
            switch (op.getName()) {
                case "add":
                    return new String[] {"a", "b", "c"}[seq];
                case "echo":
                    return "s";
                case "sleep":
                    return "millis";
                case "arrayLength":
                    return "items";
                case "repeat":
                    return seq == 0 ? "s" : "times";
                case "register":
                case "unregister":
                    return "name";
                default:
                    return super.getParameterName(op, param, seq);
            }
        }
    }

    // ------------------------------------------------------------------
    // jmxgate.test:type=Pattern,name=a|b
    // ------------------------------------------------------------------

    public interface PatternMBean {
        String getValue();
        int getLevel();
        void setLevel(int level);
    }

    public static class Pattern implements PatternMBean {
        private final String value;
        private volatile int level;

        Pattern(String value, int level) {
            this.value = value;
            this.level = level;
        }

        public String getValue() { return value; }
        public int getLevel() { return level; }
        public void setLevel(int level) { this.level = level; }
    }

    /** jmxgate.extra:type=Secretive: a write-only attribute next to readable ones. */
    public interface SecretiveMBean {
        String getVisible();
        int getLevel();
        void setPassword(String password);
    }

    public static class Secretive implements SecretiveMBean {
        private volatile String password = "";
        public String getVisible() { return "shown"; }
        public int getLevel() { return password.length(); }
        public void setPassword(String password) { this.password = password == null ? "" : password; }
    }

    /** Exits the JVM (status 0) once stdin reaches EOF: the harness's way to stop an agent. */
    static void exitOnStdinEof() {
        Thread watcher = new Thread(() -> {
            InputStream in = System.in;
            byte[] buf = new byte[256];
            try {
                while (in.read(buf) >= 0) {
                    // discard; only EOF matters
                }
            } catch (Exception e) {
                // treat a broken stdin like EOF
            }
            System.exit(0);
        }, "stdin-eof-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    /** Registers the test MBeans; {@code many} extra Types copies make a large list. */
    static void register(String name, int many) throws Exception {
        MBeanServer mbs = ManagementFactory.getPlatformMBeanServer();
        Types types = new Types(name);
        mbs.registerMBean(types, new ObjectName("jmxgate.test:type=Types"));
        mbs.registerMBean(new Operations(types), new ObjectName("jmxgate.test:type=Operations"));
        mbs.registerMBean(new Counter(), new ObjectName("jmxgate.test:type=Counter"));
        mbs.registerMBean(new Pattern("value-a", 1), new ObjectName("jmxgate.test:type=Pattern,name=a"));
        mbs.registerMBean(new Pattern("value-b", 2), new ObjectName("jmxgate.test:type=Pattern,name=b"));
        mbs.registerMBean(new Secretive(), new ObjectName("jmxgate.extra:type=Secretive"));
        // A large application: its `list` answer runs to megabytes.
        for (int i = 0; i < many; i++) {
            mbs.registerMBean(new Types("component-" + i),
                    new ObjectName("jmxgate.many" + (i % 40) + ":type=Component,name=c" + i));
        }

    }
}
