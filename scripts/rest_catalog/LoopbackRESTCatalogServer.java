/*
 * Launcher for Apache Iceberg's REST catalog test fixture (iceberg-open-api 1.10.1, test-fixtures),
 * compiled by scripts/rest_catalog.sh into the fixture's classpath directory.
 *
 * Same as org.apache.iceberg.rest.RESTCatalogServer.main (same CATALOG_* environment variables,
 * same RESTServerCatalogAdapter and RESTCatalogServlet), except that:
 *   - it listens on rest.host (default 127.0.0.1) instead of every interface;
 *   - rest.port may be 0 (any free port); the bound port is printed on stdout as
 *     "LoopbackRESTCatalogServer listening on http://HOST:PORT";
 *   - it passes no Hadoop Configuration (no hadoop-common on the classpath), so io-impl must be
 *     set (S3FileIO) and the warehouse must be given;
 *   - it does not log the catalog properties (they hold the S3 secret).
 */
package org.apache.iceberg.rest;

import java.util.Map;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.relocated.com.google.common.collect.Maps;
import org.apache.iceberg.util.PropertyUtil;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.gzip.GzipHandler;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public class LoopbackRESTCatalogServer {
  public static void main(String[] args) throws Exception {
    Map<String, String> props = Maps.newHashMap(RCKUtils.environmentCatalogConfig());
    props.putIfAbsent(CatalogProperties.CATALOG_IMPL, JdbcCatalog.class.getName());
    props.putIfAbsent(CatalogProperties.URI, "jdbc:sqlite::memory:");
    props.putIfAbsent("jdbc.schema-version", "V1");
    for (String required : new String[] {CatalogProperties.WAREHOUSE_LOCATION, CatalogProperties.FILE_IO_IMPL}) {
      if (props.get(required) == null) {
        System.err.println("LoopbackRESTCatalogServer: catalog property " + required + " is not set");
        System.exit(2);
      }
    }
    String host = PropertyUtil.propertyAsString(props, "rest.host", "127.0.0.1");
    int port = PropertyUtil.propertyAsInt(props, RESTCatalogServer.REST_PORT, 8181);
    String name =
        PropertyUtil.propertyAsString(
            props, RESTCatalogServer.CATALOG_NAME, RESTCatalogServer.CATALOG_NAME_DEFAULT);

    Catalog catalog = CatalogUtil.buildIcebergCatalog(name, props, null);
    RESTCatalogAdapter adapter =
        new RESTServerCatalogAdapter(new RESTCatalogServer.CatalogContext(catalog, props));

    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(adapter)), "/*");
    context.insertHandler(new GzipHandler());

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(host);
    connector.setPort(port);
    server.addConnector(connector);
    server.setHandler(context);
    server.setStopAtShutdown(true);
    server.start();
    System.out.println(
        "LoopbackRESTCatalogServer listening on http://" + host + ":" + connector.getLocalPort());
    System.out.flush();
    server.join();
  }
}
