// MBeans shaped like those of prometheus/jmx_exporter's own collector
// tests (its reference cases for rules files): names with properties in
// registration order and dashes, composite and tabular data (single,
// nested and composite index keys), dates, enums, booleans, floats, arrays,
// nulls, colliding names, and a dynamic MBean with dashes in attribute
// names; and MBeans like Kafka's, Tomcat's and Cassandra's for the rules
// files in tests/exporter/. Registered only with --exporter-mbeans
// (tests/prometheus.rs).

import java.lang.management.ManagementFactory;
import java.util.Date;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.AttributeNotFoundException;
import javax.management.DynamicMBean;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import javax.management.openmbean.CompositeData;
import javax.management.openmbean.CompositeDataSupport;
import javax.management.openmbean.CompositeType;
import javax.management.openmbean.OpenType;
import javax.management.openmbean.SimpleType;
import javax.management.openmbean.TabularData;
import javax.management.openmbean.TabularDataSupport;
import javax.management.openmbean.TabularType;

public class ExporterMBeans {

    public interface HadoopActivityMBean {
        int getreplaceBlockOpMinTime();
    }

    public static class HadoopActivity implements HadoopActivityMBean {
        public int getreplaceBlockOpMinTime() { return 200; }
    }

    /** An MXBean: the nested map becomes tabular data of tabular data. */
    public interface HadoopDataNodeMXBean {
        Map<String, Map<String, Long>> getDatanodeNetworkCounts();
    }

    public static class HadoopDataNode implements HadoopDataNodeMXBean {
        public Map<String, Map<String, Long>> getDatanodeNetworkCounts() {
            Map<String, Long> inner = new HashMap<>();
            inner.put("networkErrors", 338L);
            Map<String, Map<String, Long>> outer = new HashMap<>();
            outer.put("1.2.3.4", inner);
            return outer;
        }
    }

    public interface ActiveCountMBean {
        int getActiveCount();
    }

    public static class ActiveCount implements ActiveCountMBean {
        public int getActiveCount() { return 100; }
    }

    public interface FloatValueMBean {
        float getValue();
    }

    public static class FloatValue implements FloatValueMBean {
        public float getValue() { return 0.2f; }
    }

    public interface FailureTimeMBean {
        Date getLastExchangeFailureTimestamp();
    }

    public static class FailureTime implements FailureTimeMBean {
        public Date getLastExchangeFailureTimestamp() { return new Date(1573285945111L); }
    }

    public interface BoolMBean {
        boolean getTrue();
        boolean getFalse();
    }

    public static class Bool implements BoolMBean {
        public boolean getTrue() { return true; }
        public boolean getFalse() { return false; }
    }

    public enum State { RUNNING, STOPPED }

    public interface StateMetricsMBean {
        State getState();
    }

    public static class StateMetrics implements StateMetricsMBean {
        public State getState() { return State.RUNNING; }
    }

    public interface RequestCountMBean {
        int getRequestCount();
    }

    public static class RequestCount implements RequestCountMBean {
        public int getRequestCount() { return 1; }
    }

    public interface TotalMBean {
        int getTotal();
    }

    public static class Total implements TotalMBean {
        public int getTotal() { return 345; }
    }

    public interface CustomValueMBean {
        Integer getValue();
        String getText();
    }

    public static class CustomValue implements CustomValueMBean {
        public Integer getValue() { return 345; }
        public String getText() { return "value"; }
    }

    public interface PerformanceMBean {
        CompositeData getPerformanceMetrics();
    }

    public static class Performance implements PerformanceMBean {
        public CompositeData getPerformanceMetrics() {
            try {
                String[] names = {"ActiveSessions", "Bootstraps", "BootstrapsDeferred"};
                OpenType<?>[] types = {SimpleType.LONG, SimpleType.LONG, SimpleType.LONG};
                CompositeType type = new CompositeType(
                        "PerformanceMetrics", "Example composite data", names, names, types);
                Map<String, Object> data = new LinkedHashMap<>();
                data.put("ActiveSessions", 2L);
                data.put("Bootstraps", 4L);
                data.put("BootstrapsDeferred", 6L);
                return new CompositeDataSupport(type, data);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }

    /** Tabular data keyed by a composite index (an MXBean map's key class). */
    public interface ProcessReportMXBean {
        Map<QueryKey, RunningQuery> getRunningQueries();
    }

    public static class QueryKey implements Comparable<QueryKey> {
        private final int id;
        private final String path;
        public QueryKey(int id, String path) { this.id = id; this.path = path; }
        public int getId() { return id; }
        public String getPath() { return path; }
        @Override public boolean equals(Object o) {
            return o instanceof QueryKey && ((QueryKey) o).id == id && ((QueryKey) o).path.equals(path);
        }
        @Override public int hashCode() { return 31 * id + path.hashCode(); }
        @Override public int compareTo(QueryKey other) { return path.compareTo(other.path); }
    }

    public static class RunningQuery {
        private final int id;
        private final String path;
        public RunningQuery(int id, String path) { this.id = id; this.path = path; }
        public int getId() { return id; }
        public String getPath() { return path; }
        public long getStartedAtTime() { return 1700000000000L + id; }
        public long getElapsedTime() { return 1000L * id; }
    }

    public static class ProcessReport implements ProcessReportMXBean {
        public Map<QueryKey, RunningQuery> getRunningQueries() {
            Map<QueryKey, RunningQuery> queries = new TreeMap<>();
            for (int id = 1; id <= 2; id++) {
                String path = "/db/query" + id + ".xq";
                queries.put(new QueryKey(id, path), new RunningQuery(id, path));
            }
            return queries;
        }
    }

    /** Tabular data with one simple index column and several value columns. */
    public interface PoolsMBean {
        TabularData getPools();
        Map<String, Long> getPlainMap();
    }

    public static class Pools implements PoolsMBean {
        public TabularData getPools() {
            try {
                String[] names = {"pool", "active", "idle"};
                OpenType<?>[] types = {SimpleType.STRING, SimpleType.INTEGER, SimpleType.INTEGER};
                CompositeType row = new CompositeType("Pool", "a pool", names, names, types);
                TabularDataSupport table = new TabularDataSupport(
                        new TabularType("Pools", "pools by name", row, new String[] {"pool"}));
                table.put(new CompositeDataSupport(row, names, new Object[] {"db", 3, 5}));
                table.put(new CompositeDataSupport(row, names, new Object[] {"cache", 1, 7}));
                return table;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
        /** Not an open type: jmx_exporter exports nothing of it. */
        public Map<String, Long> getPlainMap() {
            Map<String, Long> m = new HashMap<>();
            m.put("a", 1L);
            return m;
        }
    }

    public interface ArrayValueMBean {
        int[] getScores();
    }

    public static class ArrayValue implements ArrayValueMBean {
        public int[] getScores() { return new int[] {1, 2, 3}; }
    }

    public interface NullValueMBean {
        Object getNullValue();
    }

    public static class NullValue implements NullValueMBean {
        public Object getNullValue() { return null; }
    }

    /** Five properties, dashes in their names and values, in this order. */
    public interface FiveMBean {
        long getBytesIn();
        double getRatio();
        double getHuge();
    }

    public static class Five implements FiveMBean {
        public long getBytesIn() { return 9007199254740993L; }
        public double getRatio() { return 1.0; }
        public double getHuge() { return 1.0E7; }
    }

    /** A dynamic MBean whose attribute names have dashes (Kafka's clients). */
    public static class KafkaClient implements DynamicMBean {
        public Object getAttribute(String attribute) throws AttributeNotFoundException {
            switch (attribute) {
                case "request-rate": return 2.0;
                case "request-total": return 123.0;
                default: throw new AttributeNotFoundException("Unknown attribute: " + attribute);
            }
        }
        public void setAttribute(Attribute attribute) throws AttributeNotFoundException {
            throw new AttributeNotFoundException("No attributes are writable");
        }
        public AttributeList getAttributes(String[] attributes) {
            AttributeList result = new AttributeList();
            for (String a : attributes) {
                try {
                    result.add(new Attribute(a, getAttribute(a)));
                } catch (Exception e) {
                    // left out, as an MBean server would
                }
            }
            return result;
        }
        public AttributeList setAttributes(AttributeList attributes) { return new AttributeList(); }
        public Object invoke(String action, Object[] params, String[] signature) {
            throw new UnsupportedOperationException("no operations");
        }
        public MBeanInfo getMBeanInfo() {
            return new MBeanInfo(getClass().getName(), "Kafka client", new MBeanAttributeInfo[] {
                new MBeanAttributeInfo("request-rate", "double", "Request rate", true, false, false),
                new MBeanAttributeInfo("request-total", "double", "Request total", true, false, false),
            }, null, null, null);
        }
    }

    /**
     * A dynamic MBean serving fixed attributes (names with dashes allowed),
     * typed by their Java values: the product-like MBeans of the rules
     * files in tests/exporter/.
     */
    public static class Fixed implements DynamicMBean {
        private final Map<String, Object> attributes;

        Fixed(Object... namesAndValues) {
            attributes = new LinkedHashMap<>();
            for (int i = 0; i + 1 < namesAndValues.length; i += 2) {
                attributes.put((String) namesAndValues[i], namesAndValues[i + 1]);
            }
        }
        public Object getAttribute(String attribute) throws AttributeNotFoundException {
            if (!attributes.containsKey(attribute)) {
                throw new AttributeNotFoundException(attribute);
            }
            return attributes.get(attribute);
        }
        public void setAttribute(Attribute attribute) throws AttributeNotFoundException {
            throw new AttributeNotFoundException("read-only");
        }
        public AttributeList getAttributes(String[] names) {
            AttributeList result = new AttributeList();
            for (String n : names) {
                if (attributes.containsKey(n)) {
                    result.add(new Attribute(n, attributes.get(n)));
                }
            }
            return result;
        }
        public AttributeList setAttributes(AttributeList list) { return new AttributeList(); }
        public Object invoke(String action, Object[] params, String[] signature) {
            throw new UnsupportedOperationException("no operations");
        }
        public MBeanInfo getMBeanInfo() {
            MBeanAttributeInfo[] infos = attributes.entrySet().stream()
                    .map(e -> new MBeanAttributeInfo(e.getKey(), e.getValue().getClass().getName(),
                            "The " + e.getKey() + " of this MBean", true, false, false))
                    .toArray(MBeanAttributeInfo[]::new);
            return new MBeanInfo(getClass().getName(), "fixed values", infos, null, null, null);
        }
    }

    static void registerProducts(MBeanServer mbs) throws Exception {
        // Kafka-like: yammer meters and gauges, app-info strings.
        mbs.registerMBean(new Fixed("Count", 1200L, "OneMinuteRate", 12.5, "MeanRate", 10.25),
                new ObjectName("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders"));
        mbs.registerMBean(new Fixed("Count", 5000L, "OneMinuteRate", 40.0, "MeanRate", 38.5),
                new ObjectName("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec"));
        mbs.registerMBean(new Fixed("Value", 2),
                new ObjectName("kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"));
        mbs.registerMBean(new Fixed("Value", 1),
                new ObjectName("kafka.controller:type=KafkaController,name=ActiveControllerCount"));
        mbs.registerMBean(new Fixed("version", "3.6.1", "commit-id", "5e3c2b738d253ff5", "start-time-ms", 1700000000000L),
                new ObjectName("kafka.server:type=app-info,client-id=broker-1"));
        // Tomcat-like.
        mbs.registerMBean(new Fixed("requestCount", 321, "bytesSent", 654321L, "errorCount", 4, "processingTime", 9876L, "maxTime", 120L),
                new ObjectName("Catalina:type=GlobalRequestProcessor,name=\"http-nio-8080\""));
        mbs.registerMBean(new Fixed("currentThreadCount", 10, "currentThreadsBusy", 2, "maxThreads", 200),
                new ObjectName("Catalina:type=ThreadPool,name=\"http-nio-8080\""));
        mbs.registerMBean(new Fixed("activeSessions", 3, "sessionCounter", 17L, "rejectedSessions", 0, "expiredSessions", 5L),
                new ObjectName("Catalina:type=Manager,host=localhost,context=/shop"));
        mbs.registerMBean(new Fixed("serverInfo", "Apache Tomcat/10.1.16"), new ObjectName("Catalina:type=Server"));
        // Cassandra-like: latency timers and table gauges.
        mbs.registerMBean(new Fixed("Count", 4200L, "99thPercentile", 1834.5, "OneMinuteRate", 3.75),
                new ObjectName("org.apache.cassandra.metrics:type=ClientRequest,scope=Read,name=Latency"));
        mbs.registerMBean(new Fixed("Count", 900L, "99thPercentile", 2510.25, "OneMinuteRate", 1.5),
                new ObjectName("org.apache.cassandra.metrics:type=ClientRequest,scope=Write,name=Latency"));
        mbs.registerMBean(new Fixed("Value", 123456789L),
                new ObjectName("org.apache.cassandra.metrics:type=Table,keyspace=shop,scope=users,name=LiveDiskSpaceUsed"));
        mbs.registerMBean(new Fixed("Value", 7),
                new ObjectName("org.apache.cassandra.metrics:type=Compaction,name=PendingTasks"));
    }

    static void register() throws Exception {
        MBeanServer mbs = ManagementFactory.getPlatformMBeanServer();
        mbs.registerMBean(new HadoopActivity(),
                new ObjectName("hadoop:service=DataNode,name=DataNodeActivity-ams-hdd001-50010"));
        mbs.registerMBean(new HadoopDataNode(), new ObjectName("Hadoop:name=DataNodeInfo,service=DataNode"));
        mbs.registerMBean(new ActiveCount(), new ObjectName("org.apache.cassandra.concurrent:type=CONSISTENCY-MANAGER"));
        mbs.registerMBean(new FloatValue(), new ObjectName("org.apache.cassandra.metrics:type=Compaction,name=CompletedTasks"));
        mbs.registerMBean(new FailureTime(),
                new ObjectName("org.apache.camel:context=my-camel-context,type=routes,name=\"my-route-name\""));
        mbs.registerMBean(new Bool(), new ObjectName("boolean:Type=Test"));
        mbs.registerMBean(new StateMetrics(), new ObjectName("org.bean.enum:type=StateMetrics"));
        mbs.registerMBean(new RequestCount(), new ObjectName(
                "Catalina:j2eeType=Servlet,WebModule=//localhost/host-manager,name=HTMLHostManager,J2EEApplication=none,J2EEServer=none"));
        mbs.registerMBean(new KafkaClient(),
                new ObjectName("kafka.consumer:type=consumer-node-metrics,client-id=my-app-consumer,node-id=node-1"));
        mbs.registerMBean(new Total(), new ObjectName("io.prometheus.jmx.test:type=Total-Value"));
        mbs.registerMBean(new Total(), new ObjectName("io.prometheus.jmx.test:type=Total.Value"));
        mbs.registerMBean(new CustomValue(), new ObjectName("io.prometheus.jmx:type=customValue"));
        mbs.registerMBean(new Performance(), new ObjectName("io.prometheus.jmx.test:name=PerformanceMetricsMBean"));
        mbs.registerMBean(new ProcessReport(), new ObjectName("org.exist.management.exist:type=ProcessReport"));
        mbs.registerMBean(new Pools(), new ObjectName("jmxgate.exporter:type=Pools"));
        mbs.registerMBean(new ArrayValue(), new ObjectName("io.prometheus.jmx.test:type=arrayValue"));
        mbs.registerMBean(new NullValue(), new ObjectName("io.prometheus.jmx.test:type=nullValue"));
        mbs.registerMBean(new Five(),
                new ObjectName("jmxgate.exporter:type=Five,zone=eu-west-1,rack-id=r7,host=db-2,shard=3"));
        registerProducts(mbs);
    }
}
