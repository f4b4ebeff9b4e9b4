// Test launcher for jmxgate integration tests: runs a real Jolokia 1.7.1 agent
// (org.jolokia.http.AgentServlet) inside embedded Jetty 9.4 and registers a set
// of test MBeans in the platform MBeanServer. See README.md in this directory.
//
// Protocol with the test harness:
//   * prints exactly one line "READY port=<port>" on stdout once Jetty listens;
//   * exits (status 0) when its stdin reaches EOF.
// Nothing else is written to stdout; Jetty/Jolokia logging goes to stderr.
// With --tls-cert/--tls-key the connector speaks HTTPS only (PEM files are
// turned into an in-memory key store; nothing is written to disk).

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

import org.eclipse.jetty.security.ConstraintMapping;
import org.eclipse.jetty.security.ConstraintSecurityHandler;
import org.eclipse.jetty.security.HashLoginService;
import org.eclipse.jetty.security.UserStore;
import org.eclipse.jetty.security.authentication.BasicAuthenticator;
import org.eclipse.jetty.http.HttpVersion;
import org.eclipse.jetty.server.HttpConfiguration;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.SecureRequestCustomizer;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.SslConnectionFactory;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;
import org.eclipse.jetty.util.security.Constraint;
import org.eclipse.jetty.util.security.Credential;
import org.eclipse.jetty.util.ssl.SslContextFactory;
import org.jolokia.http.AgentServlet;

public class Launcher {

    // ------------------------------------------------------------------
    // TLS material from PEM files (--tls-cert, --tls-key, --tls-client-ca)
    // ------------------------------------------------------------------

    /** Exits with status 2 after printing {@code msg} on stderr (bad input files). */
    private static void fail(String msg) {
        System.err.println("Launcher: " + msg);
        System.exit(2);
    }

    /** One "-----BEGIN type----- ... -----END type-----" block, base64-decoded. */
    static final class PemBlock {
        final String type;
        final byte[] der;

        PemBlock(String type, byte[] der) {
            this.type = type;
            this.der = der;
        }
    }

    private static final java.util.regex.Pattern PEM_BLOCK = java.util.regex.Pattern.compile(
            "-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \\1-----", java.util.regex.Pattern.DOTALL);

    /** All PEM blocks of {@code file} in file order; exits 2 if unreadable or none. */
    static List<PemBlock> readPem(String flag, String file) {
        String text = null;
        try {
            text = new String(Files.readAllBytes(Paths.get(file)), StandardCharsets.ISO_8859_1);
        } catch (IOException | RuntimeException e) {
            fail(flag + " " + file + ": cannot read file: " + e);
        }
        List<PemBlock> out = new ArrayList<>();
        java.util.regex.Matcher m = PEM_BLOCK.matcher(text);
        while (m.find()) {
            String body = m.group(2);
            if (body.contains(":")) { // RFC 1421 headers, e.g. "Proc-Type: 4,ENCRYPTED"
                fail(flag + " " + file + ": PEM block '" + m.group(1)
                        + "' has headers (encrypted traditional key?); use unencrypted PKCS#8 / plain PEM");
            }
            byte[] der = null;
            try {
                der = Base64.getMimeDecoder().decode(body.trim());
            } catch (IllegalArgumentException e) {
                fail(flag + " " + file + ": PEM block '" + m.group(1) + "' is not valid base64: " + e.getMessage());
            }
            out.add(new PemBlock(m.group(1), der));
        }
        if (out.isEmpty()) {
            fail(flag + " " + file + ": no PEM block (-----BEGIN ...-----) found");
        }
        return out;
    }

    private static String types(List<PemBlock> blocks) {
        List<String> t = new ArrayList<>();
        for (PemBlock b : blocks) {
            t.add(b.type);
        }
        return String.join(", ", t);
    }

    /** Every CERTIFICATE block of {@code file}, in file order (other block types ignored). */
    static X509Certificate[] readCertificates(String flag, String file) {
        List<PemBlock> blocks = readPem(flag, file);
        List<X509Certificate> certs = new ArrayList<>();
        try {
            CertificateFactory cf = CertificateFactory.getInstance("X.509");
            for (PemBlock b : blocks) {
                if (!b.type.equals("CERTIFICATE")) {
                    continue;
                }
                try {
                    certs.add((X509Certificate) cf.generateCertificate(new java.io.ByteArrayInputStream(b.der)));
                } catch (CertificateException | RuntimeException e) {
                    fail(flag + " " + file + ": CERTIFICATE block #" + (certs.size() + 1)
                            + " is not a valid X.509 certificate: " + e.getMessage());
                }
            }
        } catch (CertificateException e) {
            fail("X.509 certificate factory unavailable: " + e);
        }
        if (certs.isEmpty()) {
            fail(flag + " " + file + ": no CERTIFICATE block (found: " + types(blocks) + ")");
        }
        return certs.toArray(new X509Certificate[0]);
    }

    /** The PKCS#8 ("BEGIN PRIVATE KEY") key of {@code file}: EC tried first, then RSA. */
    static PrivateKey readPrivateKey(String flag, String file) {
        List<PemBlock> blocks = readPem(flag, file);
        PemBlock pkcs8 = null;
        for (PemBlock b : blocks) {
            if (b.type.equals("PRIVATE KEY")) {
                pkcs8 = b;
                break;
            }
        }
        if (pkcs8 == null) {
            String found = types(blocks);
            String hint = "";
            if (found.contains("ENCRYPTED PRIVATE KEY")) {
                hint = "; the key is encrypted, store it unencrypted:"
                        + " openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pkcs8";
            } else if (found.contains("EC PRIVATE KEY") || found.contains("RSA PRIVATE KEY")) {
                hint = "; convert the traditional key to PKCS#8:"
                        + " openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pkcs8";
            }
            fail(flag + " " + file + ": no unencrypted PKCS#8 '-----BEGIN PRIVATE KEY-----' block (found: "
                    + found + ")" + hint);
        }
        PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(pkcs8.der);
        List<String> errors = new ArrayList<>();
        for (String alg : new String[] {"EC", "RSA"}) {
            try {
                return KeyFactory.getInstance(alg).generatePrivate(spec);
            } catch (InvalidKeySpecException | RuntimeException e) {
                errors.add(alg + ": " + e.getMessage());
            } catch (GeneralSecurityException e) {
                errors.add(alg + ": " + e);
            }
        }
        fail(flag + " " + file + ": not a PKCS#8 EC or RSA private key (" + String.join("; ", errors) + ")");
        return null; // unreachable
    }

    /** Exits 2 unless {@code key} is the private key of {@code cert} (sign + verify a probe). */
    static void checkKeyMatchesCert(PrivateKey key, X509Certificate cert, String keyFile, String certFile) {
        String sigAlg = key.getAlgorithm().equals("EC") ? "SHA256withECDSA" : "SHA256withRSA";
        byte[] probe = "jmxgate key/certificate match probe".getBytes(StandardCharsets.US_ASCII);
        boolean ok;
        try {
            Signature s = Signature.getInstance(sigAlg);
            s.initSign(key);
            s.update(probe);
            byte[] sig = s.sign();
            Signature v = Signature.getInstance(sigAlg);
            v.initVerify(cert.getPublicKey());
            v.update(probe);
            ok = v.verify(sig);
        } catch (GeneralSecurityException | RuntimeException e) {
            ok = false;
        }
        if (!ok) {
            fail("--tls-key " + keyFile + " (" + key.getAlgorithm() + ") does not match the first certificate in --tls-cert "
                    + certFile + " (" + cert.getPublicKey().getAlgorithm() + ", "
                    + cert.getSubjectX500Principal().getName() + ")");
        }
    }

    /**
     * HTTPS-only SslContextFactory: key store (and, with {@code clientCaFile}, trust store
     * plus mandatory client certificates) built in memory from PEM files. Exits 2 on bad files.
     */
    static SslContextFactory.Server tlsContext(String certFile, String keyFile, String clientCaFile) {
        X509Certificate[] chain = readCertificates("--tls-cert", certFile);
        PrivateKey key = readPrivateKey("--tls-key", keyFile);
        checkKeyMatchesCert(key, chain[0], keyFile, certFile);
        X509Certificate[] clientCas = clientCaFile == null ? null : readCertificates("--tls-client-ca", clientCaFile);

        byte[] rnd = new byte[24];
        new SecureRandom().nextBytes(rnd);
        String password = Base64.getEncoder().encodeToString(rnd);
        KeyStore keyStore = null;
        KeyStore trustStore = null;
        try {
            keyStore = KeyStore.getInstance("PKCS12");
            keyStore.load(null, null);
            try {
                keyStore.setKeyEntry("server", key, password.toCharArray(), chain);
            } catch (KeyStoreException | IllegalArgumentException e) {
                // PKCS12 checks that each certificate's issuer is the next one's subject.
                fail("--tls-cert " + certFile + ": certificates are not an ordered chain"
                        + " (leaf first, then each issuer): " + e.getMessage());
            }
            if (clientCas != null) {
                trustStore = KeyStore.getInstance("PKCS12");
                trustStore.load(null, null);
                for (int i = 0; i < clientCas.length; i++) {
                    trustStore.setCertificateEntry("client-ca-" + i, clientCas[i]);
                }
            }
        } catch (GeneralSecurityException | IOException e) {
            fail("cannot build the in-memory key store: " + e);
        }

        SslContextFactory.Server ssl = new SslContextFactory.Server();
        ssl.setKeyStore(keyStore);
        ssl.setKeyStorePassword(password);
        ssl.setKeyManagerPassword(password);
        if (trustStore != null) {
            ssl.setTrustStore(trustStore);
            ssl.setNeedClientAuth(true);
        }
        return ssl;
    }

    // ------------------------------------------------------------------
    // main
    // ------------------------------------------------------------------

    private static void usage(String msg) {
        System.err.println("Launcher: " + msg);
        System.err.println("usage: java -cp <classes>:$(tests/agent/classpath.sh) Launcher"
                + " [--port N] [--host H] [--user U --password P] [--name NAME]"
                + " [--mime application/json|text/plain]"
                + " [--tls-cert CERT.pem --tls-key KEY.pem [--tls-client-ca CA.pem] [--tls-protocols TLSv1.2,...]]"
                + " [--many-mbeans N] [--exporter-mbeans true] [--policy jolokia-access.xml] [--verbose]");
        System.exit(2);
    }

    public static void main(String[] args) throws Exception {
        int port = 0;
        String host = "127.0.0.1";
        String user = null;
        String password = null;
        String name = "agent";
        String mime = "application/json";
        boolean verbose = false;
        String tlsCert = null;
        String tlsKey = null;
        String tlsClientCa = null;
        String tlsProtocols = null;
        int manyMbeans = 0;
        String policy = null;
        boolean exporter = false;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--verbose")) {
                verbose = true;
                continue;
            }
            if (i + 1 >= args.length) {
                usage("missing value for " + a);
            }
            String v = args[++i];
            switch (a) {
                case "--port":
                    try {
                        port = Integer.parseInt(v);
                    } catch (NumberFormatException e) {
                        usage("bad port: " + v);
                    }
                    break;
                case "--host": host = v; break;
                case "--user": user = v; break;
                case "--password": password = v; break;
                case "--name": name = v; break;
                case "--mime": mime = v; break;
                case "--tls-cert": tlsCert = v; break;
                case "--tls-key": tlsKey = v; break;
                case "--tls-client-ca": tlsClientCa = v; break;
                case "--tls-protocols": tlsProtocols = v; break;
                case "--policy": policy = v; break;
                case "--exporter-mbeans": exporter = Boolean.parseBoolean(v); break;
                case "--many-mbeans":
                    try {
                        manyMbeans = Integer.parseInt(v);
                    } catch (NumberFormatException e) {
                        usage("bad --many-mbeans count: " + v);
                    }
                    break;
                default: usage("unknown argument: " + a);
            }
        }
        if ((user == null) != (password == null)) {
            usage("--user and --password must be given together");
        }
        if ((tlsCert == null) != (tlsKey == null)) {
            usage("--tls-cert and --tls-key must be given together");
        }
        if (tlsClientCa != null && tlsCert == null) {
            usage("--tls-client-ca needs --tls-cert and --tls-key");
        }
        // Must happen before any Jetty class initialises its logger.
        if (System.getProperty("org.eclipse.jetty.LEVEL") == null) {
            System.setProperty("org.eclipse.jetty.LEVEL", verbose ? "INFO" : "WARN");
        }

        // Read and check the PEM files before anything else starts (bad files: exit 2).
        SslContextFactory.Server ssl = tlsCert == null ? null : tlsContext(tlsCert, tlsKey, tlsClientCa);
        if (ssl != null && tlsProtocols != null) {
            // e.g. "TLSv1.2": an agent that a TLS-1.3-only client must refuse.
            ssl.setIncludeProtocols(tlsProtocols.split(","));
        }

        TestMBeans.register(name, manyMbeans);
        if (exporter) {
            ExporterMBeans.register();
        }

        Server server = new Server();
        ServerConnector connector;
        if (ssl == null) {
            connector = new ServerConnector(server);
        } else {
            // HTTPS only: TLS, then HTTP/1.1 inside it.
            HttpConfiguration https = new HttpConfiguration();
            https.setSecureScheme("https");
            SecureRequestCustomizer secure = new SecureRequestCustomizer();
            // Never answer 400 "Host does not match SNI": tests connect by IP address,
            // by name, or with arbitrary Host headers. (9.4.57 did not reject any such
            // request even with the check on; this keeps it so across Jetty updates.)
            secure.setSniHostCheck(false);
            https.addCustomizer(secure);
            connector = new ServerConnector(server,
                    new SslConnectionFactory(ssl, HttpVersion.HTTP_1_1.asString()),
                    new HttpConnectionFactory(https));
        }
        connector.setHost(host);
        connector.setPort(port);
        server.addConnector(connector);

        boolean auth = user != null;
        ServletContextHandler ctx = new ServletContextHandler(
                ServletContextHandler.NO_SESSIONS
                        | (auth ? ServletContextHandler.SECURITY : ServletContextHandler.NO_SECURITY));
        ctx.setContextPath("/");
        ServletHolder holder = new ServletHolder("jolokia", new AgentServlet());
        if (!mime.equals("text/plain")) {
            holder.setInitParameter("mimeType", mime);
        }
        if (policy != null) {
            // The agent's own restrictor, to compare with the gateway's.
            holder.setInitParameter("policyLocation", new java.io.File(policy).toURI().toString());
        }
        holder.setInitOrder(0); // initialise at startup, not on the first request
        ctx.addServlet(holder, "/jolokia/*");

        if (auth) {
            UserStore store = new UserStore();
            store.addUser(user, Credential.getCredential(password), new String[] {"jolokia"});
            HashLoginService login = new HashLoginService("jolokia");
            login.setUserStore(store);
            server.addBean(login);

            Constraint constraint = new Constraint(Constraint.__BASIC_AUTH, "jolokia");
            constraint.setAuthenticate(true);
            constraint.setRoles(new String[] {"jolokia"});
            ConstraintMapping mapping = new ConstraintMapping();
            mapping.setPathSpec("/jolokia/*");
            mapping.setConstraint(constraint);

            ConstraintSecurityHandler security = new ConstraintSecurityHandler();
            security.setAuthenticator(new BasicAuthenticator());
            security.setRealmName("jolokia");
            security.setLoginService(login);
            security.addConstraintMapping(mapping);
            ctx.setSecurityHandler(security);
        }

        server.setHandler(ctx);
        server.setStopAtShutdown(true);
        server.start();
        if (ssl != null && verbose) {
            System.err.println("Launcher: TLS protocols " + Arrays.toString(ssl.getSelectedProtocols()));
            System.err.println("Launcher: TLS cipher suites " + Arrays.toString(ssl.getSelectedCipherSuites()));
        }

        System.out.println("READY port=" + connector.getLocalPort());
        System.out.flush();

        TestMBeans.exitOnStdinEof();

        server.join();
    }
}
