{#-
  A table model materialised as an arctic primary-key table, optimized right after it is built.
-#}
{{ config(
    materialized='table',
    primary_key='customer_id',
    tblproperties={'self-optimizing.enabled': 'false'},
    post_hook="CALL system.optimize(table => '{{ this }}', mode => 'full')",
) }}

select c.customer_id, c.name, c.country,
       count(o.order_id) as orders,
       coalesce(sum(case when o.status != 'cancelled' then o.amount end), 0) as revenue
from {{ ref('customers') }} c
left join {{ ref('order_status') }} o on o.customer_id = c.customer_id
group by c.customer_id, c.name, c.country
