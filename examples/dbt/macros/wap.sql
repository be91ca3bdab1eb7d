{#-
  Write-audit-publish on arctic branches. The profile's `audit` target gives every session dbt opens
  `arctic.branch = audit` (profiles.yml), so models write, and tests read, the tables' branch `audit`;
  readers of the tables see nothing until the tests pass and the branch is published:

      dbt run-operation wap_begin   --args '{branch: audit}'
      dbt run  --select order_status --vars '{batch: 2}' --target audit
      dbt test --select order_status --target audit
      dbt run-operation wap_publish --args '{branch: audit}'
-#}

{% macro wap_begin(branch, models=['order_status']) %}
  {% for model in models %}
    {% do run_query("alter table " ~ target.schema ~ "." ~ model ~ " create branch if not exists " ~ branch) %}
  {% endfor %}
  {{ log("branch " ~ branch ~ " ready on " ~ models | join(', '), info=True) }}
{% endmacro %}

{% macro wap_publish(branch, models=['order_status']) %}
  {#- Refused, publishing nothing, when main moved on after the branch forked. -#}
  {% for model in models %}
    {% set table = target.schema ~ "." ~ model %}
    {% do run_query("call system.fast_forward(table => '" ~ table ~ "', branch => 'main', to => '" ~ branch ~ "')") %}
    {% do run_query("alter table " ~ table ~ " drop branch " ~ branch) %}
  {% endfor %}
  {{ log("published " ~ branch ~ " to main of " ~ models | join(', '), info=True) }}
{% endmacro %}
