{#-
  A view over an arctic table: kept in the arctic catalog and read afresh by every query, so it
  always shows the orders as they stand.
-#}
{{ config(materialized='view') }}

select order_id, customer_id, amount
from {{ ref('order_status') }}
where status = 'new'
