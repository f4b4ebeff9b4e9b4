// Jolokia's JSR-160 connector (jolokia-client-jmx-adapter 2.6.0, standalone)
// through jmxgate, checked against the same connector pointed at the agent itself.
//
//   java -cp jolokia-client-jmx-adapter-2.6.0.jar ConnectorCheck.java
//
// Environment: as ClientCheck.java (JMXGATE_URL, JMXGATE_HTTPS_URL, JMXGATE_USER,
// JMXGATE_PASSWORD, JMXGATE_TARGET, JMXGATE_AGENT_URL, JMXGATE_CA_FILE,
// JMXGATE_CLIENT_CERT, JMXGATE_CLIENT_KEY).
//
// The gateway is reached as service:jmx:jolokia://127.0.0.1:PORT/jolokia/targets/NAME
// with JMXConnector.CREDENTIALS, as jolokia+http://, and as jolokia+https:// with the
// test CA and a client certificate. The role's policy denies exec reset on
// jmxgate.test:type=Operations and the attribute Double of jmxgate.test:type=Types,
// and hides jmxgate.test:type=Counter. One line per check ("ok NAME: detail" or
// "FAIL NAME: reason"), then "SUMMARY passed=N failed=M"; exit status 1 if any failed.
// Every check has 60 s: a hang is a failure.

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.lang.management.RuntimeMXBean;
import java.net.URI;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.JMX;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanInfo;
import javax.management.MBeanOperationInfo;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class ConnectorCheck {

    static final ObjectName TYPES = name("jmxgate.test:type=Types");
    static final ObjectName OPS = name("jmxgate.test:type=Operations");
    static final ObjectName COUNTER = name("jmxgate.test:type=Counter");
    static final ObjectName MISSING = name("jmxgate.test:type=Missing");
    static final ObjectName RBAC = name("hawtio:type=security,area=jmx,name=JmxgateRBAC");
    /** Whether the agent speaks protocol 8 (Jolokia 2.x). */
    static boolean v2;

    interface Check {
        String run() throws Exception;
    }

    static int passed = 0;
    static int failed = 0;
    static final ExecutorService EXECUTOR = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r);
        t.setDaemon(true);
        return t;
    });

    static void check(String name, Check check) {
        Future<String> f = EXECUTOR.submit(check::run);
        try {
            String detail = f.get(60, TimeUnit.SECONDS);
            passed++;
            System.out.println("ok " + name + (detail == null ? "" : ": " + detail));
        } catch (TimeoutException e) {
            failed++;
            f.cancel(true);
            System.out.println("FAIL " + name + ": no answer within 60 s");
        } catch (Throwable e) {
            failed++;
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            System.out.println("FAIL " + name + ": " + cause);
            cause.printStackTrace(System.err);
        }
        System.out.flush();
    }

    static ObjectName name(String n) {
        try {
            return new ObjectName(n);
        } catch (Exception e) {
            throw new IllegalArgumentException(e);
        }
    }

    static void expect(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }

    static void same(Object gateway, Object agent, String what) {
        if (!Objects.deepEquals(gateway, agent)) {
            throw new AssertionError(what + ": gateway gave " + show(gateway) + ", agent gave " + show(agent));
        }
    }

    static String show(Object o) {
        if (o instanceof Object[] a) {
            return Arrays.deepToString(a);
        }
        return String.valueOf(o);
    }

    static String env(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalStateException(name + " is not set");
        }
        return v;
    }

    /** The exception and its causes, as a JMX tool would show them. */
    static String chain(Throwable e) {
        List<String> parts = new ArrayList<>();
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            parts.add(t.getClass().getName() + ": " + t.getMessage());
        }
        return String.join(" <- ", parts);
    }

    static TreeSet<String> canonical(Set<ObjectName> names) {
        TreeSet<String> s = new TreeSet<>();
        for (ObjectName n : names) {
            s.add(n.getCanonicalName());
        }
        return s;
    }

    static TreeSet<String> operations(MBeanInfo info) {
        TreeSet<String> s = new TreeSet<>();
        for (MBeanOperationInfo op : info.getOperations()) {
            StringBuilder b = new StringBuilder(op.getName()).append('(');
            for (int i = 0; i < op.getSignature().length; i++) {
                b.append(i > 0 ? "," : "").append(op.getSignature()[i].getType());
            }
            s.add(b.append(")->").append(op.getReturnType()).toString());
        }
        return s;
    }

    static TreeSet<String> attributes(MBeanInfo info) {
        TreeSet<String> s = new TreeSet<>();
        for (MBeanAttributeInfo a : info.getAttributes()) {
            s.add(a.getName() + ":" + a.getType() + (a.isWritable() ? ":rw" : ":r"));
        }
        return s;
    }

    static Map<String, Object> asMap(AttributeList list) {
        Map<String, Object> m = new HashMap<>();
        for (Attribute a : list.asList()) {
            m.put(a.getName(), a.getValue());
        }
        return m;
    }

    static JMXConnector connect(String url, Map<String, ?> env) throws IOException {
        return JMXConnectorFactory.connect(new JMXServiceURL(url), env);
    }

    public static void main(String[] args) throws Exception {
        URI gatewayUrl = URI.create(env("JMXGATE_URL"));
        URI httpsUrl = URI.create(env("JMXGATE_HTTPS_URL"));
        URI agentUrl = URI.create(env("JMXGATE_AGENT_URL"));
        String user = env("JMXGATE_USER");
        String password = env("JMXGATE_PASSWORD");
        String target = env("JMXGATE_TARGET");

        String direct = "service:jmx:jolokia://" + agentUrl.getHost() + ":" + agentUrl.getPort() + agentUrl.getPath();
        String virtual = "service:jmx:jolokia://" + gatewayUrl.getHost() + ":" + gatewayUrl.getPort()
            + "/jolokia/targets/" + target;
        Map<String, Object> credentials = Map.of(JMXConnector.CREDENTIALS, new String[] {user, password});

        try (org.jolokia.client.JolokiaClient plain = new org.jolokia.client.JolokiaClientBuilder().url(agentUrl).build()) {
            org.jolokia.client.response.JolokiaVersionResponse version = plain.execute(new org.jolokia.client.request.JolokiaVersionRequest());
            v2 = version.getProtocolVersion().startsWith("8");
            System.out.println("agent: Jolokia " + version.getAgentVersion() + ", protocol " + version.getProtocolVersion());
        }
        MBeanServerConnection agent = connect(direct, Map.of()).getMBeanServerConnection();
        System.out.println("agent " + direct + "; gateway " + virtual);
        MBeanServerConnection gw = connect(virtual, credentials).getMBeanServerConnection();

        check("jolokia getMBeanCount", () -> {
            // MBeans may come and go in the agent's JVM: compare a few times
            String last = null;
            for (int attempt = 0; attempt < 3; attempt++) {
                TreeSet<String> expected = canonical(agent.queryNames(null, null));
                expect(expected.remove(COUNTER.getCanonicalName()), "the agent has " + COUNTER);
                int count = gw.getMBeanCount();
                TreeSet<String> seen = canonical(gw.queryNames(null, null));
                if (seen.equals(expected) && count == expected.size()) {
                    return count + " MBeans: the agent's but the hidden " + COUNTER;
                }
                TreeSet<String> missing = new TreeSet<>(expected);
                missing.removeAll(seen);
                TreeSet<String> extra = new TreeSet<>(seen);
                extra.removeAll(expected);
                last = "count " + count + ", expected " + expected.size() + "; missing " + missing + ", extra " + extra;
                Thread.sleep(200);
            }
            throw new AssertionError(last);
        });

        check("jolokia queryNames", () -> {
            ObjectName pattern = name("jmxgate.test:type=Pattern,*");
            TreeSet<String> g = canonical(gw.queryNames(pattern, null));
            same(g, canonical(agent.queryNames(pattern, null)), "queryNames " + pattern);
            expect(g.size() == 2, "two MBeans: " + g);
            ObjectName domain = name("jmxgate.test:*");
            TreeSet<String> expected = canonical(agent.queryNames(domain, null));
            expected.remove(COUNTER.getCanonicalName());
            same(canonical(gw.queryNames(domain, null)), expected, "queryNames " + domain);
            return g + "; " + expected.size() + " in jmxgate.test";
        });

        check("jolokia getAttribute", () -> {
            List<String> seen = new ArrayList<>();
            for (String a : List.of("Name", "LongMax", "Int", "Flag", "StringArray", "Composite", "Map")) {
                Object v = gw.getAttribute(TYPES, a);
                same(v, agent.getAttribute(TYPES, a), a);
                seen.add(a + "=" + show(v) + (v == null ? "" : " (" + v.getClass().getSimpleName() + ")"));
            }
            return String.join(", ", seen);
        });

        check("jolokia getAttributes", () -> {
            String[] names = {"Int", "Name", "Flag"};
            Map<String, Object> g = asMap(gw.getAttributes(TYPES, names));
            same(g, asMap(agent.getAttributes(TYPES, names)), "Int, Name, Flag");
            expect(g.size() == 3, "three attributes: " + g);
            return String.valueOf(g);
        });

        check("jolokia setAttribute", () -> {
            int before = (Integer) agent.getAttribute(TYPES, "Int");
            gw.setAttribute(TYPES, new Attribute("Int", before + 7));
            same(agent.getAttribute(TYPES, "Int"), before + 7, "Int read from the agent after setAttribute");
            same(gw.getAttribute(TYPES, "Int"), before + 7, "Int read through the gateway");
            agent.setAttribute(TYPES, new Attribute("Int", before));
            return "Int " + before + " -> " + (before + 7) + " (restored)";
        });

        check("jolokia invoke", () -> {
            List<String> seen = new ArrayList<>();
            Object[][] calls = {
                {"echo", new Object[] {"jmx"}, new String[] {"java.lang.String"}},
                {"add", new Object[] {2, 3}, new String[] {"int", "int"}},
                {"add", new Object[] {1L, 2L, 3L}, new String[] {"long", "long", "long"}},
                {"add", new Object[] {"J", "MX"}, new String[] {"java.lang.String", "java.lang.String"}},
                {"arrayLength", new Object[] {new String[] {"a", "b"}}, new String[] {"[Ljava.lang.String;"}},
                {"noArgs", null, null},
            };
            for (Object[] c : calls) {
                String op = (String) c[0];
                Object v = gw.invoke(OPS, op, (Object[]) c[1], (String[]) c[2]);
                same(v, agent.invoke(OPS, op, (Object[]) c[1], (String[]) c[2]), op);
                seen.add(op + (c[2] == null ? "()" : Arrays.toString((String[]) c[2])) + "=" + v);
            }
            return String.join(", ", seen);
        });

        check("jolokia getMBeanInfo", () -> {
            MBeanInfo g = gw.getMBeanInfo(OPS);
            MBeanInfo a = agent.getMBeanInfo(OPS);
            same(operations(g), operations(a), "operations of " + OPS);
            same(g.getClassName(), a.getClassName(), "class name");
            same(attributes(gw.getMBeanInfo(TYPES)), attributes(agent.getMBeanInfo(TYPES)), "attributes of " + TYPES);
            return g.getClassName() + " " + operations(g);
        });

        check("jolokia isRegistered", () -> {
            expect(gw.isRegistered(TYPES), TYPES + " is registered");
            expect(!gw.isRegistered(MISSING), MISSING + " is not registered");
            same(gw.isRegistered(TYPES), agent.isRegistered(TYPES), "isRegistered " + TYPES);
            same(gw.isRegistered(MISSING), agent.isRegistered(MISSING), "isRegistered " + MISSING);
            return TYPES + ": true, " + MISSING + ": false";
        });

        check("jolokia MXBean proxy", () -> {
            MemoryMXBean memory = ManagementFactory.newPlatformMXBeanProxy(gw, ManagementFactory.MEMORY_MXBEAN_NAME, MemoryMXBean.class);
            MemoryMXBean directMemory = ManagementFactory.newPlatformMXBeanProxy(agent, ManagementFactory.MEMORY_MXBEAN_NAME, MemoryMXBean.class);
            long max = memory.getHeapMemoryUsage().getMax();
            same(max, directMemory.getHeapMemoryUsage().getMax(), "HeapMemoryUsage.max");
            expect(memory.getHeapMemoryUsage().getUsed() > 0, "heap used > 0");
            same(memory.isVerbose(), directMemory.isVerbose(), "Verbose");
            RuntimeMXBean runtime = JMX.newMXBeanProxy(gw, name(ManagementFactory.RUNTIME_MXBEAN_NAME), RuntimeMXBean.class);
            RuntimeMXBean directRuntime = JMX.newMXBeanProxy(agent, name(ManagementFactory.RUNTIME_MXBEAN_NAME), RuntimeMXBean.class);
            same(runtime.getName(), directRuntime.getName(), "Runtime.Name");
            same(runtime.getVmVendor(), directRuntime.getVmVendor(), "Runtime.VmVendor");
            return "heap max " + max + ", runtime " + runtime.getName() + " (" + runtime.getVmName() + ")";
        });

        check("jolokia denied operation", () -> {
            try {
                gw.invoke(OPS, "reset", null, null);
            } catch (IOException e) {
                throw new AssertionError("a denied operation came back as an I/O failure: " + chain(e));
            } catch (Exception e) {
                String shown = chain(e);
                // the connector sends "reset()"; agents name the operation as sent
                expect(shown.contains("Operation reset() forbidden for MBean " + OPS), "the policy's wording: " + shown);
                return shown;
            }
            throw new AssertionError("reset was invoked through the gateway");
        });

        check("jolokia denied attribute", () -> {
            String wording = "Reading attribute Double is forbidden for MBean " + TYPES;
            String shown;
            try {
                Object v = gw.getAttribute(TYPES, "Double");
                throw new AssertionError("Double was read through the gateway: " + v);
            } catch (IOException e) {
                throw new AssertionError("a denied attribute came back as an I/O failure: " + chain(e));
            } catch (Exception e) {
                shown = chain(e);
                expect(shown.contains(wording), "the policy's wording: " + shown);
            }
            Map<String, Object> a = asMap(agent.getAttributes(TYPES, new String[] {"Int", "Double"}));
            expect(a.containsKey("Double"), "the agent itself gives Double: " + a);
            a.remove("Double");
            if (v2) {
                // protocol 8 marks the error in place: getAttributes leaves the attribute out
                Map<String, Object> g = asMap(gw.getAttributes(TYPES, new String[] {"Int", "Double"}));
                same(g, a, "getAttributes Int, Double");
                return shown + "; getAttributes: " + g;
            }
            // 1.x writes the error in place as a string ("ERROR: ... (class ...)"), which the
            // connector takes for the value and fails to convert: the whole getAttributes fails
            try {
                Object g = gw.getAttributes(TYPES, new String[] {"Int", "Double"});
                throw new AssertionError("getAttributes Int, Double gave " + g);
            } catch (IOException e) {
                throw new AssertionError("a denied attribute came back as an I/O failure: " + chain(e));
            } catch (Exception e) {
                expect(chain(e).contains(wording), "the policy's wording: " + chain(e));
                return shown + "; getAttributes: " + chain(e);
            }
        });

        check("jolokia gateway ACL MBean", () -> {
            // Under roles only a search for ACL MBeans (Hawtio's) shows the
            // gateway's own (README, "Hawtio"); a JMX tool's tree does not.
            expect(!agent.isRegistered(RBAC), RBAC + " is not the agent's");
            expect(!gw.isRegistered(RBAC), RBAC + " is not a node of the tree");
            Set<ObjectName> acl = gw.queryNames(name("*:type=security,area=jmx,*"), null);
            expect(acl.contains(RBAC), "the ACL search finds " + RBAC + ": " + acl);
            return "ACL search: " + acl + "; not registered otherwise";
        });

        check("jolokia hidden MBean", () -> {
            expect(agent.isRegistered(COUNTER), "the agent has " + COUNTER);
            expect(!gw.isRegistered(COUNTER), COUNTER + " is hidden through the gateway");
            expect(!gw.queryNames(name("jmxgate.test:type=Counter,*"), null).contains(COUNTER), "queryNames hides it");
            return COUNTER + " absent from queryNames and isRegistered";
        });

        check("jolokia wrong password", () -> {
            try {
                JMXConnector c = connect(virtual, Map.of(JMXConnector.CREDENTIALS, new String[] {user, password + "-wrong"}));
                c.getMBeanServerConnection().getAttribute(TYPES, "Name");
            } catch (Exception e) {
                String shown = chain(e);
                expect(shown.contains("401"), "the refusal names HTTP 401: " + shown);
                return shown;
            }
            throw new AssertionError("a wrong password was accepted");
        });

        check("jolokia+http getAttribute", () -> {
            String url = virtual.replace("service:jmx:jolokia:", "service:jmx:jolokia+http:");
            MBeanServerConnection c = connect(url, credentials).getMBeanServerConnection();
            Object v = c.getAttribute(TYPES, "Name");
            same(v, agent.getAttribute(TYPES, "Name"), "Name");
            return url + " Name=" + v;
        });

        check("jolokia+https getAttribute", () -> {
            String url = "service:jmx:jolokia+https://" + httpsUrl.getHost() + ":" + httpsUrl.getPort()
                + "/jolokia/targets/" + target;
            Map<String, Object> tls = new HashMap<>();
            tls.put("jolokia.caCertificate", env("JMXGATE_CA_FILE"));
            tls.put("jolokia.clientCertificate", env("JMXGATE_CLIENT_CERT"));
            tls.put("jolokia.clientKey", env("JMXGATE_CLIENT_KEY"));
            tls.put("jolokia.clientKeyAlgorithm", "EC");
            MBeanServerConnection c = connect(url, tls).getMBeanServerConnection();
            Object v = c.getAttribute(TYPES, "Name");
            same(v, agent.getAttribute(TYPES, "Name"), "Name");
            MemoryMXBean memory = ManagementFactory.newPlatformMXBeanProxy(c, ManagementFactory.MEMORY_MXBEAN_NAME, MemoryMXBean.class);
            expect(memory.getHeapMemoryUsage().getUsed() > 0, "heap used > 0");
            return url + " (client certificate) Name=" + v;
        });

        System.out.println("SUMMARY passed=" + passed + " failed=" + failed);
        System.exit(failed == 0 ? 0 : 1);
    }
}
