/*
 * Apache Iceberg's REST catalog test fixture (RESTCatalogServer, iceberg-open-api test-fixtures), bound
 * to one address: the fixture's own main listens on every interface (new Server(port)), tests listen on
 * 127.0.0.1 only. The backend catalog, its defaults and its configuration are the fixture's: environment
 * variables CATALOG_<KEY> become catalog properties (CATALOG_URI -> uri, CATALOG_WAREHOUSE -> warehouse,
 * CATALOG_REST_PORT -> rest.port, `__` -> `-`, `_` -> `.`), JdbcCatalog on in-memory SQLite unless
 * catalog-impl / uri say otherwise. Arguments KEY=VALUE set properties too (they win), and rest.host
 * picks the address (default 127.0.0.1). Unlike the fixture, a warehouse is required: its fallback is a
 * temp dir that outlives the test. In package org.apache.iceberg.rest for the fixture's package-private classes.
 */
package org.apache.iceberg.rest;

import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.relocated.com.google.common.collect.Maps;
import org.eclipse.jetty.compression.gzip.GzipCompression;
import org.eclipse.jetty.compression.server.CompressionHandler;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public final class LoopbackRESTCatalogServer {
  private LoopbackRESTCatalogServer() {}

  public static void main(String[] args) throws Exception {
    Map<String, String> properties = Maps.newHashMap(RCKUtils.environmentCatalogConfig());
    for (String arg : args) {
      String[] keyValue = arg.split("=", 2);
      if (keyValue.length != 2) {
        throw new IllegalArgumentException("arguments are catalog properties KEY=VALUE, not " + arg);
      }
      properties.put(keyValue[0], keyValue[1]);
    }
    properties.putIfAbsent(CatalogProperties.CATALOG_IMPL, JdbcCatalog.class.getName());
    properties.putIfAbsent(CatalogProperties.URI, "jdbc:sqlite::memory:");
    properties.putIfAbsent("jdbc.schema-version", "V1");
    if (!properties.containsKey(CatalogProperties.WAREHOUSE_LOCATION)) {
      throw new IllegalArgumentException("pass warehouse=DIR (or set CATALOG_WAREHOUSE)");
    }
    String name = properties.getOrDefault(RESTCatalogServer.CATALOG_NAME, "rest_backend");
    Catalog catalog = CatalogUtil.buildIcebergCatalog(name, properties, new Configuration());

    RESTCatalogAdapter adapter =
        new RESTServerCatalogAdapter(new RESTCatalogServer.CatalogContext(catalog, properties));
    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(adapter)), "/*");
    CompressionHandler compression = new CompressionHandler();
    compression.putCompression(new GzipCompression());
    context.insertHandler(compression);

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(properties.getOrDefault("rest.host", "127.0.0.1"));
    connector.setPort(Integer.parseInt(properties.getOrDefault(RESTCatalogServer.REST_PORT, "8181")));
    server.addConnector(connector);
    server.setHandler(context);
    server.start();
    server.join();
  }
}
