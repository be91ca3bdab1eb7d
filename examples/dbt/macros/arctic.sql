{#-
  dbt-spark's create_table_as, plus a `primary_key` model config: a model with
  `primary_key='id'` (or a list) becomes an arctic primary-key table, written with Amoro's syntax

      create table db.t primary key (id) [using arctic] ... as select ...

  Everything else is dbt-spark's own macro (file format, table properties, partitioning, location,
  comment). Defined in the project, it takes precedence over the adapter's spark__create_table_as.
-#}
{% macro spark__create_table_as(temporary, relation, compiled_code, language='sql') -%}
  {%- if language != 'sql' -%}
    {{ exceptions.raise_compiler_error("arctic_shop models are SQL models") }}
  {%- elif temporary -%}
    {{ create_temporary_view(relation, compiled_code) }}
  {%- else -%}
    {%- set primary_key = config.get('primary_key') -%}
    {%- if primary_key is string -%}{%- set primary_key = [primary_key] -%}{%- endif -%}
    {% if config.get('file_format', validator=validation.any[basestring]) in ['delta', 'iceberg'] %}
      create or replace table {{ relation }}
    {% else %}
      create table {{ relation }}
    {% endif %}
    {%- if primary_key %}
      primary key ({{ primary_key | join(', ') }})
    {%- endif %}
    {{ file_format_clause() }}
    {{ tblproperties_clause() }}
    {{ partition_cols(label="partitioned by") }}
    {{ location_clause() }}
    {{ comment_clause() }}
    as
    {{ compiled_code }}
  {%- endif -%}
{%- endmacro %}
