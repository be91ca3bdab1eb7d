{#-
  An incremental model on a primary-key table: each run appends one batch of order updates, and
  since INSERT INTO a primary-key table is an upsert, the table keeps the latest state per order.
  Every run is one table version: `select * from order_status version as of 1` is the first batch.
  With `--target audit` the run writes the table's branch `audit` instead of main
  (write-audit-publish: macros/wap.sql, profiles.yml).
-#}
{{ config(
    materialized='incremental',
    incremental_strategy='append',
    primary_key='order_id',
) }}

select order_id, customer_id, status, amount, batch
from {{ ref('order_updates') }}
where batch = {{ var('batch', 1) }}
