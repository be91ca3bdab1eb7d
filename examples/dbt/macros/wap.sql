{#-
  Write-audit-publish on arctic branches. A run with `--vars '{wap_branch: audit}'` writes the
  incremental model `order_status` to its branch `audit` (the model's pre_hook sets the session's
  `arctic.branch`); readers of the table see nothing until the audit passes and the branch is
  published:

      dbt run-operation wap_begin   --args '{branch: audit}'
      dbt run --select order_status --vars '{batch: 2, wap_branch: audit}'
      dbt run-operation wap_audit   --args '{branch: audit}'
      dbt run-operation wap_publish --args '{branch: audit}'
-#}

{% macro wap_begin(branch, models=['order_status']) %}
  {% for model in models %}
    {% do run_query("alter table " ~ target.schema ~ "." ~ model ~ " create branch if not exists " ~ branch) %}
  {% endfor %}
  {{ log("branch " ~ branch ~ " ready on " ~ models | join(', '), info=True) }}
{% endmacro %}

{% macro wap_audit(branch, model='order_status') %}
  {#- What must hold before anyone reads the rows: one row per order, a status, no negative amount. -#}
  {% set relation = target.schema ~ "." ~ model ~ ".branch_" ~ branch %}
  {% set bad = run_query(
      "select count(*) from " ~ relation ~ " where status is null or amount < 0 or order_id in "
      ~ "(select order_id from " ~ relation ~ " group by order_id having count(*) > 1)"
  ).columns[0].values()[0] %}
  {% if bad > 0 %}
    {{ exceptions.raise_compiler_error("audit of " ~ relation ~ " failed: " ~ bad ~ " bad rows; not published") }}
  {% endif %}
  {{ log("audit of " ~ relation ~ " passed", info=True) }}
{% endmacro %}

{% macro wap_publish(branch, models=['order_status']) %}
  {% for model in models %}
    {% set table = target.schema ~ "." ~ model %}
    {% do run_query("call system.fast_forward(table => '" ~ table ~ "', branch => 'main', to => '" ~ branch ~ "')") %}
    {% do run_query("alter table " ~ table ~ " drop branch " ~ branch) %}
  {% endfor %}
  {{ log("published " ~ branch ~ " to main of " ~ models | join(', '), info=True) }}
{% endmacro %}
