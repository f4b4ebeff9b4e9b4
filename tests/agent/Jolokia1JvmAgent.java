// A -javaagent that runs the real Jolokia 1.7.1 agent (Debian's jolokia-core,
// org.jolokia.http.AgentServlet) in embedded Jetty 9.4 inside any JVM: Debian
// ships no 1.7.1 JVM agent jar. tests/real_products/ attaches it to Tomcat,
// ZooKeeper and ActiveMQ next to jmx_exporter's agent.
//
//   java -javaagent:jolokia1-agent.jar=port=N[,host=H] ...
//
// The jar's manifest names this class as Premain-Class and the jars of
// tests/agent/classpath.sh in its Class-Path. Jetty's threads are daemons,
// so the agent never keeps a JVM alive that its product would let exit.

import java.lang.instrument.Instrumentation;
import java.util.HashMap;
import java.util.Map;

import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.jolokia.http.AgentServlet;

public final class Jolokia1JvmAgent {
    private Jolokia1JvmAgent() {}

    public static void premain(String args, Instrumentation inst) throws Exception {
        Map<String, String> options = new HashMap<>();
        if (args != null && !args.isEmpty()) {
            for (String pair : args.split(",")) {
                int eq = pair.indexOf('=');
                if (eq < 1) {
                    throw new IllegalArgumentException(
                            "Jolokia1JvmAgent: option '" + pair + "' is not key=value (want port=N[,host=H])");
                }
                options.put(pair.substring(0, eq), pair.substring(eq + 1));
            }
        }
        String port = options.get("port");
        if (port == null) {
            throw new IllegalArgumentException("Jolokia1JvmAgent: no port= option (want port=N[,host=H])");
        }

        QueuedThreadPool threads = new QueuedThreadPool(8, 2);
        threads.setName("jolokia1");
        threads.setDaemon(true);
        Server server = new Server(threads);
        ServerConnector connector = new ServerConnector(server, 1, 1);
        connector.setHost(options.getOrDefault("host", "127.0.0.1"));
        connector.setPort(Integer.parseInt(port));
        server.addConnector(connector);

        ServletContextHandler ctx = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
        ctx.setContextPath("/");
        ServletHolder holder = new ServletHolder("jolokia", new AgentServlet());
        holder.setInitParameter("mimeType", "application/json");
        holder.setInitOrder(0);
        ctx.addServlet(holder, "/jolokia/*");
        server.setHandler(ctx);
        server.start();
        System.err.println("Jolokia1JvmAgent: Jolokia 1.7.1 listening on port " + connector.getLocalPort());
    }
}
