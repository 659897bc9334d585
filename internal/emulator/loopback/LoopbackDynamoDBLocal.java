// LoopbackDynamoDBLocal starts DynamoDB Local listening on one host only.
//
// DynamoDB Local (release 1.11.478) has no option to choose the interface:
// its Jetty server binds every interface of the machine. This launcher
// builds the server exactly as DynamoDB Local's own main does
// (ServerRunner.createServerFromCommandLineArgs), sets the host of its
// Jetty connectors, then starts it.
//
// Usage: java -cp DIR:DynamoDBLocal.jar:DynamoDBLocal_lib/* LoopbackDynamoDBLocal HOST ARGS...
// where ARGS are DynamoDB Local's own (-inMemory -port N ...).
//
// The compiled class is embedded in idemkit (internal/emulator); rebuild it
// with `javac --release 11 -cp DynamoDBLocal.jar:DynamoDBLocal_lib/* -d .
// LoopbackDynamoDBLocal.java` (TestLoopbackLauncherMatchesSource checks it).

import java.lang.reflect.Field;
import java.util.Arrays;

public final class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: LoopbackDynamoDBLocal HOST [DynamoDB Local arguments]");
            System.exit(2);
        }
        String host = args[0];
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        com.amazonaws.services.dynamodbv2.local.server.DynamoDBProxyServer server =
            com.amazonaws.services.dynamodbv2.local.main.ServerRunner.createServerFromCommandLineArgs(rest);
        Field f = server.getClass().getDeclaredField("server");
        f.setAccessible(true);
        org.eclipse.jetty.server.Server jetty = (org.eclipse.jetty.server.Server) f.get(server);
        org.eclipse.jetty.server.Connector[] connectors = jetty.getConnectors();
        if (connectors == null || connectors.length == 0) {
            System.err.println("LoopbackDynamoDBLocal: DynamoDB Local has no connector to bind");
            System.exit(1);
        }
        for (org.eclipse.jetty.server.Connector c : connectors) {
            c.setHost(host);
        }
        server.start();
    }
}
