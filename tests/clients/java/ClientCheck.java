// The Jolokia Java client (org.jolokia.client 2.6.0, JDK HttpClient) through
// jmxgate, checked against the agent's own answers.
//
//   java -cp jolokia-client-java-2.6.0.jar ClientCheck.java
//
// Environment (tests/clients/java_clients.rs sets it):
//   JMXGATE_URL          the gateway's HTTP base, http://127.0.0.1:PORT (Basic auth)
//   JMXGATE_HTTPS_URL    its HTTPS base, https://127.0.0.1:PORT (client certificates)
//   JMXGATE_USER, JMXGATE_PASSWORD
//   JMXGATE_TARGET       the configured target in front of the agent
//   JMXGATE_AGENT_URL    the agent's own URL, asked directly for expected values
//   JMXGATE_CA_FILE, JMXGATE_CLIENT_CERT, JMXGATE_CLIENT_KEY   PEM files (key: PKCS#8)
//
// The role's policy denies exec reset on jmxgate.test:type=Operations and the
// attribute Double of jmxgate.test:type=Types, and hides jmxgate.test:type=Counter
// from list and search. Every check runs by virtual URL, in proxy mode and over
// HTTPS with a client certificate. One line per check ("ok NAME: detail" or
// "FAIL NAME: reason"), then "SUMMARY passed=N failed=M"; exit status 1 if any failed.

import java.io.ByteArrayInputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.TreeSet;

import javax.management.ObjectName;

import org.jolokia.client.JolokiaClient;
import org.jolokia.client.JolokiaClientBuilder;
import org.jolokia.client.JolokiaQueryParameter;
import org.jolokia.client.exception.JolokiaBulkRemoteException;
import org.jolokia.client.exception.JolokiaException;
import org.jolokia.client.exception.JolokiaHttpException;
import org.jolokia.client.exception.JolokiaRemoteException;
import org.jolokia.client.request.HttpMethod;
import org.jolokia.client.request.JolokiaExecRequest;
import org.jolokia.client.request.JolokiaListRequest;
import org.jolokia.client.request.JolokiaReadRequest;
import org.jolokia.client.request.JolokiaRequest;
import org.jolokia.client.request.JolokiaSearchRequest;
import org.jolokia.client.request.JolokiaVersionRequest;
import org.jolokia.client.request.JolokiaWriteRequest;
import org.jolokia.client.response.JolokiaExecResponse;
import org.jolokia.client.response.JolokiaReadResponse;
import org.jolokia.client.response.JolokiaResponse;
import org.jolokia.client.response.JolokiaVersionResponse;
import org.jolokia.client.response.ValidatingResponseExtractor;

public class ClientCheck {

    static final String TYPES = "jmxgate.test:type=Types";
    static final String OPS = "jmxgate.test:type=Operations";
    static final String COUNTER = "jmxgate.test:type=Counter";
    static final String MISSING = "jmxgate.test:type=Missing";

    interface Check {
        String run() throws Exception;
    }

    static int passed = 0;
    static int failed = 0;

    static void check(String name, Check check) {
        try {
            String detail = check.run();
            passed++;
            System.out.println("ok " + name + (detail == null ? "" : ": " + detail));
        } catch (Throwable e) {
            failed++;
            System.out.println("FAIL " + name + ": " + e);
            e.printStackTrace(System.err);
        }
        System.out.flush();
    }

    static void expect(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }

    static void same(Object gateway, Object agent, String what) {
        if (!Objects.equals(gateway, agent)) {
            throw new AssertionError(what + ": gateway gave " + gateway + ", agent gave " + agent);
        }
    }

    static String env(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalStateException(name + " is not set");
        }
        return v;
    }

    // --- TLS material from PEM files

    static KeyStore trustStore(String caFile) throws Exception {
        KeyStore ks = KeyStore.getInstance("PKCS12");
        ks.load(null, null);
        int i = 0;
        for (Certificate c : CertificateFactory.getInstance("X.509")
                .generateCertificates(new ByteArrayInputStream(Files.readAllBytes(Path.of(caFile))))) {
            ks.setCertificateEntry("ca-" + i++, c);
        }
        return ks;
    }

    static final String KEY_PASSWORD = "in-memory";

    static KeyStore keyStore(String certFile, String keyFile) throws Exception {
        Collection<? extends Certificate> chain = CertificateFactory.getInstance("X.509")
            .generateCertificates(new ByteArrayInputStream(Files.readAllBytes(Path.of(certFile))));
        String pem = Files.readString(Path.of(keyFile));
        String base64 = pem.replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
        PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(Base64.getDecoder().decode(base64));
        PrivateKey key;
        try {
            key = KeyFactory.getInstance("EC").generatePrivate(spec);
        } catch (Exception notEc) {
            key = KeyFactory.getInstance("RSA").generatePrivate(spec);
        }
        KeyStore ks = KeyStore.getInstance("PKCS12");
        ks.load(null, null);
        ks.setKeyEntry("client", key, KEY_PASSWORD.toCharArray(), chain.toArray(new Certificate[0]));
        return ks;
    }

    // --- helpers on answers

    static <T> T value(JolokiaClient client, JolokiaRequest request) throws JolokiaException {
        JolokiaResponse<?> r = client.execute(request);
        return r.getValue();
    }

    static <T> T value(JolokiaClient client, JolokiaRequest request, HttpMethod method) throws JolokiaException {
        JolokiaResponse<?> r = client.execute(request, method);
        return r.getValue();
    }

    static JolokiaRemoteException remoteError(JolokiaClient client, JolokiaRequest request, HttpMethod method) throws Exception {
        try {
            client.execute(request, method);
        } catch (JolokiaRemoteException e) {
            return e;
        }
        throw new AssertionError("no JolokiaRemoteException for " + request.toJson());
    }

    static Map<String, Object> byMBean(JolokiaReadResponse r, String attribute) throws Exception {
        Map<String, Object> m = new TreeMap<>();
        for (ObjectName n : r.getObjectNames()) {
            m.put(n.getCanonicalName(), r.getValue(n, attribute));
        }
        return m;
    }

    /** What the response's accessors make of a pattern read's answer: its values, or why they throw
     *  (they look MBeans up by canonical name; a 2.x agent names them in registration order). */
    static String accessorOutcome(JolokiaClient client, JolokiaReadRequest r) throws Exception {
        try {
            return String.valueOf(byMBean(client.execute(r), "Value"));
        } catch (IllegalArgumentException e) {
            return "throws " + e.getMessage();
        }
    }

    static TreeSet<String> canonical(List<ObjectName> names) {
        TreeSet<String> s = new TreeSet<>();
        for (ObjectName n : names) {
            s.add(n.getCanonicalName());
        }
        return s;
    }

    static boolean isCounterKey(String key) {
        // the MBean part of a list answer: "type=Counter"
        return key.equals("type=Counter");
    }

    /** Every check, through the gateway client `gw`, compared with the agent asked by `agent`. */
    static void checks(String mode, JolokiaClient gw, JolokiaClient agent) {
        check(mode + " read one attribute", () -> {
            JolokiaReadRequest name = new JolokiaReadRequest(TYPES, "Name");
            same(value(gw, name), value(agent, name), "Name");
            JolokiaReadRequest longMax = new JolokiaReadRequest(TYPES, "LongMax");
            Object v = value(gw, longMax);
            same(v, value(agent, longMax), "LongMax");
            return "Name=" + value(gw, name) + " LongMax=" + v;
        });

        check(mode + " read several attributes", () -> {
            JolokiaReadRequest r = new JolokiaReadRequest(TYPES, "Int", "Name", "StringArray", "Composite");
            Map<String, Object> v = value(gw, r);
            same(v, value(agent, r), "Int, Name, StringArray, Composite");
            return String.valueOf(v);
        });

        check(mode + " read MBean pattern", () -> {
            JolokiaReadRequest r = new JolokiaReadRequest("jmxgate.test:type=Pattern,*", "Value");
            // as the agent names the MBeans (2.x: in registration order, 1.x: canonical)
            Map<String, Object> raw = value(gw, r);
            same(raw, value(agent, r), "Pattern Value");
            expect(raw.size() == 2, "two MBeans match: " + raw);
            // the response's accessors look MBeans up by canonical name: with canonicalNaming
            // they work for both generations
            Map<JolokiaQueryParameter, String> canonical = Map.of(JolokiaQueryParameter.CANONICAL_NAMING, "true");
            Map<String, Object> g = byMBean(gw.execute(r, canonical), "Value");
            same(g, byMBean(agent.execute(r, canonical), "Value"), "Pattern Value, canonicalNaming");
            String viaAgent = accessorOutcome(agent, r);
            same(accessorOutcome(gw, r), viaAgent, "getValue(ObjectName, attribute) without canonicalNaming");
            return raw + "; without canonicalNaming, getValue(ObjectName, attribute): " + viaAgent;
        });

        check(mode + " read inner path", () -> {
            JolokiaReadRequest r = new JolokiaReadRequest(TYPES, "Composite");
            r.setPath("port");
            Object v = value(gw, r);
            same(v, value(agent, r), "Composite/port");
            return "Composite/port=" + v;
        });

        check(mode + " write", () -> {
            JolokiaReadRequest read = new JolokiaReadRequest(TYPES, "Int");
            Number before = value(agent, read);
            long written = before.longValue() + 1000;
            Object old = value(gw, new JolokiaWriteRequest(TYPES, "Int", written));
            same(old, before, "old value returned by write");
            Number after = value(agent, read);
            same(after.longValue(), written, "Int read from the agent after the write");
            value(agent, new JolokiaWriteRequest(TYPES, "Int", before));
            return "Int " + before + " -> " + written + " (restored)";
        });

        check(mode + " write structured value", () -> {
            JolokiaReadRequest read = new JolokiaReadRequest(TYPES, "List");
            List<Object> before = value(agent, read);
            List<String> written = List.of("java", mode);
            value(gw, new JolokiaWriteRequest(TYPES, "List", written), HttpMethod.POST);
            same(value(agent, read), written, "List read from the agent after the write");
            value(agent, new JolokiaWriteRequest(TYPES, "List", before), HttpMethod.POST);
            return "List " + before + " -> " + written + " (restored)";
        });

        check(mode + " exec without signature", () -> {
            JolokiaExecRequest echo = new JolokiaExecRequest(OPS, "echo", "hello from " + mode);
            same(value(gw, echo), value(agent, echo), "echo");
            JolokiaExecRequest noArgs = new JolokiaExecRequest(OPS, "noArgs");
            same(value(gw, noArgs), value(agent, noArgs), "noArgs");
            return "echo=" + value(gw, echo) + " noArgs=" + value(gw, noArgs);
        });

        check(mode + " exec with signature", () -> {
            List<String> seen = new ArrayList<>();
            for (JolokiaExecRequest r : List.of(
                    new JolokiaExecRequest(OPS, "add(int,int)", 2, 3),
                    new JolokiaExecRequest(OPS, "add(long,long,long)", 1L, 2L, 3L),
                    new JolokiaExecRequest(OPS, "add(java.lang.String,java.lang.String)", "ja", "va"))) {
                Object v = value(gw, r);
                same(v, value(agent, r), r.getOperation());
                seen.add(r.getOperation() + "=" + v);
            }
            return String.join(" ", seen);
        });

        check(mode + " exec structured arguments", () -> {
            JolokiaExecRequest r = new JolokiaExecRequest(OPS, "arrayLength", (Object) new String[] {"x", "y", "z", "w"});
            Object v = value(gw, r, HttpMethod.POST);
            same(v, value(agent, r, HttpMethod.POST), "arrayLength");
            same(((Number) v).intValue(), 4, "arrayLength of four");
            return "arrayLength=" + v;
        });

        check(mode + " search", () -> {
            JolokiaSearchRequest r = new JolokiaSearchRequest("jmxgate.test:*");
            TreeSet<String> g = canonical(((org.jolokia.client.response.JolokiaSearchResponse) gw.execute(r)).getObjectNames());
            TreeSet<String> a = canonical(((org.jolokia.client.response.JolokiaSearchResponse) agent.execute(r)).getObjectNames());
            expect(a.contains(COUNTER), "the agent itself has " + COUNTER + ": " + a);
            TreeSet<String> expected = new TreeSet<>(a);
            expected.remove(COUNTER);
            same(g, expected, "search jmxgate.test:* (the policy hides " + COUNTER + ")");
            return g.size() + " MBeans, " + COUNTER + " hidden";
        });

        check(mode + " list path", () -> {
            JolokiaListRequest r = new JolokiaListRequest("jmxgate.test/type=Operations");
            Map<String, Object> g = value(gw, r);
            same(g, value(agent, r), "list jmxgate.test/type=Operations");
            return String.valueOf(g);
        });

        check(mode + " list depth", () -> {
            JolokiaListRequest r = new JolokiaListRequest((String) null);
            Map<JolokiaQueryParameter, String> depth = Map.of(JolokiaQueryParameter.MAX_DEPTH, "2");
            Map<String, Object> g = gw.execute(r, depth).getValue();
            Map<String, Object> a = agent.execute(r, depth).getValue();
            same(new TreeSet<>(g.keySet()), new TreeSet<>(a.keySet()), "domains at maxDepth=2");
            TreeSet<String> expected = new TreeSet<>(((Map<String, Object>) a.get("jmxgate.test")).keySet());
            expect(expected.removeIf(ClientCheck::isCounterKey), "the agent lists type=Counter: " + expected);
            same(new TreeSet<>(((Map<String, Object>) g.get("jmxgate.test")).keySet()), expected,
                "MBeans of jmxgate.test at maxDepth=2 (type=Counter hidden)");
            return g.keySet().size() + " domains, jmxgate.test: " + expected;
        });

        check(mode + " version", () -> {
            JolokiaVersionResponse g = gw.execute(new JolokiaVersionRequest());
            JolokiaVersionResponse a = agent.execute(new JolokiaVersionRequest());
            same(g.getAgentVersion(), a.getAgentVersion(), "agent version");
            same(g.getProtocolVersion(), a.getProtocolVersion(), "protocol version");
            return "agent " + g.getAgentVersion() + ", protocol " + g.getProtocolVersion();
        });

        check(mode + " bulk", () -> {
            List<JolokiaRequest> requests = List.of(
                new JolokiaReadRequest(TYPES, "Name"),
                new JolokiaReadRequest(MISSING, "Anything"),
                new JolokiaExecRequest(OPS, "reset"),
                new JolokiaExecRequest(OPS, "echo", "bulk"));
            List<Object> results;
            try {
                gw.execute(requests);
                throw new AssertionError("no JolokiaBulkRemoteException for a bulk with failures");
            } catch (JolokiaBulkRemoteException e) {
                results = e.getResults();
            }
            same(results.size(), 4, "results in the bulk exception");
            expect(results.get(0) instanceof JolokiaReadResponse, "item 0 is a read response: " + results.get(0));
            expect(results.get(1) instanceof JolokiaRemoteException, "item 1 is an error: " + results.get(1));
            expect(results.get(2) instanceof JolokiaRemoteException, "item 2 is an error: " + results.get(2));
            expect(results.get(3) instanceof JolokiaExecResponse, "item 3 is an exec response: " + results.get(3));
            // the same items but reset, straight to the agent (it has no policy)
            List<Object> direct;
            try {
                agent.execute(List.of(requests.get(0), requests.get(1), requests.get(3)));
                throw new AssertionError("the agent answered a missing MBean without error");
            } catch (JolokiaBulkRemoteException e) {
                direct = e.getResults();
            }
            same(((JolokiaReadResponse) results.get(0)).getValue(), ((JolokiaReadResponse) direct.get(0)).getValue(), "item 0");
            JolokiaRemoteException missing = (JolokiaRemoteException) results.get(1);
            JolokiaRemoteException directMissing = (JolokiaRemoteException) direct.get(1);
            same(missing.getStatus(), directMissing.getStatus(), "item 1 status");
            same(missing.getErrorType(), directMissing.getErrorType(), "item 1 error type");
            JolokiaRemoteException denied = (JolokiaRemoteException) results.get(2);
            same(denied.getStatus(), 403, "item 2 status");
            expect(denied.getMessage().contains("Operation reset forbidden for MBean " + OPS),
                "item 2 carries the policy's wording: " + denied.getMessage());
            same(((JolokiaExecResponse) results.get(3)).getValue(), ((JolokiaExecResponse) direct.get(2)).getValue(), "item 3");
            return "[200, " + missing.getStatus() + " " + missing.getErrorType() + ", " + denied.getStatus() + ", 200]";
        });

        check(mode + " missing MBean", () -> {
            JolokiaReadRequest r = new JolokiaReadRequest(MISSING, "Anything");
            JolokiaRemoteException g = remoteError(gw, r, null);
            JolokiaRemoteException a = remoteError(agent, r, null);
            same(g.getStatus(), a.getStatus(), "status");
            same(g.getErrorType(), a.getErrorType(), "error type");
            same(g.getStatus(), 404, "status");
            Object optional = gw.execute(r, null, null, ValidatingResponseExtractor.OPTIONAL);
            same(optional, null, "OPTIONAL extractor on a 404");
            same(agent.execute(r, null, null, ValidatingResponseExtractor.OPTIONAL), null, "OPTIONAL extractor, agent");
            return "DEFAULT: " + g.getStatus() + " " + g.getErrorType() + "; OPTIONAL: null";
        });

        check(mode + " denied operation", () -> {
            StringBuilder seen = new StringBuilder();
            for (HttpMethod method : new HttpMethod[] {null, HttpMethod.POST}) {
                JolokiaRemoteException e = remoteError(gw, new JolokiaExecRequest(OPS, "reset"), method);
                same(e.getStatus(), 403, "status");
                expect(e.getMessage().contains("Operation reset forbidden for MBean " + OPS),
                    "the policy's wording: " + e.getMessage());
                seen.append(method == null ? "default" : method).append(": ").append(e.getErrorType())
                    .append(" \"").append(e.getMessage()).append("\" ");
            }
            return seen.toString().trim();
        });

        check(mode + " denied attribute", () -> {
            JolokiaRemoteException e = remoteError(gw, new JolokiaReadRequest(TYPES, "Double"), null);
            same(e.getStatus(), 403, "status");
            expect(e.getMessage().contains("Reading attribute Double is forbidden for MBean " + TYPES),
                "the policy's wording: " + e.getMessage());
            return e.getErrorType() + " \"" + e.getMessage() + "\"";
        });
    }

    public static void main(String[] args) throws Exception {
        String url = env("JMXGATE_URL");
        String httpsUrl = env("JMXGATE_HTTPS_URL");
        String user = env("JMXGATE_USER");
        String password = env("JMXGATE_PASSWORD");
        String target = env("JMXGATE_TARGET");
        String agentUrl = env("JMXGATE_AGENT_URL");

        JolokiaClient agent = new JolokiaClientBuilder().url(agentUrl).build();
        JolokiaVersionResponse version = agent.execute(new JolokiaVersionRequest());
        System.out.println("agent " + agentUrl + ": Jolokia " + version.getAgentVersion()
            + ", protocol " + version.getProtocolVersion());

        JolokiaClient virtual = new JolokiaClientBuilder()
            .url(url + "/jolokia/targets/" + target).user(user).password(password).build();
        checks("virtual", virtual, agent);

        JolokiaClient proxy = new JolokiaClientBuilder()
            .url(url + "/jolokia").user(user).password(password).target(target).build();
        checks("proxy", proxy, agent);

        KeyStore trust = trustStore(env("JMXGATE_CA_FILE"));
        JolokiaClient https = new JolokiaClientBuilder()
            .url(httpsUrl + "/jolokia/targets/" + target)
            .protocolVersion("TLS")
            .truststore(trust)
            .keystore(keyStore(env("JMXGATE_CLIENT_CERT"), env("JMXGATE_CLIENT_KEY")))
            .keyPassword(KEY_PASSWORD)
            .build();
        checks("https", https, agent);

        for (String mode : new String[] {"virtual", "proxy"}) {
            check(mode + " wrong password", () -> {
                JolokiaClientBuilder b = new JolokiaClientBuilder().user(user).password(password + "-wrong");
                if (mode.equals("virtual")) {
                    b.url(url + "/jolokia/targets/" + target);
                } else {
                    b.url(url + "/jolokia").target(target);
                }
                try {
                    b.build().execute(new JolokiaReadRequest(TYPES, "Name"));
                } catch (JolokiaHttpException e) {
                    same(e.getHttpStatus(), 401, "HTTP status");
                    return e.getClass().getSimpleName() + " " + e.getHttpStatus() + " \"" + e.getMessage() + "\"";
                }
                throw new AssertionError("a wrong password was accepted");
            });
        }

        check("https without client certificate", () -> {
            JolokiaClient anonymous = new JolokiaClientBuilder()
                .url(httpsUrl + "/jolokia/targets/" + target)
                .protocolVersion("TLS")
                .truststore(trust)
                .build();
            try {
                anonymous.execute(new JolokiaReadRequest(TYPES, "Name"));
            } catch (JolokiaHttpException e) {
                same(e.getHttpStatus(), 401, "HTTP status");
                return e.getClass().getSimpleName() + " " + e.getHttpStatus();
            }
            throw new AssertionError("served without a client certificate");
        });

        System.out.println("SUMMARY passed=" + passed + " failed=" + failed);
        System.exit(failed == 0 ? 0 : 1);
    }
}
