{#-
  `materialized='materialized_view'` on arctic-sql: the first run creates the view
  (CREATE MATERIALIZED VIEW ... AS the model's query), later runs REFRESH it (incrementally where
  its query allows, see DESCRIBE MATERIALIZED VIEW), and a run whose query changed (its md5 kept as
  the view's table property `dbt.sql_hash`) or `--full-refresh` drops and creates it again.

  dbt-spark lists every relation as a table or a view (from SHOW TABLE EXTENDED), so dbt's own
  materialized_view materialization cannot tell a view to refresh from a table to replace; this one
  asks the view's properties instead. A relation of that name not made here (a table, a view) is
  dropped and replaced by the view.
-#}
{% materialization materialized_view, adapter='spark' %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set existing = adapter.get_relation(database=this.database, schema=this.schema, identifier=this.identifier) -%}
  {%- set sql_hash = local_md5(sql) -%}
  {%- set rebuild = existing is none or should_full_refresh() or existing.is_view -%}
  {%- set made_here = false -%}
  {%- if existing is not none and not existing.is_view -%}
    {%- set kept = {} -%}
    {%- for row in run_query("show tblproperties " ~ target_relation).rows -%}
      {%- do kept.update({row[0]: row[1]}) -%}
    {%- endfor -%}
    {%- set made_here = 'dbt.sql_hash' in kept -%}
    {%- if kept.get('dbt.sql_hash') != sql_hash -%}{%- set rebuild = true -%}{%- endif -%}
  {%- endif -%}

  {{ run_hooks(pre_hooks) }}
  {%- if rebuild and made_here -%}
    {% do run_query("drop materialized view " ~ target_relation) %}
  {%- elif rebuild and existing is not none -%}
    {% do adapter.drop_relation(existing) %}
  {%- endif -%}
  {% call statement('main') -%}
    {%- if rebuild -%}
      create materialized view {{ target_relation }}
      tblproperties ('dbt.sql_hash' = '{{ sql_hash }}')
      as {{ sql }}
    {%- else -%}
      refresh materialized view {{ target_relation }}
    {%- endif -%}
  {%- endcall %}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
