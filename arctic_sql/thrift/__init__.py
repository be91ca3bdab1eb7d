"""The HiveServer2 (Thrift/JDBC) server: ``arctic-sql thriftserver``; see :mod:`arctic_sql.thrift.server`."""
