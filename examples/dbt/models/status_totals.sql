{#-
  A materialized view of the orders' state: created on the first run, refreshed on the next ones
  (a GROUP BY with count and sum refreshes incrementally: only the changes since the last refresh
  are read), created again when this query changes (macros/materialized_view.sql).
-#}
{{ config(materialized='materialized_view') }}

select status, count(*) as orders, sum(amount) as amount
from {{ ref('order_status') }}
group by status
