"""Enrich a stream of orders with the current customer, while the customers keep changing.

    python examples/streaming/enrich.py [warehouse]

Orders arrive as JSON files; customers live in an arctic table that an upstream job updates. Each
order meets the customer as it stands when its micro-batch is planned (``lookup_join``): a tier
change or a new customer is visible to the next batch's orders, a deleted customer no longer
matches (``how="left"`` keeps the order with nulls). The enriched orders go into an arctic table
through the exactly-once sink, keyed by order id, with the customer version each order met.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import arctic_sql
from arctic_sql.streaming import lookup_join


def write_orders(folder: str, name: str, orders: list[tuple[int, int, float]]) -> None:
    path = os.path.join(folder, name)
    with open(path + ".tmp", "w") as out:
        out.writelines(
            json.dumps({"order_id": o, "customer_id": c, "amount": a}) + "\n" for o, c, a in orders
        )
    os.rename(path + ".tmp", path)  # the file source must never see half a file


def main(warehouse: str) -> None:
    session = arctic_sql.connect(warehouse=warehouse)
    spark = session.spark
    session.sql("CREATE DATABASE IF NOT EXISTS shop")
    session.sql(
        "CREATE TABLE IF NOT EXISTS shop.customers (customer_id BIGINT, name STRING, tier STRING, "
        "PRIMARY KEY (customer_id))"
    )
    session.sql(
        "CREATE TABLE IF NOT EXISTS shop.enriched_orders (order_id BIGINT, customer_id BIGINT, "
        "amount DOUBLE, name STRING, tier STRING, customer_version BIGINT, PRIMARY KEY (order_id))"
    )
    session.sql("INSERT INTO shop.customers VALUES (1, 'Ada', 'gold'), (2, 'Grace', 'silver')")
    landing = os.path.join(warehouse, "landing", "orders")
    os.makedirs(landing, exist_ok=True)

    orders = (
        spark.readStream.schema("order_id BIGINT, customer_id BIGINT, amount DOUBLE")
        .option("maxFilesPerTrigger", 1)
        .json(landing)
    )
    enriched = lookup_join(
        orders,
        "shop.customers",
        on="customer_id",
        how="left",
        columns=["name", "tier"],
        version_column="customer_version",
    )
    query = (
        enriched.writeStream.format("arctic")
        .option("checkpointLocation", os.path.join(warehouse, "checkpoints", "enriched_orders"))
        .trigger(processingTime="1 second")
        .start("shop.enriched_orders")
    )

    write_orders(landing, "0001.json", [(100, 1, 25.0), (101, 2, 40.0), (102, 3, 5.0)])
    query.processAllAvailable()
    session.sql("INSERT INTO shop.customers VALUES (2, 'Grace', 'gold'), (3, 'Linus', 'bronze')")
    session.sql("DELETE FROM shop.customers WHERE customer_id = 1")
    write_orders(landing, "0002.json", [(103, 1, 12.0), (104, 2, 60.0), (105, 3, 8.0)])
    query.processAllAvailable()
    query.stop()

    for row in session.sql("SELECT * FROM shop.enriched_orders ORDER BY order_id").collect():
        print(
            row.order_id,
            row.customer_id,
            row.amount,
            row.name,
            row.tier,
            "customer version",
            row.customer_version,
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="arctic-enrich-"))
