import java.io.IOException;
import java.lang.management.ManagementFactory;

import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;

import org.eclipse.jetty.jmx.MBeanContainer;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

/**
 * Debian's Jetty 9 as a product, for the OpenTelemetry rules tests
 * (tests/real_products): a server on 127.0.0.1:PORT with Jetty's own JMX
 * (an MBeanContainer on the platform MBean server, as Jetty's "jmx" module
 * sets up) and one context with sessions. GET / starts a session and
 * answers 200; any other path is a 404.
 */
public class JettyProduct {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        Server server = new Server();
        server.addBean(new MBeanContainer(ManagementFactory.getPlatformMBeanServer()));
        ServerConnector connector = new ServerConnector(server);
        connector.setHost("127.0.0.1");
        connector.setPort(port);
        server.addConnector(connector);
        ServletContextHandler context = new ServletContextHandler(ServletContextHandler.SESSIONS);
        context.setContextPath("/");
        context.addServlet(new ServletHolder(new HttpServlet() {
            @Override
            protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
                if (!"/".equals(req.getPathInfo())) {
                    resp.sendError(404);
                    return;
                }
                req.getSession(true);
                resp.setContentType("text/plain");
                resp.getWriter().println("jmxgate");
            }
        }), "/*");
        server.setHandler(context);
        server.start();
        server.join();
    }
}
