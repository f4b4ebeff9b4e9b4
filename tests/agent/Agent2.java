// Main class for a test JVM that runs a Jolokia 2.x JVM agent (given with
// -javaagent): registers the test MBeans, prints "READY url=<agent URL>" once
// the agent listens, and exits when stdin reaches EOF, like
// Launcher. No Jolokia 1.x or Jetty class may be on its classpath.

public class Agent2 {
    public static void main(String[] args) throws Exception {
        String name = "agent";
        int many = 0;
        boolean exporter = false;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--name": name = args[i + 1]; break;
                case "--many-mbeans": many = Integer.parseInt(args[i + 1]); break;
                case "--exporter-mbeans": exporter = Boolean.parseBoolean(args[i + 1]); break;
                default:
                    System.err.println("Agent2: unknown argument " + args[i]);
                    System.exit(2);
            }
        }
        TestMBeans.register(name, many);
        if (exporter) {
            ExporterMBeans.register();
        }
        // The agent starts its HTTP server in the background and then sets
        // jolokia.agent to its URL.
        String url = null;
        for (int waited = 0; url == null && waited < 60_000; waited += 20) {
            url = System.getProperty("jolokia.agent");
            if (url == null) {
                Thread.sleep(20);
            }
        }
        if (url == null) {
            System.err.println("Agent2: the Jolokia agent did not start within 60 s");
            System.exit(3);
        }
        System.out.println("READY url=" + url);
        System.out.flush();
        TestMBeans.exitOnStdinEof();
        Thread.currentThread().join();
    }
}
