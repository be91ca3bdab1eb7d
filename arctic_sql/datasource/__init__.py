"""The ``arctic`` format: arctic tables in the DataFrame and Structured Streaming APIs.

``arctic_sql.connect()`` registers it on its SparkSession; ``arctic_sql.register(spark, ...)`` does it
for a session made elsewhere. Spark runs a Python data source's methods in Python worker processes,
never in the driver's interpreter, so everything a reader or writer needs travels with it: the
catalog's name and properties (``source.CatalogSpec``) and the options the user gave.
"""
